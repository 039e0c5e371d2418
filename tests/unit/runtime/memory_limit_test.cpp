// The machine's memory limit (runtime/MemoryLimit.h) and the checks made
// with it before large allocations: parameters bound or drawn at random.
#include "runtime/MemoryLimit.h"
#include "runtime/WeightBinding.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>

namespace transfuse::rt {
namespace {

TEST(MemoryLimitTest, IsAtMostPhysicalMemory) {
  const uint64_t physical = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                            static_cast<uint64_t>(::sysconf(_SC_PAGE_SIZE));
  EXPECT_GT(memoryLimitBytes(), uint64_t{1} << 20);
  EXPECT_LE(memoryLimitBytes(), physical);
  EXPECT_EQ(memoryLimitBytes(), memoryLimitBytes());
}

TEST(MemoryLimitTest, RefusesWhatDoesNotFitNamingIt) {
  EXPECT_TRUE(checkFitsInMemory("a small thing", 1024).isOk());
  EXPECT_TRUE(checkFitsInMemory("all of it", memoryLimitBytes()).isOk());
  Status s = checkFitsInMemory("the arena of @forward", memoryLimitBytes() + 1);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("the arena of @forward needs "), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("more than the memory of this machine"), std::string::npos)
      << s.message();
}

TEST(MemoryLimitTest, SaturatingBytes) {
  EXPECT_EQ(saturatingBytes(3, 4), 12u);
  EXPECT_EQ(saturatingBytes(0, UINT64_MAX), 0u);
  EXPECT_EQ(saturatingBytes(uint64_t{1} << 40, uint64_t{1} << 40), UINT64_MAX);
  EXPECT_FALSE(checkFitsInMemory("x", saturatingBytes(UINT64_MAX, 2)).isOk());
  EXPECT_EQ(saturatingAdd(2, 3), 5u);
  EXPECT_EQ(saturatingAdd(UINT64_MAX - 1, 3), UINT64_MAX);
  const int64_t shape[] = {2, 3, 4};
  EXPECT_EQ(tensorBytes(shape, 3, 4), 96u);
  EXPECT_EQ(tensorBytes(shape, 0, 8), 8u);  // a scalar
  const int64_t huge[] = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(tensorBytes(huge, 2, 4), UINT64_MAX);
  const int64_t negative[] = {3, -1};
  EXPECT_EQ(tensorBytes(negative, 2, 4), 0u);
}

// A vocabulary of 2^24 rows of 2^24 floats (1 PiB): refused by name, at once,
// without touching memory.
TEST(MemoryLimitTest, HugeParametersAreRefusedBeforeAllocation) {
  std::vector<ParamSpec> params = {
      {"small", {4, 4}, InitKind::Ones, 0, 0, false},
      {"tok_emb.weight", {1 << 24, 1 << 24}, InitKind::Normal002, 0, 0, false},
  };
  auto t0 = std::chrono::steady_clock::now();
  Status fit = checkParamsFit(params);
  ASSERT_FALSE(fit.isOk());
  EXPECT_NE(fit.message().find("'tok_emb.weight' [16777216, 16777216]"), std::string::npos)
      << fit.message();
  auto random = randomWeights(params, 1);
  ASSERT_FALSE(random.isOk());
  EXPECT_EQ(random.status().message(), fit.message());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  // Many parameters that fit one by one but not together.
  std::vector<ParamSpec> many;
  for (int i = 0; i < 64; ++i)
    many.push_back({"p" + std::to_string(i), {int64_t(memoryLimitBytes() / 128)}, InitKind::Zeros,
                    0, 0, false});
  EXPECT_FALSE(checkParamsFit(many).isOk());
  EXPECT_TRUE(checkParamsFit({}).isOk());
}

}  // namespace
}  // namespace transfuse::rt
