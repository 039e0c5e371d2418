// Tests for runtime/Safetensors.h: write/read round trip of every dtype with
// metadata, F16/BF16 -> F32 reads, header padding, atomic writes (no file left on
// failure), and one crafted bad file per validation rule of SafetensorsFile::open,
// each checked to fail with a message naming the file and, where there is one,
// the tensor.
#include "runtime/Safetensors.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/unit/runtime/TestUtil.h"

namespace transfuse::rt {
namespace {

using testing::rawSafetensors;
using testing::TempDir;
using testing::writeBytes;

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Tensor patterned(DType dtype, std::vector<int64_t> shape, uint8_t salt) {
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<uint8_t>(i * 31 + salt);
  if (dtype == DType::Bool)
    for (auto& b : t.bytes) b &= 1;
  return t;
}

TEST(SafetensorsTest, RoundTripEveryDType) {
  TempDir dir;
  const std::string path = dir.file("all.safetensors");
  std::vector<Tensor> ts;
  const DType all[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                       DType::I32, DType::I64, DType::Bool};
  uint8_t salt = 1;
  for (DType d : all) ts.push_back(patterned(d, {2, 3}, salt++));
  ts.push_back(patterned(DType::F32, {}, 9));      // scalar
  ts.push_back(patterned(DType::F32, {0, 4}, 9));  // empty
  ts.push_back(patterned(DType::I64, {5}, 11));
  std::vector<std::pair<std::string, const Tensor*>> list;
  const char* names[] = {"z.f32", "a.f64", "m.f16", "b.bf16", "i32", "i64",
                         "mask", "scalar", "empty", "ids"};
  for (size_t i = 0; i < ts.size(); ++i) list.emplace_back(names[i], &ts[i]);
  std::map<std::string, std::string> md = {{"format", "pt"}, {"note", "x\"y"}};
  ASSERT_TRUE(writeSafetensors(path, list, md).isOk());

  std::string raw = readFile(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(raw[i]);
  EXPECT_EQ(n % 8, 0u) << "header not padded to a multiple of 8";

  StatusOr<SafetensorsFile> f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.isOk()) << f.status().message();
  std::vector<std::string> expectNames(std::begin(names), std::end(names));
  EXPECT_EQ(f->names(), expectNames);  // file order, not sorted
  EXPECT_EQ(f->metadata(), md);
  EXPECT_EQ(f->path(), path);
  for (size_t i = 0; i < ts.size(); ++i) {
    ASSERT_TRUE(f->has(names[i]));
    const SafetensorsFile::Info* info = f->info(names[i]);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->dtype, ts[i].dtype);
    EXPECT_EQ(info->shape, ts[i].shape);
    StatusOr<Tensor> t = f->read(names[i]);
    ASSERT_TRUE(t.isOk()) << t.status().message();
    EXPECT_EQ(t->dtype, ts[i].dtype);
    EXPECT_EQ(t->shape, ts[i].shape);
    EXPECT_EQ(t->bytes, ts[i].bytes) << names[i];
  }
  EXPECT_FALSE(f->has("nope"));
  EXPECT_EQ(f->info("nope"), nullptr);
  EXPECT_FALSE(f->read("nope").isOk());

  // Moving keeps the mapping valid.
  SafetensorsFile moved = std::move(*f);
  StatusOr<Tensor> again = moved.read("ids");
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(again->bytes, ts[9].bytes);
}

TEST(SafetensorsTest, EmptyFileRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("empty.safetensors");
  ASSERT_TRUE(writeSafetensors(path, {}).isOk());
  StatusOr<SafetensorsFile> f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.isOk()) << f.status().message();
  EXPECT_TRUE(f->names().empty());
}

