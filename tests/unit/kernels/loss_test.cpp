// The fused cross-entropy (runtime/kernels/Norm.h, crossEntropy) against an
// fp64 reference of PyTorch's definition, on every Highway target compiled
// in: widths with every tail, label smoothing 0 and 0.1, ignored rows,
// large logits, the gradient in place (grad == x), threaded equal to
// single-threaded, and a label outside the vocabulary refused before any
// write. Tolerance: loss 2e-6·(1 + |ref|) (log-sum-exp's), gradient
// gradScale·(3e-6·p + 2e-7) (softmax's 2e-6 relative; the target's
// subtraction from p near 1).
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Norm.h"

#include <hwy/tests/hwy_gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace transfuse::kernels {
namespace {

void check(size_t rows, size_t V, float eps, bool inPlace, float spread, rt::ThreadPool* pool = nullptr) {
  std::mt19937 rng(static_cast<uint32_t>(V * 31 + rows));
  std::uniform_real_distribution<float> u(-spread, spread);
  std::vector<float> x(rows * V), loss(rows, -1.0f), grad(rows * V, NAN);
  for (float& v : x) v = u(rng);
  std::vector<int32_t> labels(rows);
  const int32_t ignore = 1;
  for (size_t r = 0; r < rows; ++r) labels[r] = r % 3 == 2 ? ignore : int32_t(rng() % V);
  const std::vector<float> x0 = x;
  const float scale = 0.25f;
  float* g = inPlace ? x.data() : grad.data();
  ASSERT_TRUE(crossEntropy(x.data(), labels.data(), rows, V, eps, ignore, loss.data(), g, scale, pool).isOk());
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x0.data() + r * V;
    if (labels[r] == ignore) {
      EXPECT_EQ(loss[r], 0.0f);
      for (size_t c = 0; c < V; ++c) ASSERT_EQ(g[r * V + c], 0.0f);
      continue;
    }
    double mx = -INFINITY, sum = 0;
    for (size_t c = 0; c < V; ++c) mx = std::max(mx, double(xr[c]));
    for (size_t c = 0; c < V; ++c) sum += std::exp(xr[c] - mx);
    const double lse = mx + std::log(sum);
    double ref = 0;
    for (size_t c = 0; c < V; ++c) {
      const double q = (int32_t(c) == labels[r] ? 1.0 - eps : 0.0) + eps / V;
      ref -= q * (xr[c] - lse);
    }
    ASSERT_NEAR(loss[r], ref, 2e-6 * (1 + std::fabs(ref))) << "V=" << V << " row " << r;
    for (size_t c = 0; c < V; ++c) {
      const double p = std::exp(xr[c] - lse);
      const double want = scale * (p - eps / V - (int32_t(c) == labels[r] ? 1.0 - eps : 0.0));
      ASSERT_NEAR(g[r * V + c], want, scale * (3e-6 * p + 2e-7)) << "V=" << V << " row " << r << " c " << c;
    }
  }
}

class LossTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(LossTest);

TEST_P(LossTest, CrossEntropyAgainstFp64) {
  for (size_t V : {1, 2, 5, 16, 17, 33, 100, 1000})
    for (float eps : {0.0f, 0.1f}) check(7, V, eps, false, 4.0f);
  check(5, 37, 0.1f, false, 60.0f);  // large logits
}

TEST_P(LossTest, CrossEntropyGradientInPlaceAndThreaded) {
  check(9, 257, 0.1f, true, 4.0f);
  rt::ThreadPool pool(3);
  check(40, 300, 0.1f, false, 4.0f, &pool);
}

TEST(Loss, CrossEntropyRefusesALabelOutsideTheVocabulary) {
  std::vector<float> x(6, 0.5f), loss(2, -1.0f), grad(6, -1.0f);
  std::vector<int32_t> labels = {1, 3};
  rt::Status s = crossEntropy(x.data(), labels.data(), 2, 3, 0.0f, -100, loss.data(), grad.data(), 1.0f);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "cross-entropy: label 3 of row 1 is outside the vocabulary [0, 3)");
  EXPECT_EQ(loss[0], -1.0f) << "nothing written";
  EXPECT_EQ(grad[0], -1.0f);
}

}  // namespace
}  // namespace transfuse::kernels
