// Tests for runtime/WeightBinding.h: binding by name, prefixes, aliases (equal,
// unequal, used when the canonical name is absent), optional params, missing,
// mis-shaped and wrong-dtype tensors, F16/BF16 conversion, unused and ignored
// tensors reported as warnings, glob matching, and randomWeights.
#include "runtime/WeightBinding.h"

#include <gtest/gtest.h>

#include "tests/unit/runtime/TestUtil.h"

namespace transfuse::rt {
namespace {

using testing::contains;
using testing::filled;
using testing::TempDir;

class WeightBindingTest : public ::testing::Test {
protected:
  // Writes the tensors and opens the file.
  WeightFiles makeFile(const std::vector<std::pair<std::string, Tensor>>& tensors) {
    path_ = dir_.file("w.safetensors");
    std::vector<std::pair<std::string, const Tensor*>> list;
    for (const auto& [n, t] : tensors) list.emplace_back(n, &t);
    Status s = writeSafetensors(path_, list);
    EXPECT_TRUE(s.isOk()) << s.message();
    StatusOr<WeightFiles> f = WeightFiles::open(path_);
    EXPECT_TRUE(f.isOk()) << f.status().message();
    return std::move(*f);
  }
  std::vector<ParamSpec> params() const {
    return {{"wte.weight", {4, 2}, InitKind::Normal002, 0, 0, false},
            {"ln.bias", {2}, InitKind::Zeros, 0, 0, false}};
  }
  TempDir dir_;
  std::string path_;
};

TEST_F(WeightBindingTest, BindsExactNames) {
  WeightFiles f = makeFile({{"ln.bias", filled({2}, 1)}, {"wte.weight", filled({4, 2}, 3)}});
  std::vector<std::string> warnings;
  auto r = bindWeights(params(), {}, f, &warnings);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_TRUE(warnings.empty());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ(r->at("wte.weight").bytes, filled({4, 2}, 3).bytes);
  EXPECT_EQ(r->at("ln.bias").shape, (std::vector<int64_t>{2}));
}

TEST_F(WeightBindingTest, MissingTensor) {
  WeightFiles f = makeFile({{"wte.weight", filled({4, 2}, 3)}});
  auto r = bindWeights(params(), {}, f, nullptr);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().message(),
            "weights file '" + path_ + "': missing tensor 'ln.bias' (expected shape [2])");
}

TEST_F(WeightBindingTest, ShapeMismatch) {
  WeightFiles f = makeFile({{"wte.weight", filled({2, 4}, 3)}, {"ln.bias", filled({2}, 1)}});
  auto r = bindWeights(params(), {}, f, nullptr);
  ASSERT_FALSE(r.isOk());
  const std::string& m = r.status().message();
  EXPECT_TRUE(contains(m, path_)) << m;
  EXPECT_TRUE(contains(m, "'wte.weight'")) << m;
  EXPECT_TRUE(contains(m, "[2, 4]")) << m;
  EXPECT_TRUE(contains(m, "[4, 2]")) << m;
}

TEST_F(WeightBindingTest, WrongDtype) {
  Tensor ids = Tensor::zeros(DType::I32, {2});
  WeightFiles f = makeFile({{"wte.weight", filled({4, 2}, 3)}, {"ln.bias", ids}});
  auto r = bindWeights(params(), {}, f, nullptr);
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(contains(r.status().message(), "'ln.bias'")) << r.status().message();
  EXPECT_TRUE(contains(r.status().message(), "I32")) << r.status().message();
  EXPECT_TRUE(contains(r.status().message(), path_)) << r.status().message();
}

TEST_F(WeightBindingTest, HalfTypesAreConverted) {
  Tensor h = Tensor::zeros(DType::F16, {4, 2});
  Tensor b = Tensor::zeros(DType::BF16, {2});
  for (int i = 0; i < 8; ++i) h.data<uint16_t>()[i] = floatToHalf(0.25f * i);
  b.data<uint16_t>()[0] = floatToBf16(-3.0f);
  b.data<uint16_t>()[1] = floatToBf16(0.5f);
  WeightFiles f = makeFile({{"wte.weight", h}, {"ln.bias", b}});
  auto r = bindWeights(params(), {}, f, nullptr);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->at("wte.weight").dtype, DType::F32);
  EXPECT_EQ(r->at("wte.weight").data<float>()[7], 1.75f);
  EXPECT_EQ(r->at("ln.bias").data<float>()[0], -3.0f);
}

