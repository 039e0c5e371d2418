// Tests for runtime/WeightFiles.h: one file, a directory, a Hugging Face shard
// index bound as one set of weights, and each bad index or shard refused with
// an error naming the index, the shard and the tensor.
#include "runtime/WeightFiles.h"

#include <gtest/gtest.h>

#include "runtime/WeightBinding.h"
#include "tests/unit/runtime/TestUtil.h"

namespace transfuse::rt {
namespace {

using testing::contains;
using testing::filled;
using testing::TempDir;

class WeightFilesTest : public ::testing::Test {
protected:
  void shard(const std::string& name, const std::vector<std::pair<std::string, Tensor>>& tensors) {
    std::vector<std::pair<std::string, const Tensor*>> list;
    for (const auto& [n, t] : tensors) list.emplace_back(n, &t);
    Status s = writeSafetensors(dir_.file(name), list);
    ASSERT_TRUE(s.isOk()) << s.message();
  }
  void index(const std::string& json) { testing::writeBytes(dir_.file(kIndex), json); }
  // Two shards and their index: a and b in the first, c in the second.
  void twoShards() {
    shard("model-00001-of-00002.safetensors", {{"a", filled({2, 2}, 1)}, {"b", filled({3}, 2)}});
    shard("model-00002-of-00002.safetensors", {{"c", filled({4}, 3)}});
    index(R"({"metadata": {"total_size": 44}, "weight_map": {
      "a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
      "c": "model-00002-of-00002.safetensors"}})");
  }
  std::string openError(const std::string& path) {
    StatusOr<WeightFiles> w = WeightFiles::open(path);
    EXPECT_FALSE(w.isOk());
    return w.isOk() ? "" : w.status().message();
  }
  static constexpr const char* kIndex = WeightFiles::kIndexFile;
  TempDir dir_;
};

TEST_F(WeightFilesTest, OneFile) {
  shard("w.safetensors", {{"a", filled({2, 2}, 1)}});
  StatusOr<WeightFiles> w = WeightFiles::open(dir_.file("w.safetensors"));
  ASSERT_TRUE(w.isOk()) << w.status().message();
  EXPECT_FALSE(w->sharded());
  EXPECT_EQ(w->names(), std::vector<std::string>{"a"});
  EXPECT_EQ(w->find("a"), &w->files()[0]);
  EXPECT_EQ(w->find("b"), nullptr);
}

TEST_F(WeightFilesTest, DirectoryPrefersTheSingleFile) {
  twoShards();
  shard("model.safetensors", {{"z", filled({1}, 0)}});
  StatusOr<WeightFiles> w = WeightFiles::open(dir_.path());
  ASSERT_TRUE(w.isOk()) << w.status().message();
  EXPECT_EQ(w->path(), dir_.file("model.safetensors"));
  EXPECT_EQ(w->names(), std::vector<std::string>{"z"});
}

