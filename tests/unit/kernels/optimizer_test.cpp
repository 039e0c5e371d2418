// The Adam update (runtime/kernels/Optimizer.h) against an fp64 scalar
// reference of torch.optim.Adam's formula, on every Highway target compiled
// in: several steps (the bias corrections change), every tail length, Adam
// and AdamW, a gradient scale; threaded runs equal single-threaded ones bit
// for bit. Tolerance: |p - ref| <= 1e-6 · (|ref| + lr); m and v are sums of
// terms up to |g·gradScale| (g in [-1, 1]) and its square, which may cancel,
// so their error is bounded by those terms: 1e-6 · (|ref| + gradScale) and
// 1e-6 · (|ref| + gradScale²).
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Optimizer.h"

#include <hwy/tests/hwy_gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace transfuse::kernels {
namespace {

struct Ref {
  std::vector<double> p, m, v;
};

void referenceStep(Ref& r, const std::vector<float>& g, const AdamStep& s) {
  const double t = double(s.step), bc1 = 1 - std::pow(double(s.beta1), t),
               bc2 = 1 - std::pow(double(s.beta2), t);
  for (size_t i = 0; i < g.size(); ++i) {
    const double gi = double(g[i]) * s.gradScale;
    r.p[i] *= 1 - double(s.lr) * s.weightDecay;
    r.m[i] = s.beta1 * r.m[i] + (1 - double(s.beta1)) * gi;
    r.v[i] = s.beta2 * r.v[i] + (1 - double(s.beta2)) * gi * gi;
    r.p[i] -= s.lr / bc1 * r.m[i] / (std::sqrt(r.v[i]) / std::sqrt(bc2) + s.eps);
  }
}

void check(size_t n, float weightDecay, float gradScale, rt::ThreadPool* pool = nullptr) {
  std::mt19937 rng(static_cast<uint32_t>(n * 7 + 1));
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> p(n), m(n, 0.0f), v(n, 0.0f), g(n);
  for (float& x : p) x = u(rng);
  Ref r{std::vector<double>(p.begin(), p.end()), std::vector<double>(n), std::vector<double>(n)};
  AdamStep s;
  s.lr = 1e-3f;
  s.weightDecay = weightDecay;
  s.gradScale = gradScale;
  for (int64_t t = 1; t <= 4; ++t) {
    for (float& x : g) x = u(rng);
    s.step = t;
    adamUpdate(p.data(), g.data(), m.data(), v.data(), n, s, pool);
    referenceStep(r, g, s);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(p[i], r.p[i], 1e-6 * (std::fabs(r.p[i]) + s.lr)) << "n=" << n << " t=" << t << " i=" << i;
      ASSERT_NEAR(m[i], r.m[i], 1e-6 * (std::fabs(r.m[i]) + gradScale)) << i;
      ASSERT_NEAR(v[i], r.v[i], 1e-6 * (std::fabs(r.v[i]) + gradScale * gradScale)) << i;
    }
  }
}

class OptimizerTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(OptimizerTest);

TEST_P(OptimizerTest, AdamAgainstFp64EveryTail) {
  for (size_t n : {1, 3, 7, 8, 15, 16, 17, 31, 33, 100, 1000}) check(n, 0.0f, 1.0f);
}

TEST_P(OptimizerTest, AdamWAndGradScale) {
  check(257, 0.01f, 0.5f);
  check(64, 0.1f, 2.0f);
}

TEST_P(OptimizerTest, ThreadedEqualsSingleThreaded) {
  const size_t n = 100003;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> p(n), g(n), m(n, 0.1f), v(n, 0.2f);
  for (size_t i = 0; i < n; ++i) p[i] = u(rng), g[i] = u(rng);
  std::vector<float> p2 = p, m2 = m, v2 = v;
  AdamStep s;
  s.lr = 1e-3f;
  s.step = 3;
  adamUpdate(p.data(), g.data(), m.data(), v.data(), n, s);
  rt::ThreadPool pool(4);
  adamUpdate(p2.data(), g.data(), m2.data(), v2.data(), n, s, &pool);
  EXPECT_EQ(std::memcmp(p.data(), p2.data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(m.data(), m2.data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(v.data(), v2.data(), n * sizeof(float)), 0);
}

}  // namespace
}  // namespace transfuse::kernels
