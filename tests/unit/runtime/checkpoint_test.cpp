// Tests for runtime/host/Checkpoint.h: a commit is whole or absent (a save
// killed at random points, 120 times: the newest checkpoint that verifies
// holds exactly what its step wrote), damage is found, replacing is one
// step, listing and averaging.
#include "runtime/host/Checkpoint.h"

#include "runtime/Safetensors.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>

#include "tests/unit/runtime/TestUtil.h"

namespace transfuse::rt {
namespace {

using testing::TempDir;
using testing::writeBytes;

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// What step `step` writes: two files whose bytes depend on the step.
Status writeStep(const std::string& tmp, int64_t step) {
  writeBytes(tmp + "/a.bin", std::string(200000 + step % 7, static_cast<char>('a' + step % 26)));
  writeBytes(tmp + "/state.json", "{\"step\": " + std::to_string(step) + "}\n");
  return Status::ok();
}

bool holdsStep(const std::string& dir, int64_t step) {
  return readFile(dir + "/a.bin") ==
             std::string(200000 + step % 7, static_cast<char>('a' + step % 26)) &&
         readFile(dir + "/state.json") == "{\"step\": " + std::to_string(step) + "}\n";
}

TEST(CheckpointTest, CommitThenVerify) {
  TempDir dir;
  const std::string path = dir.file(checkpointName(12));
  ASSERT_TRUE(commitDirectory(path, [](const std::string& tmp) { return writeStep(tmp, 12); }).isOk());
  EXPECT_TRUE(verifyDirectory(path).isOk());
  EXPECT_TRUE(holdsStep(path, 12));
  EXPECT_EQ(listCheckpoints(dir.path()), std::vector<int64_t>{12});
  // No temporaries left behind.
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) (void)e, ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(CheckpointTest, DamageAndTearsAreFound) {
  TempDir dir;
  const std::string path = dir.file("step-00000001");
  ASSERT_TRUE(commitDirectory(path, [](const std::string& tmp) { return writeStep(tmp, 1); }).isOk());
  std::string a = readFile(path + "/a.bin");
  writeBytes(path + "/a.bin", a.substr(0, a.size() / 2));
  Status torn = verifyDirectory(path);
  ASSERT_FALSE(torn.isOk());
  EXPECT_NE(torn.message().find("a.bin"), std::string::npos) << torn.message();
  EXPECT_NE(torn.message().find("torn"), std::string::npos) << torn.message();
  a[100] ^= 1;
  writeBytes(path + "/a.bin", a);
  Status damaged = verifyDirectory(path);
  ASSERT_FALSE(damaged.isOk());
  EXPECT_NE(damaged.message().find("CRC-32"), std::string::npos) << damaged.message();
  std::filesystem::remove(path + "/CHECKSUMS");
  EXPECT_FALSE(verifyDirectory(path).isOk());
  EXPECT_FALSE(verifyDirectory(dir.file("missing")).isOk());
}

TEST(CheckpointTest, AFailedWriteLeavesNothing) {
  TempDir dir;
  Status s = commitDirectory(dir.file("step-00000002"), [](const std::string& tmp) {
    writeBytes(tmp + "/half.bin", "x");
    return Status::error("disk full");
  });
  EXPECT_FALSE(s.isOk());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(CheckpointTest, ReplacingIsOneStep) {
  TempDir dir;
  const std::string path = dir.file("averaged");
  ASSERT_TRUE(commitDirectory(path, [](const std::string& tmp) { return writeStep(tmp, 1); }).isOk());
  ASSERT_TRUE(commitDirectory(path, [](const std::string& tmp) { return writeStep(tmp, 2); }).isOk());
  EXPECT_TRUE(verifyDirectory(path).isOk());
  EXPECT_TRUE(holdsStep(path, 2));
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) (void)e, ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(CheckpointTest, ListsStepsInOrderAndIgnoresOtherNames) {
  TempDir dir;
  for (const char* name : {"step-00000010", "step-00000002", "step-0000003", "stepx00000004",
                           "averaged", ".step-00000005.tmp-1"})
    std::filesystem::create_directory(dir.file(name));
  EXPECT_EQ(listCheckpoints(dir.path()), (std::vector<int64_t>{2, 10}));
}

// A saving process killed at a random moment, 120 times: whatever it left,
// every checkpoint under a final name verifies and holds what its step
// wrote, and the next commit cleans up the dead one's temporary.
TEST(CheckpointTest, KilledSavesNeverLeaveATornCheckpoint) {
  TempDir dir;
  std::mt19937 rng(12345);
  int64_t nextStep = 1, killedMidway = 0;
  for (int trial = 0; trial < 120; ++trial) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int64_t step = nextStep;; ++step) {
        Status s = commitDirectory(dir.path() + "/" + checkpointName(step),
                                   [&](const std::string& tmp) { return writeStep(tmp, step); });
        if (!s.isOk()) _exit(2);
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the saving process failed on its own";
    std::vector<int64_t> steps = listCheckpoints(dir.path());
    for (int64_t s : steps) {
      const std::string path = dir.path() + "/" + checkpointName(s);
      ASSERT_TRUE(verifyDirectory(path).isOk()) << "trial " << trial << ": " << path;
      ASSERT_TRUE(holdsStep(path, s)) << "trial " << trial << ": " << path;
    }
    for (auto& e : std::filesystem::directory_iterator(dir.path()))
      if (e.path().filename().string()[0] == '.') ++killedMidway;
    if (!steps.empty()) nextStep = steps.back() + 1;
    // Keep the directory small: old checkpoints go.
    for (size_t i = 0; i + 2 < steps.size(); ++i)
      ASSERT_TRUE(removeDirectory(dir.path() + "/" + checkpointName(steps[i])).isOk());
  }
  EXPECT_GT(nextStep, 1) << "no save ever completed: the kills came too early to test anything";
  EXPECT_GT(killedMidway, 0) << "no save was ever killed midway";
  // The next commit removes the temporaries the killed ones left.
  ASSERT_TRUE(commitDirectory(dir.path() + "/" + checkpointName(nextStep),
                              [&](const std::string& tmp) { return writeStep(tmp, nextStep); })
                  .isOk());
  for (auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_NE(e.path().filename().string()[0], '.') << e.path();
}

TEST(CheckpointTest, AveragesTensorsByName) {
  TempDir dir;
  Tensor a = Tensor::zeros(DType::F32, {2, 2}), b = Tensor::zeros(DType::F32, {2, 2});
  Tensor c = Tensor::zeros(DType::F32, {3});
  for (int i = 0; i < 4; ++i) {
    a.data<float>()[i] = static_cast<float>(i);
    b.data<float>()[i] = static_cast<float>(10 * i + 1);
  }
  ASSERT_TRUE(writeSafetensors(dir.file("a"), {{"w", &a}, {"c", &c}}).isOk());
  ASSERT_TRUE(writeSafetensors(dir.file("b"), {{"c", &c}, {"w", &b}}).isOk());
  auto mean = averageSafetensors({dir.file("a"), dir.file("b")});
  ASSERT_TRUE(mean.isOk()) << mean.status().message();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(mean->at("w").data<float>()[i], (i + 10 * i + 1) / 2.0f);
  EXPECT_EQ(mean->at("c").shape, std::vector<int64_t>{3});
  // One file averages to itself, bit for bit.
  auto one = averageSafetensors({dir.file("b")});
  ASSERT_TRUE(one.isOk());
  EXPECT_EQ(one->at("w").bytes, b.bytes);
  // Shapes or names that differ are errors naming the file and tensor.
  Tensor wide = Tensor::zeros(DType::F32, {2, 3});
  ASSERT_TRUE(writeSafetensors(dir.file("d"), {{"w", &wide}, {"c", &c}}).isOk());
  auto bad = averageSafetensors({dir.file("a"), dir.file("d")});
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("'w'"), std::string::npos) << bad.status().message();
  ASSERT_TRUE(writeSafetensors(dir.file("e"), {{"w", &a}}).isOk());
  EXPECT_FALSE(averageSafetensors({dir.file("a"), dir.file("e")}).isOk());
  EXPECT_FALSE(averageSafetensors({}).isOk());
}

}  // namespace
}  // namespace transfuse::rt