TEST(SafetensorsTest, ReadAsF32ConvertsHalfTypes) {
  TempDir dir;
  const std::string path = dir.file("half.safetensors");
  const float values[] = {1.0f, -2.5f, 65504.0f, 0.0f, std::ldexp(1.0f, -24), -0.125f};
  Tensor f32 = Tensor::zeros(DType::F32, {2, 3});
  Tensor f16 = Tensor::zeros(DType::F16, {2, 3});
  Tensor bf16 = Tensor::zeros(DType::BF16, {2, 3});
  Tensor i32 = Tensor::zeros(DType::I32, {2});
  for (int i = 0; i < 6; ++i) {
    f32.data<float>()[i] = values[i];
    f16.data<uint16_t>()[i] = floatToHalf(values[i]);
    bf16.data<uint16_t>()[i] = floatToBf16(values[i]);
  }
  ASSERT_TRUE(writeSafetensors(path, {{"f32", &f32}, {"f16", &f16}, {"bf16", &bf16},
                                      {"i32", &i32}})
                  .isOk());
  StatusOr<SafetensorsFile> f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.isOk()) << f.status().message();
  for (const char* name : {"f32", "f16", "bf16"}) {
    StatusOr<Tensor> t = f->readAsF32(name);
    ASSERT_TRUE(t.isOk()) << t.status().message();
    EXPECT_EQ(t->dtype, DType::F32);
    EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 3}));
    for (int i = 0; i < 6; ++i) {
      float expect = std::string(name) == "bf16" ? bf16ToFloat(floatToBf16(values[i])) : values[i];
      EXPECT_EQ(t->data<float>()[i], expect) << name << " " << i;
    }
  }
  StatusOr<Tensor> bad = f->readAsF32("i32");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("'i32'"), std::string::npos);
  EXPECT_NE(bad.status().message().find(path), std::string::npos);
}

TEST(SafetensorsTest, WriteRejectsBadInput) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  Tensor t = Tensor::zeros(DType::F32, {2});
  Tensor broken = t;
  broken.bytes.resize(5);
  EXPECT_FALSE(writeSafetensors(path, {{"a", &t}, {"a", &t}}).isOk());
  EXPECT_FALSE(writeSafetensors(path, {{"__metadata__", &t}}).isOk());
  EXPECT_FALSE(writeSafetensors(path, {{"", &t}}).isOk());
  EXPECT_FALSE(writeSafetensors(path, {{"n", nullptr}}).isOk());
  Status s = writeSafetensors(path, {{"broken", &broken}});
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("'broken'"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(SafetensorsTest, AtomicWriteLeavesNoFileInUnwritableDirectory) {
  TempDir dir;
  const std::string sub = dir.file("ro");
  ASSERT_EQ(::mkdir(sub.c_str(), 0555), 0);
  const std::string path = sub + "/out.safetensors";
  // root bypasses directory permissions; then the check below is vacuous, so also
  // use a "directory" that is really a regular file, which fails for everyone.
  Tensor t = Tensor::zeros(DType::F32, {4});
  Status s = writeSafetensors(path, {{"t", &t}});
  if (::geteuid() != 0) {
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find(path), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_TRUE(std::filesystem::is_empty(sub));
  }
  writeBytes(dir.file("plainfile"), "x");
  const std::string path2 = dir.file("plainfile") + "/out.safetensors";
  Status s2 = writeSafetensors(path2, {{"t", &t}});
  ASSERT_FALSE(s2.isOk());
  EXPECT_NE(s2.message().find(path2), std::string::npos);
}

// A failure in the middle of writing the data (here: the file size limit) removes
// the temporary file and leaves an existing file at the path untouched.
TEST(SafetensorsTest, AtomicWriteFailureMidWriteLeavesNoPartialFile) {
  TempDir dir;
  const std::string path = dir.file("big.safetensors");
  const std::string fresh = dir.file("fresh.safetensors");
  writeBytes(path, "old contents");
  Tensor t = Tensor::zeros(DType::F32, {4096});  // 16 KiB
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  struct rlimit small = old;
  small.rlim_cur = 1024;
  auto oldHandler = ::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  Status s = writeSafetensors(path, {{"t", &t}});
  Status s2 = writeSafetensors(fresh, {{"t", &t}});
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, oldHandler);
  ASSERT_FALSE(s.isOk());
  ASSERT_FALSE(s2.isOk());
  EXPECT_NE(s.message().find(path), std::string::npos);
  EXPECT_EQ(readFile(path), "old contents");
  EXPECT_FALSE(std::filesystem::exists(fresh));
  size_t count = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++count;
  }
  EXPECT_EQ(count, 1u) << "temporary file left behind";
}