TEST_F(WeightFilesTest, ShardsBindAsOneFile) {
  twoShards();
  for (const std::string& path : {dir_.file(kIndex), dir_.path()}) {
    StatusOr<WeightFiles> w = WeightFiles::open(path);
    ASSERT_TRUE(w.isOk()) << w.status().message();
    EXPECT_TRUE(w->sharded());
    EXPECT_EQ(w->path(), dir_.file(kIndex));
    EXPECT_EQ(w->names(), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(w->find("c")->path(), dir_.file("model-00002-of-00002.safetensors"));
    std::vector<ParamSpec> params = {{"c", {4}, InitKind::Zeros, 0, 0, false},
                                     {"a", {2, 2}, InitKind::Zeros, 0, 0, false}};
    std::vector<std::string> warnings;
    auto bound = bindWeights(params, {}, *w, &warnings);
    ASSERT_TRUE(bound.isOk()) << bound.status().message();
    EXPECT_EQ(bound->at("c").bytes, filled({4}, 3).bytes);
    EXPECT_EQ(bound->at("a").bytes, filled({2, 2}, 1).bytes);
    ASSERT_EQ(warnings.size(), 1u);  // b is unused, named with its shard
    EXPECT_EQ(warnings[0], "weights file '" + dir_.file("model-00001-of-00002.safetensors") +
                               "': tensor 'b' is not used by the model");
  }
}

TEST_F(WeightFilesTest, MissingTensorNamesTheIndex) {
  twoShards();
  StatusOr<WeightFiles> w = WeightFiles::open(dir_.path());
  ASSERT_TRUE(w.isOk());
  auto bound = bindWeights({{"d", {1}, InitKind::Zeros, 0, 0, false}}, {}, *w, nullptr);
  ASSERT_FALSE(bound.isOk());
  EXPECT_EQ(bound.status().message(),
            "weights file '" + dir_.file(kIndex) + "': missing tensor 'd' (expected shape [1])");
}

TEST_F(WeightFilesTest, EmptyDirectory) {
  EXPECT_EQ(openError(dir_.path()), "weights directory '" + dir_.path() +
                                        "' has neither model.safetensors nor " + kIndex);
}

TEST_F(WeightFilesTest, OverlappingShards) {
  twoShards();
  shard("model-00002-of-00002.safetensors", {{"c", filled({4}, 3)}, {"a", filled({2, 2}, 1)}});
  std::string e = openError(dir_.path());
  EXPECT_TRUE(contains(e, "tensor 'a' is in both")) << e;
  EXPECT_TRUE(contains(e, "(shards overlap)")) << e;
}

TEST_F(WeightFilesTest, TensorNotInItsShard) {
  twoShards();
  index(R"({"weight_map": {"a": "model-00002-of-00002.safetensors",
                           "c": "model-00001-of-00002.safetensors"}})");
  std::string e = openError(dir_.path());
  EXPECT_TRUE(contains(e, "weights index '" + dir_.file(kIndex) + "': tensor 'a' is not in its "
                          "shard 'model-00002-of-00002.safetensors'")) << e;
}

TEST_F(WeightFilesTest, TruncatedShardIsNamed) {
  twoShards();
  testing::writeBytes(dir_.file("model-00002-of-00002.safetensors"), "\x10\0\0\0");
  std::string e = openError(dir_.path());
  EXPECT_TRUE(contains(e, "shard 'model-00002-of-00002.safetensors'")) << e;
  EXPECT_TRUE(contains(e, "shorter than the 8-byte header")) << e;
}

TEST_F(WeightFilesTest, MissingShardIsNamed) {
  twoShards();
  index(R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "x": "gone.safetensors"}})");
  std::string e = openError(dir_.path());
  EXPECT_TRUE(contains(e, "shard 'gone.safetensors'")) << e;
  EXPECT_TRUE(contains(e, "cannot open")) << e;
}

TEST_F(WeightFilesTest, BadIndexes) {
  const std::string pre = "weights index '" + dir_.file(kIndex) + "': ";
  const std::pair<std::string, std::string> cases[] = {
      {"{", "not valid JSON"},
      {"[]", "no \"weight_map\" object"},
      {R"({"weight_map": []})", "no \"weight_map\" object"},
      {R"({"weight_map": {}})", "\"weight_map\" is empty"},
      {R"({"weight_map": {"a": 3}})", "tensor 'a' maps to a non-string"},
      {R"({"weight_map": {"a": "../w.safetensors"}})",
       "tensor 'a' maps to '../w.safetensors', which is not a file name beside the index"},
      {R"({"weight_map": {"a": "/etc/passwd"}})", "which is not a file name beside the index"},
      {R"({"weight_map": {"a": ""}})", "which is not a file name beside the index"},
      {R"({"weight_map": {"a": "x.safetensors", "a": "x.safetensors"}})",
       "tensor 'a' is listed twice"},
  };
  for (const auto& [json, want] : cases) {
    index(json);
    std::string e = openError(dir_.file(kIndex));
    EXPECT_EQ(e.rfind(pre, 0), 0u) << e;
    EXPECT_TRUE(contains(e, want)) << json << " -> " << e;
  }
}

}  // namespace
}  // namespace transfuse::rt