TEST_F(WeightBindingTest, PrefixAccepted) {
  WeightFiles f = makeFile(
      {{"transformer.wte.weight", filled({4, 2}, 3)}, {"transformer.ln.bias", filled({2}, 1)}});
  BindingRules rules;
  rules.prefixes = {"model.", "transformer."};
  std::vector<std::string> warnings;
  auto r = bindWeights(params(), rules, f, &warnings);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(r->at("wte.weight").bytes, filled({4, 2}, 3).bytes);
  // Without the rule the same file is missing tensors.
  EXPECT_FALSE(bindWeights(params(), {}, f, nullptr).isOk());
}

TEST_F(WeightBindingTest, OptionalAbsentIsZeros) {
  auto ps = params();
  ps[1].optional = true;
  WeightFiles f = makeFile({{"wte.weight", filled({4, 2}, 3)}});
  auto r = bindWeights(ps, {}, f, nullptr);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->at("ln.bias").bytes, Tensor::zeros(DType::F32, {2}).bytes);
  EXPECT_EQ(r->at("ln.bias").shape, (std::vector<int64_t>{2}));
}

TEST_F(WeightBindingTest, AliasEqualIsAccepted) {
  WeightFiles f = makeFile({{"wte.weight", filled({4, 2}, 3)},
                                {"ln.bias", filled({2}, 1)},
                                {"lm_head.weight", filled({4, 2}, 3)}});
  BindingRules rules;
  rules.aliases = {{"lm_head.weight", "wte.weight"}};
  std::vector<std::string> warnings;
  auto r = bindWeights(params(), rules, f, &warnings);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_TRUE(warnings.empty()) << warnings[0];
}

TEST_F(WeightBindingTest, AliasUnequalIsError) {
  WeightFiles f = makeFile({{"wte.weight", filled({4, 2}, 3)},
                                {"ln.bias", filled({2}, 1)},
                                {"lm_head.weight", filled({4, 2}, 4)}});
  BindingRules rules;
  rules.aliases = {{"lm_head.weight", "wte.weight"}};
  auto r = bindWeights(params(), rules, f, nullptr);
  ASSERT_FALSE(r.isOk());
  const std::string& m = r.status().message();
  EXPECT_TRUE(contains(m, "'lm_head.weight'")) << m;
  EXPECT_TRUE(contains(m, "'wte.weight'")) << m;
  EXPECT_TRUE(contains(m, path_)) << m;
}

TEST_F(WeightBindingTest, AliasUsedWhenCanonicalAbsent) {
  WeightFiles f =
      makeFile({{"ln.bias", filled({2}, 1)}, {"transformer.lm_head.weight", filled({4, 2}, 9)}});
  BindingRules rules;
  rules.aliases = {{"lm_head.weight", "wte.weight"}};
  rules.prefixes = {"transformer."};
  std::vector<std::string> warnings;
  auto r = bindWeights(params(), rules, f, &warnings);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(r->at("wte.weight").bytes, filled({4, 2}, 9).bytes);
}

TEST_F(WeightBindingTest, AliasWithWrongShapeIsError) {
  WeightFiles f = makeFile({{"wte.weight", filled({4, 2}, 3)},
                                {"ln.bias", filled({2}, 1)},
                                {"lm_head.weight", filled({8}, 3)}});
  BindingRules rules;
  rules.aliases = {{"lm_head.weight", "wte.weight"}};
  auto r = bindWeights(params(), rules, f, nullptr);
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(contains(r.status().message(), "'lm_head.weight'")) << r.status().message();
}