// ---------------------------------------------------------------------------
// One crafted bad file per validation rule.

struct BadFileTest : ::testing::Test {
  TempDir dir;
  // Writes `bytes`, opens it, and checks the error names the file, the tensor (if
  // given) and contains `what`.
  void expectError(const std::string& bytes, const std::string& tensor, const std::string& what) {
    const std::string path = dir.file("bad.safetensors");
    writeBytes(path, bytes);
    StatusOr<SafetensorsFile> f = SafetensorsFile::open(path);
    ASSERT_FALSE(f.isOk()) << "accepted a bad file (expected: " << what << ")";
    const std::string& msg = f.status().message();
    EXPECT_NE(msg.find("'" + path + "'"), std::string::npos) << msg;
    if (!tensor.empty()) EXPECT_NE(msg.find("'" + tensor + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
};

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

TEST_F(BadFileTest, ValidFileIsAccepted) {
  // Sanity check of the helpers: a good crafted file opens (tensors out of order).
  const std::string path = dir.file("good.safetensors");
  writeBytes(path, rawSafetensors("{" + entry("b", "F32", "[1]", "[4,8]") + "," +
                                      entry("a", "F32", "[1]", "[0,4]") +
                                      ",\"__metadata__\":{\"k\":\"v\"}}   ",
                                  std::string(8, '\0')));
  StatusOr<SafetensorsFile> f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.isOk()) << f.status().message();
  EXPECT_EQ(f->names(), (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(f->metadata().at("k"), "v");
}

TEST_F(BadFileTest, ShorterThan8Bytes) { expectError("abc", "", "shorter than the 8-byte"); }

TEST_F(BadFileTest, MissingFile) {
  StatusOr<SafetensorsFile> f = SafetensorsFile::open(dir.file("none.safetensors"));
  ASSERT_FALSE(f.isOk());
  EXPECT_NE(f.status().message().find("none.safetensors"), std::string::npos);
}

TEST_F(BadFileTest, HeaderLengthOverCap) {
  expectError(rawSafetensors("{}", "", 200ull * 1000 * 1000), "", "exceeds the limit");
}

TEST_F(BadFileTest, HeaderLengthPastEnd) {
  expectError(rawSafetensors("{}", "", 100), "", "past the end of the file");
}

TEST_F(BadFileTest, HeaderNotJson) {
  expectError(rawSafetensors("{\"a\": ", ""), "", "not valid JSON");
}

TEST_F(BadFileTest, HeaderNotObject) { expectError(rawSafetensors("[1, 2]", ""), "", "not a JSON object"); }

TEST_F(BadFileTest, EntryNotObject) {
  expectError(rawSafetensors("{\"w\": 3}", ""), "w", "entry is not a JSON object");
}

TEST_F(BadFileTest, MissingDtype) {
  expectError(rawSafetensors("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", std::string(4, 0)),
              "w", "missing 'dtype'");
}

TEST_F(BadFileTest, MissingShape) {
  expectError(
      rawSafetensors("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", std::string(4, 0)),
      "w", "missing 'shape'");
}

TEST_F(BadFileTest, MissingDataOffsets) {
  expectError(rawSafetensors("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", std::string(4, 0)), "w",
              "missing 'data_offsets'");
}

TEST_F(BadFileTest, DtypeNotString) {
  expectError(rawSafetensors("{\"w\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}",
                             std::string(4, 0)),
              "w", "'dtype' is not a string");
}

TEST_F(BadFileTest, ShapeNotArray) {
  expectError(rawSafetensors("{" + entry("w", "F32", "4", "[0,4]") + "}", std::string(4, 0)),
              "w", "'shape' is not an array");
}

TEST_F(BadFileTest, ShapeElementNotInteger) {
  expectError(rawSafetensors("{" + entry("w", "F32", "[1.5]", "[0,4]") + "}", std::string(4, 0)),
              "w", "not an integer");
}

TEST_F(BadFileTest, UnknownDtype) {
  expectError(rawSafetensors("{" + entry("w", "Q8", "[1]", "[0,1]") + "}", std::string(1, 0)),
              "w", "unknown dtype 'Q8'");
}

TEST_F(BadFileTest, NegativeDimension) {
  expectError(rawSafetensors("{" + entry("w", "F32", "[2,-1]", "[0,0]") + "}", ""), "w",
              "negative dimension");
}

TEST_F(BadFileTest, ElementCountOverflow) {
  expectError(rawSafetensors("{" + entry("w", "F32", "[4611686018427387904,4]", "[0,0]") + "}", ""),
              "w", "overflows int64");
}

TEST_F(BadFileTest, ByteSizeOverflow) {
  // 2^62 elements fit in int64, but times 4 bytes do not.
  expectError(rawSafetensors("{" + entry("w", "F32", "[4611686018427387904]", "[0,0]") + "}", ""),
              "w", "overflows int64");
}

TEST_F(BadFileTest, DataOffsetsNotTwoIntegers) {
  for (const char* offsets : {"[0]", "[0,4,8]", "[0,\"4\"]", "[0,4.5]", "{}"}) {
    SCOPED_TRACE(offsets);
    expectError(rawSafetensors("{" + entry("w", "F32", "[1]", offsets) + "}", std::string(4, 0)),
                "w", "not an array of two integers");
  }
}

TEST_F(BadFileTest, NegativeOffset) {
  expectError(rawSafetensors("{" + entry("w", "F32", "[0]", "[-4,-4]") + "}", ""), "w",
              "negative data offset");
}

TEST_F(BadFileTest, BeginAfterEnd) {
  expectError(rawSafetensors("{" + entry("w", "F32", "[1]", "[8,4]") + "}", std::string(8, 0)),
              "w", "is after end");
}

TEST_F(BadFileTest, EndPastDataSection) {
  expectError(rawSafetensors("{" + entry("w", "F32", "[2]", "[0,8]") + "}", std::string(4, 0)),
              "w", "past the end of the data section");
}

TEST_F(BadFileTest, ByteSizeMismatch) {
  expectError(rawSafetensors("{" + entry("w", "F32", "[2]", "[0,4]") + "}", std::string(4, 0)),
              "w", "needs 8");
}

TEST_F(BadFileTest, OverlappingTensors) {
  expectError(rawSafetensors("{" + entry("a", "F32", "[2]", "[0,8]") + "," +
                                 entry("b", "F32", "[2]", "[4,12]") + "}",
                             std::string(12, 0)),
              "b", "overlaps tensor 'a'");
}

TEST_F(BadFileTest, GapBetweenTensors) {
  expectError(rawSafetensors("{" + entry("a", "F32", "[1]", "[0,4]") + "," +
                                 entry("b", "F32", "[1]", "[8,12]") + "}",
                             std::string(12, 0)),
              "b", "gap of 4");
}

TEST_F(BadFileTest, GapAtStart) {
  expectError(rawSafetensors("{" + entry("a", "F32", "[1]", "[4,8]") + "}", std::string(8, 0)),
              "a", "gap of 4");
}

TEST_F(BadFileTest, TrailingBytes) {
  expectError(rawSafetensors("{" + entry("a", "F32", "[1]", "[0,4]") + "}", std::string(6, 0)),
              "", "2 trailing bytes");
}

TEST_F(BadFileTest, DuplicateTensorName) {
  expectError(rawSafetensors("{" + entry("a", "F32", "[1]", "[0,4]") + "," +
                                 entry("a", "F32", "[1]", "[4,8]") + "}",
                             std::string(8, 0)),
              "a", "duplicate tensor name");
}

TEST_F(BadFileTest, MetadataNotObject) {
  expectError(rawSafetensors("{\"__metadata__\":[\"x\"]}", ""), "__metadata__", "not a JSON object");
}

TEST_F(BadFileTest, MetadataValueNotString) {
  expectError(rawSafetensors("{\"__metadata__\":{\"epoch\":3}}", ""), "epoch", "is not a string");
}

}  // namespace
}  // namespace transfuse::rt
