// Tests for runtime/host/Corpus.h: lines of plain and gzip files (line
// endings, a missing last newline, the errors naming file and line), and the
// epoch batches (every example once, the token budget, determinism, epochs
// and seeds differing, the row limit).
#include "runtime/host/Corpus.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <set>

#include "tests/unit/runtime/TestUtil.h"

namespace transfuse::rt {
namespace {

using testing::TempDir;
using testing::writeBytes;

void writeGzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

TEST(CorpusTest, ReadsPlainAndGzipLinesAlike) {
  TempDir dir;
  const std::string text = "Two men.\r\nZwei M\xc3\xa4nner.\n\nlast without newline";
  writeBytes(dir.file("a.txt"), text);
  writeGzip(dir.file("a.gz"), text);
  for (const char* name : {"a.txt", "a.gz"}) {
    StatusOr<std::vector<std::string>> lines = readTextLines(dir.file(name));
    ASSERT_TRUE(lines.isOk()) << lines.status().message();
    EXPECT_EQ(*lines, (std::vector<std::string>{"Two men.", "Zwei M\xc3\xa4nner.", "",
                                                "last without newline"}));
  }
  writeBytes(dir.file("b.txt"), "one\ntwo\n");
  EXPECT_EQ(readTextLines(dir.file("b.txt"))->size(), 2u);
}

TEST(CorpusTest, BadFilesAreErrorsNamingFileAndLine) {
  TempDir dir;
  struct Case {
    std::string name, bytes, message;
  } cases[] = {
      {"empty.txt", "", "the file is empty"},
      {"nul.txt", std::string("ok\nbad\0line\n", 12), "line 2: a NUL byte"},
      {"latin1.txt", "ok\nok\nM\xe4nner\n", "line 3: bytes that are not UTF-8 at column 2"},
      {"overlong.txt", "\xc0\xaf\n", "line 1: bytes that are not UTF-8"},
      {"surrogate.txt", "\xed\xa0\x80\n", "line 1: bytes that are not UTF-8"},
      {"cut.txt", "ok \xe2\x82", "line 1: bytes that are not UTF-8 at column 4"},
  };
  for (const Case& c : cases) {
    writeBytes(dir.file(c.name), c.bytes);
    StatusOr<std::vector<std::string>> lines = readTextLines(dir.file(c.name));
    ASSERT_FALSE(lines.isOk()) << c.name;
    EXPECT_NE(lines.status().message().find(dir.file(c.name)), std::string::npos)
        << lines.status().message();
    EXPECT_NE(lines.status().message().find(c.message), std::string::npos)
        << lines.status().message();
  }
  EXPECT_FALSE(readTextLines(dir.file("missing.txt")).isOk());
  // A gzip stream cut short, and one with a damaged body.
  writeGzip(dir.file("whole.gz"), std::string(5000, 'x') + "\n");
  std::ifstream in(dir.file("whole.gz"), std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), {});
  writeBytes(dir.file("short.gz"), gz.substr(0, gz.size() / 2));
  StatusOr<std::vector<std::string>> cut = readTextLines(dir.file("short.gz"));
  ASSERT_FALSE(cut.isOk());
  EXPECT_NE(cut.status().message().find("gzip"), std::string::npos) << cut.status().message();
  std::string damaged = gz;
  damaged[damaged.size() - 6] ^= 0x55;  // the CRC of the trailer
  writeBytes(dir.file("damaged.gz"), damaged);
  EXPECT_FALSE(readTextLines(dir.file("damaged.gz")).isOk());
}

std::vector<ExampleLength> someLengths(int n) {
  std::vector<ExampleLength> lengths;
  for (int i = 0; i < n; ++i) lengths.push_back({3 + (i * 7) % 29, 2 + (i * 11) % 31});
  return lengths;
}

TEST(CorpusTest, EpochBatchesCoverEveryExampleOnceWithinTheBudget) {
  std::vector<ExampleLength> lengths = someLengths(500);
  for (int64_t maxRows : {0, 8}) {
    auto batches = epochBatches(lengths, 300, maxRows, 7, 0);
    std::vector<int> seen(lengths.size(), 0);
    for (const auto& b : batches) {
      ASSERT_FALSE(b.empty());
      int64_t width = 0;
      for (int32_t i : b) {
        ++seen[i];
        width = std::max<int64_t>(width, std::max(lengths[i].src, lengths[i].tgt));
      }
      EXPECT_LE(static_cast<int64_t>(b.size()) * width, 300);
      if (maxRows) EXPECT_LE(static_cast<int64_t>(b.size()), maxRows);
      EXPECT_LE(static_cast<int64_t>(b.size()), maxBatchRows(lengths, 300, maxRows));
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
  }
}

TEST(CorpusTest, BatchesAreBucketedByLength) {
  // Within a batch the longer sides differ little: the padding stays small.
  std::vector<ExampleLength> lengths = someLengths(2000);
  int64_t padded = 0, real = 0;
  for (const auto& b : epochBatches(lengths, 600, 0, 1, 0)) {
    int64_t width = 0;
    for (int32_t i : b) width = std::max<int64_t>(width, std::max(lengths[i].src, lengths[i].tgt));
    for (int32_t i : b) real += std::max(lengths[i].src, lengths[i].tgt);
    padded += width * static_cast<int64_t>(b.size());
  }
  EXPECT_LT(static_cast<double>(padded) / real, 1.05);
}

TEST(CorpusTest, EpochBatchesAreAFunctionOfSeedAndEpoch) {
  std::vector<ExampleLength> lengths = someLengths(300);
  auto a = epochBatches(lengths, 200, 0, 3, 2);
  EXPECT_EQ(a, epochBatches(lengths, 200, 0, 3, 2));
  EXPECT_NE(a, epochBatches(lengths, 200, 0, 3, 1));
  EXPECT_NE(a, epochBatches(lengths, 200, 0, 4, 2));
}

TEST(CorpusTest, FileOrderKeepsConsecutiveLinesEveryEpoch) {
  std::vector<ExampleLength> lengths = someLengths(100);
  auto a = epochBatches(lengths, 120, 0, 3, 0, /*bucket=*/false);
  EXPECT_EQ(a, epochBatches(lengths, 120, 0, 9, 5, /*bucket=*/false));
  int32_t next = 0;
  for (const auto& b : a)
    for (int32_t i : b) EXPECT_EQ(i, next++);
  EXPECT_EQ(next, 100);
}

TEST(CorpusTest, AnExampleOverTheBudgetIsABatchAlone) {
  std::vector<ExampleLength> lengths{{4, 4}, {50, 3}, {4, 5}};
  auto batches = epochBatches(lengths, 20, 0, 0, 0);
  std::set<std::vector<int32_t>> got(batches.begin(), batches.end());
  EXPECT_TRUE(got.count({1})) << batches.size();
}

}  // namespace
}  // namespace transfuse::rt