TEST_F(WeightBindingTest, UnusedTensorWarns) {
  WeightFiles f = makeFile({{"wte.weight", filled({4, 2}, 3)},
                                {"extra", filled({3}, 0)},
                                {"ln.bias", filled({2}, 1)}});
  std::vector<std::string> warnings;
  auto r = bindWeights(params(), {}, f, &warnings);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "weights file '" + path_ + "': tensor 'extra' is not used by the model");
}

TEST_F(WeightBindingTest, IgnoredPatternWarnsDifferently) {
  WeightFiles f = makeFile({{"wte.weight", filled({4, 2}, 3)},
                                {"ln.bias", filled({2}, 1)},
                                {"transformer.h.0.attn.bias", filled({2, 2}, 0)},
                                {"h.11.attn.bias", filled({2, 2}, 0)},
                                {"h.11.attn.masked_bias", filled({1}, 0)}});
  BindingRules rules;
  rules.ignored = {"h.*.attn.bias"};
  rules.prefixes = {"transformer."};
  std::vector<std::string> warnings;
  auto r = bindWeights(params(), rules, f, &warnings);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_TRUE(contains(warnings[0], "ignored buffer 'transformer.h.0.attn.bias'")) << warnings[0];
  EXPECT_TRUE(contains(warnings[1], "ignored buffer 'h.11.attn.bias'")) << warnings[1];
  EXPECT_TRUE(contains(warnings[2], "'h.11.attn.masked_bias' is not used")) << warnings[2];
  for (const auto& w : warnings) EXPECT_TRUE(contains(w, path_));
}

TEST(GlobTest, Matches) {
  EXPECT_TRUE(globMatch("h.*.attn.bias", "h.0.attn.bias"));
  EXPECT_TRUE(globMatch("h.*.attn.bias", "h.11.attn.bias"));
  EXPECT_FALSE(globMatch("h.*.attn.bias", "h.11.attn.masked_bias"));
  EXPECT_FALSE(globMatch("h.*.attn.bias", "xh.1.attn.bias"));
  EXPECT_TRUE(globMatch("*", ""));
  EXPECT_TRUE(globMatch("*.bias", "a.b.bias"));
  EXPECT_TRUE(globMatch("a*b*c", "aXbYbZc"));
  EXPECT_FALSE(globMatch("a*b*c", "aXbYbZ"));
  EXPECT_TRUE(globMatch("exact", "exact"));
  EXPECT_FALSE(globMatch("exact", "exactly"));
}

TEST(RandomWeightsTest, UsesParamNameAndSeed) {
  std::vector<ParamSpec> ps = {{"a", {16, 8}, InitKind::XavierUniform, 8, 16, false},
                               {"b", {16, 8}, InitKind::XavierUniform, 8, 16, false},
                               {"c", {16}, InitKind::Ones, 0, 0, false}};
  auto random = randomWeights(ps, 123);
  ASSERT_TRUE(random.isOk()) << random.status().message();
  auto& w = *random;
  ASSERT_EQ(w.size(), 3u);
  Tensor expectA = Tensor::zeros(DType::F32, {16, 8});
  initTensor(expectA, InitKind::XavierUniform, 8, 16, 123, paramStream("a"));
  Tensor expectB = Tensor::zeros(DType::F32, {16, 8});
  initTensor(expectB, InitKind::XavierUniform, 8, 16, 123, paramStream("b"));
  EXPECT_EQ(w["a"].bytes, expectA.bytes);
  EXPECT_EQ(w["b"].bytes, expectB.bytes);
  EXPECT_NE(w["a"].bytes, w["b"].bytes);
  EXPECT_EQ(w["c"].data<float>()[15], 1.0f);
  EXPECT_EQ((*randomWeights(ps, 123))["a"].bytes, w["a"].bytes);
  EXPECT_NE((*randomWeights(ps, 124))["a"].bytes, w["a"].bytes);
  // The order of the table does not matter.
  std::vector<ParamSpec> reversed(ps.rbegin(), ps.rend());
  EXPECT_EQ((*randomWeights(reversed, 123))["a"].bytes, w["a"].bytes);
  EXPECT_NE(paramStream("a"), paramStream("b"));
}

}  // namespace
}  // namespace transfuse::rt
