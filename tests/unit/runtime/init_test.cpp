// Tests for runtime/Init.h: spellings, constant kinds, bounds of the uniform kinds,
// mean/std of large tensors against the target distributions, determinism by seed,
// independence of tensor index, and that a tensor does not depend on its size
// prefix (element i is the same for any length > i).
#include "runtime/Init.h"

#include <gtest/gtest.h>

#include <cmath>

namespace transfuse::rt {
namespace {

Tensor make(std::vector<int64_t> shape, InitKind kind, int64_t fanIn, int64_t fanOut,
            uint64_t seed, uint64_t index) {
  Tensor t = Tensor::zeros(DType::F32, std::move(shape));
  initTensor(t, kind, fanIn, fanOut, seed, index);
  return t;
}

void meanStd(const Tensor& t, double* mean, double* stdev) {
  double s = 0, s2 = 0;
  const int64_t n = t.numElements();
  for (int64_t i = 0; i < n; ++i) {
    double v = t.data<float>()[i];
    s += v;
    s2 += v * v;
  }
  *mean = s / n;
  *stdev = std::sqrt(s2 / n - *mean * *mean);
}

TEST(InitTest, Spellings) {
  const std::pair<const char*, InitKind> all[] = {{"zeros", InitKind::Zeros},
                                                  {"ones", InitKind::Ones},
                                                  {"xavier_uniform", InitKind::XavierUniform},
                                                  {"normal_0.02", InitKind::Normal002},
                                                  {"uniform_fan_in", InitKind::UniformFanIn}};
  for (const auto& [name, kind] : all) {
    InitKind k;
    ASSERT_TRUE(parseInitKind(name, &k)) << name;
    EXPECT_EQ(k, kind);
    EXPECT_STREQ(initKindName(kind), name);
  }
  InitKind k;
  EXPECT_FALSE(parseInitKind("xavier", &k));
  EXPECT_FALSE(parseInitKind("", &k));
}

TEST(InitTest, Constants) {
  Tensor z = make({3, 5}, InitKind::Zeros, 5, 3, 1, 0);
  Tensor o = make({3, 5}, InitKind::Ones, 5, 3, 1, 0);
  for (int i = 0; i < 15; ++i) {
    EXPECT_EQ(z.data<float>()[i], 0.0f);
    EXPECT_EQ(o.data<float>()[i], 1.0f);
  }
}

TEST(InitTest, XavierUniformStatistics) {
  const int64_t fanIn = 256, fanOut = 768;
  Tensor t = make({fanOut, fanIn}, InitKind::XavierUniform, fanIn, fanOut, 1234, 3);
  const double bound = std::sqrt(6.0 / (fanIn + fanOut));
  double lo = 1e9, hi = -1e9;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    float v = t.data<float>()[i];
    ASSERT_LE(std::fabs(v), static_cast<float>(bound));
    lo = std::min(lo, static_cast<double>(v));
    hi = std::max(hi, static_cast<double>(v));
  }
  EXPECT_LT(lo, -0.99 * bound);  // the whole range is used
  EXPECT_GT(hi, 0.99 * bound);
  double mean, stdev;
  meanStd(t, &mean, &stdev);
  EXPECT_NEAR(mean, 0.0, 0.01 * bound);
  EXPECT_NEAR(stdev, bound / std::sqrt(3.0), 0.01 * bound);  // std of U(-b, b)
}

TEST(InitTest, UniformFanInStatistics) {
  Tensor t = make({100000}, InitKind::UniformFanIn, 64, 0, 5, 1);
  const double bound = 1.0 / 8.0;
  for (int64_t i = 0; i < t.numElements(); ++i)
    ASSERT_LE(std::fabs(t.data<float>()[i]), static_cast<float>(bound));
  double mean, stdev;
  meanStd(t, &mean, &stdev);
  EXPECT_NEAR(mean, 0.0, 0.01 * bound);
  EXPECT_NEAR(stdev, bound / std::sqrt(3.0), 0.01 * bound);
  // fan_in 0: bound 0, as PyTorch.
  Tensor z = make({10}, InitKind::UniformFanIn, 0, 0, 5, 1);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(z.data<float>()[i], 0.0f);
}

TEST(InitTest, NormalStatistics) {
  Tensor t = make({512, 512}, InitKind::Normal002, 0, 0, 77, 0);
  double mean, stdev;
  meanStd(t, &mean, &stdev);
  EXPECT_NEAR(mean, 0.0, 0.0003);
  EXPECT_NEAR(stdev, 0.02, 0.0003);
  // Tails: about 4.55% beyond 2 sigma, and nothing absurd.
  int64_t beyond2 = 0;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    float v = t.data<float>()[i];
    ASSERT_TRUE(std::isfinite(v));
    ASSERT_LT(std::fabs(v), 0.02f * 7);
    beyond2 += std::fabs(v) > 0.04f;
  }
  EXPECT_NEAR(static_cast<double>(beyond2) / t.numElements(), 0.0455, 0.003);
}

TEST(InitTest, DeterministicBySeedAndIndependentByIndex) {
  for (InitKind kind : {InitKind::XavierUniform, InitKind::Normal002, InitKind::UniformFanIn}) {
    Tensor a = make({33, 7}, kind, 7, 33, 10, 2);
    Tensor b = make({33, 7}, kind, 7, 33, 10, 2);
    Tensor otherSeed = make({33, 7}, kind, 7, 33, 11, 2);
    Tensor otherIndex = make({33, 7}, kind, 7, 33, 10, 3);
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_NE(a.bytes, otherSeed.bytes);
    EXPECT_NE(a.bytes, otherIndex.bytes);
    // Odd-sized tensor: element i does not depend on the total length.
    Tensor shorter = make({230}, kind, 7, 33, 10, 2);
    for (int i = 0; i < 230; ++i) EXPECT_EQ(shorter.data<float>()[i], a.data<float>()[i]);
  }
}

TEST(InitTest, HighSeedBitsMatter) {
  Tensor a = make({16}, InitKind::Normal002, 0, 0, 1, 0);
  Tensor b = make({16}, InitKind::Normal002, 0, 0, 1 | (1ull << 40), 0);
  EXPECT_NE(a.bytes, b.bytes);
}

}  // namespace
}  // namespace transfuse::rt
