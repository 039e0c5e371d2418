// Activations, erf, embedding, argmax and top-k (runtime/kernels/Elementwise.h)
// against scalar double references on every Highway target compiled in.
// Stated tolerances (measured maxima are printed by the tests):
//   erf        |err| <= 2e-7 absolute over all of fp32 (every 251st bit pattern;
//              measured 1.64e-7), relative <= 2.5e-7 for 1e-30 < |x| < 0.875
//              (measured 1.77e-7)
//   gelu       |err| <= 3e-7·max(1, |x|) (measured 1.2e-7), and relative
//              <= 2e-5 for x in [-12, -1] (measured 1.7e-5: the a² rounding in
//              erfc's exponent; no 1 + erf cancellation)
//   gelu_tanh  |err| <= 5e-7·max(1, |x|) (measured 1.2e-7)
//   embedding  table lookups and scaling exact to 1 ulp; sinusoid |err| <= 1e-6
//              for positions up to 10^5
#include "runtime/Philox.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/ElementwiseMath.h"
#include "tests/unit/kernels/KernelTestUtil.h"

#include <hwy/tests/hwy_gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace transfuse::kernels {
namespace {

using ktest::Buf;

class ElementwiseTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(ElementwiseTest);

TEST_P(ElementwiseTest, ErfWholeRange) {
  const size_t kBatch = 1 << 14;
  std::vector<float> x(kBatch), y(kBatch);
  double maxAbs = 0, maxRel = 0;
  float worstAbsX = 0;
  uint64_t bits = 0;
  while (bits <= 0xFFFFFFFFull) {
    size_t n = 0;
    for (; n < kBatch && bits <= 0xFFFFFFFFull; bits += 251) {
      const uint32_t b32 = static_cast<uint32_t>(bits);
      float f;
      std::memcpy(&f, &b32, 4);
      if (!std::isnan(f)) x[n++] = f;
    }
    erf(x.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const double ref = std::erf(static_cast<double>(x[i]));
      const double e = std::fabs(y[i] - ref);
      if (e > maxAbs) {
        maxAbs = e;
        worstAbsX = x[i];
      }
      const double ax = std::fabs(x[i]);
      if (ax > 1e-30 && ax < 0.875) maxRel = std::max(maxRel, e / std::fabs(ref));
    }
  }
  std::printf("erf: max abs error %.3g (at x=%.9g), max rel error (|x|<0.875) %.3g\n", maxAbs,
              worstAbsX, maxRel);
  EXPECT_LE(maxAbs, 2e-7);
  EXPECT_LE(maxRel, 2.5e-7);
  // Special values.
  const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -1e-40f, 3.9f, 100.0f};
  float out[9];
  erf(sp, out, 9);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_TRUE(std::signbit(out[1]));
  EXPECT_EQ(out[2], 1.0f);
  EXPECT_EQ(out[3], -1.0f);
  EXPECT_TRUE(std::isnan(out[4]));
  EXPECT_NEAR(out[5], std::erf(1e-40), 3e-45);  // 2 subnormal ulp
  EXPECT_EQ(out[8], 1.0f);
}

// The definitions (ElementwiseMath.h), evaluated in double.
double refGelu(double x) { return math::gelu(x); }
double refGeluTanh(double x) { return math::geluTanh(x); }

TEST_P(ElementwiseTest, Activations) {
  // A dense grid over [-12, 12] plus random values, at several misalignments.
  std::vector<float> grid;
  for (int i = -120000; i <= 120000; ++i) grid.push_back(i * 1e-4f);
  for (float v : {-100.0f, -30.0f, 30.0f, 1e6f, -1e-20f, 1e-20f}) grid.push_back(v);
  double eg = 0, egt = 0, relTail = 0;
  for (size_t mis : {0, 1, 3}) {
    Buf x(grid.size(), mis), y(grid.size(), (mis + 1) % 4);
    std::copy(grid.begin(), grid.end(), x.data());
    gelu(x.data(), y.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double ref = refGelu(x[i]);
      const double e = std::fabs(y[i] - ref);
      eg = std::max(eg, e / std::max(1.0, std::fabs(double(x[i]))));
      if (x[i] <= -1 && x[i] >= -12) relTail = std::max(relTail, e / std::fabs(ref));
    }
    geluTanh(x.data(), y.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double e = std::fabs(y[i] - refGeluTanh(x[i]));
      egt = std::max(egt, e / std::max(1.0, std::fabs(double(x[i]))));
    }
    relu(x.data(), y.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], std::max(x[i], 0.0f));
  }
  std::printf("gelu: max err/max(1,|x|) %.3g, tail rel %.3g; gelu_tanh %.3g\n", eg, relTail, egt);
  EXPECT_LE(eg, 3e-7);
  EXPECT_LE(relTail, 2e-5);
  EXPECT_LE(egt, 5e-7);
  // Every small size (tails), in place.
  for (size_t n : ktest::sweepSizes()) {
    Buf x(n, 1);
    std::mt19937 rng(n);
    x.fill(rng, -6, 6);
    std::vector<float> x0(x.data(), x.data() + n);
    gelu(x.data(), x.data(), n);
    for (size_t i = 0; i < n; ++i)
      ASSERT_NEAR(x[i], refGelu(x0[i]), 3e-7 * std::max(1.0f, std::fabs(x0[i])));
  }
}

// activationGrad against ElementwiseMath.h's derivatives in double: relu's
// bits exactly; gelu and gelu_tanh within their stated bounds (out = g·f',
// with g = 1 and g random), over a dense grid and the clamps' far sides, at
// every small size, misaligned and in place; NaN stays NaN.
TEST_P(ElementwiseTest, ActivationGrads) {
  std::vector<float> grid;
  for (int i = -150000; i <= 150000; ++i) grid.push_back(i * 1e-4f);
  for (float v : {-1e6f, -100.0f, -30.5f, -13.5f, -9.5f, 9.5f, 13.5f, 30.5f, 100.0f, 1e6f, 1e-20f,
                  -1e-20f})
    grid.push_back(v);
  const size_t n = grid.size();
  Buf x(n, 1), g(n, 2), out(n, 3);
  std::copy(grid.begin(), grid.end(), x.data());
  std::mt19937 rng(5);
  g.fill(rng, -2, 2);
  struct Case {
    math::Kind kind;
    double (*ref)(double);
    double bound;
  };
  const Case cases[] = {{math::Kind::kRelu, math::reluDerivative<double>, 0.0},
                        {math::Kind::kGelu, math::geluDerivative<double>, 4e-7},
                        {math::Kind::kGeluTanh, math::geluTanhDerivative<double>, 6e-7},
                        {math::Kind::kSilu, math::siluDerivative<double>, 6e-7}};
  for (const Case& c : cases) {
    double worst = 0;
    activationGrad(c.kind, x.data(), g.data(), out.data(), n);
    for (size_t i = 0; i < n; ++i) {
      if (c.kind == math::Kind::kRelu) {
        const float want = g[i] * math::reluDerivative(x[i]);
        ASSERT_EQ(std::memcmp(&out[i], &want, sizeof(float)), 0) << "relu' at x = " << x[i];
        continue;
      }
      const double e = std::fabs(out[i] - double(g[i]) * c.ref(x[i])) / std::max(1.0, std::fabs(double(g[i])));
      worst = std::max(worst, e);
    }
    std::printf("activation_grad kind %d: max |err| / max(1, |g|) %.3g\n", int(c.kind), worst);
    EXPECT_LE(worst, c.bound);
    // Small sizes (tails), in place over g.
    for (size_t m : ktest::sweepSizes()) {
      Buf xs(m, 1), gs(m, 0);
      xs.fill(rng, -6, 6);
      gs.fill(rng, -1, 1);
      std::vector<float> g0(gs.data(), gs.data() + m);
      activationGrad(c.kind, xs.data(), gs.data(), gs.data(), m);
      for (size_t i = 0; i < m; ++i)
        ASSERT_NEAR(gs[i], g0[i] * c.ref(xs[i]), c.bound + 1e-7) << "n = " << m;
    }
    const float nan = std::numeric_limits<float>::quiet_NaN(), one = 1.0f;
    float got = 0;
    activationGrad(c.kind, &nan, &one, &got, 1);
    if (c.kind != math::Kind::kRelu) EXPECT_TRUE(std::isnan(got)) << int(c.kind);
  }
  rt::ThreadPool pool(2);
  Buf threaded(n);
  activationGrad(math::Kind::kGelu, x.data(), g.data(), out.data(), n);
  activationGrad(math::Kind::kGelu, x.data(), g.data(), threaded.data(), n, &pool);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], threaded[i]);
}

TEST_P(ElementwiseTest, ThreadedEqualsSingleThreaded) {
  rt::ThreadPool pool(2);
  const size_t n = 100003;
  Buf x(n, 1), y1(n), y2(n);
  std::mt19937 rng(3);
  x.fill(rng, -8, 8);
  gelu(x.data(), y1.data(), n);
  gelu(x.data(), y2.data(), n, &pool);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(y1[i], y2[i]);
}

// The vector Philox of kernels::dropout against the scalar definition
// (philoxUniform >= rate), bit for bit: sizes 0..2N and more, every
// alignment of `first` to the four-element blocks, a block counter whose low
// word wraps inside a vector, rates at and between the 2^-24 grid, in place,
// on 2 threads.
TEST_P(ElementwiseTest, DropoutMatchesThePhiloxDefinition) {
  rt::ThreadPool pool(2);
  const uint64_t wrap = 4 * ((uint64_t{1} << 32) - 3);  // block low words 2^32-3 .. 2^32+..
  for (double rate : {0.1, 0.5, 0.25 + 1.0 / 16777216.0, 0.9})
    for (uint64_t first : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{6}, wrap, wrap + 1})
      for (size_t n : ktest::sweepSizes()) {
        ktest::Buf x(n, first % 3), y(n);
        std::mt19937 rng(static_cast<uint32_t>(n + first));
        x.fill(rng, -2, 2);
        dropout(x.data(), y.data(), n, rate, 11, 4, 9, first);
        const float keep = static_cast<float>(1.0 / (1.0 - rate));
        for (size_t i = 0; i < n; ++i) {
          const bool kept = rt::philoxUniform(11, 4, 9, first + i) >= rate;
          ASSERT_EQ(y[i], kept ? x[i] * keep : 0.0f)
              << "rate=" << rate << " first=" << first << " n=" << n << " i=" << i;
        }
        if (n > 1000) {  // in place, threaded: the same bits
          ktest::Buf z(n);
          std::copy(x.data(), x.data() + n, z.data());
          dropout(z.data(), z.data(), n, rate, 11, 4, 9, first, &pool);
          ASSERT_EQ(0, std::memcmp(z.data(), y.data(), n * sizeof(float)));
        }
      }
}

TEST_P(ElementwiseTest, Embedding) {
  std::mt19937 rng(4);
  for (size_t dim : {1, 2, 7, 16, 33, 64, 512}) {
    const size_t vocab = 50, batch = 2, seq = 9;
    Buf table(vocab * dim, 1), learned(40 * dim, 2), out(batch * seq * dim, 3);
    table.fill(rng, -1, 1);
    learned.fill(rng, -1, 1);
    std::vector<int32_t> ids(batch * seq);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % vocab);
    for (Positional pos : {Positional::kNone, Positional::kSinusoidal, Positional::kLearned}) {
      for (size_t offset : {size_t{0}, size_t{5}, size_t{100000}}) {
        if (pos == Positional::kLearned && offset > 20) continue;
        EmbeddingArgs a;
        a.ids = ids.data();
        a.batch = batch;
        a.seq = seq;
        a.table = table.data();
        a.vocab = vocab;
        a.dim = dim;
        a.scale = std::sqrt(static_cast<float>(dim));
        a.positional = pos;
        a.positionOffset = offset;
        a.learned = learned.data();
        a.learnedRows = 40;
        ASSERT_TRUE(embedding(a, out.data()).isOk());
        for (size_t t = 0; t < batch * seq; ++t) {
          const size_t p = offset + t % seq;
          for (size_t j = 0; j < dim; ++j) {
            double ref = double(table[ids[t] * dim + j]) * a.scale;
            if (pos == Positional::kSinusoidal) {
              const double ang = p / std::pow(10000.0, double(j / 2 * 2) / dim);
              ref += (j % 2 == 0) ? std::sin(ang) : std::cos(ang);
            } else if (pos == Positional::kLearned) {
              ref += learned[p * dim + j];
            }
            ASSERT_NEAR(out[t * dim + j], ref, 1e-6 * (1 + std::fabs(ref)))
                << "dim=" << dim << " t=" << t << " j=" << j;
          }
        }
      }
    }
  }
}

TEST(EmbeddingErrors, OutOfRangeIdNamesTheId) {
  std::vector<float> table(4 * 3, 1.0f), out(6 * 3, -7.0f);
  std::vector<int32_t> ids = {0, 1, 2, 3, 4, 1};
  EmbeddingArgs a;
  a.ids = ids.data();
  a.batch = 2;
  a.seq = 3;
  a.table = table.data();
  a.vocab = 4;
  a.dim = 3;
  rt::Status st = embedding(a, out.data());
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("token id 4"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("batch 1, position 1"), std::string::npos) << st.message();
  EXPECT_EQ(out[0], -7.0f);  // nothing written
  ids[4] = -1;
  st = embedding(a, out.data());
  EXPECT_NE(st.message().find("token id -1"), std::string::npos) << st.message();
  ids[4] = 0;
  a.positional = Positional::kLearned;
  a.learned = table.data();
  a.learnedRows = 2;
  EXPECT_FALSE(embedding(a, out.data()).isOk());
}

TEST_P(ElementwiseTest, ArgmaxAndTopK) {
  std::mt19937 rng(5);
  for (size_t w : ktest::sweepSizes()) {
    if (w == 0) continue;
    const size_t rows = 3;
    Buf x(rows * w, 1);
    // Few distinct values, so ties are common.
    for (size_t i = 0; i < rows * w; ++i) x[i] = static_cast<float>(rng() % 7) - 3.0f;
    x[2 * w + w / 2] = -INFINITY;
    std::vector<int32_t> am(rows);
    argmax(x.data(), rows, w, am.data());
    for (size_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * w;
      const size_t ref = std::max_element(row, row + w) - row;  // first maximum
      ASSERT_EQ(am[r], static_cast<int32_t>(ref)) << "w=" << w;
    }
    for (size_t k : {size_t{1}, size_t{2}, size_t{5}, w}) {
      if (k > w) continue;
      std::vector<float> vals(rows * k);
      std::vector<int32_t> idx(rows * k);
      ASSERT_TRUE(topK(x.data(), rows, w, k, vals.data(), idx.data()).isOk());
      for (size_t r = 0; r < rows; ++r) {
        const float* row = x.data() + r * w;
        std::vector<int32_t> order(w);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t a, int32_t b) { return row[a] > row[b]; });
        for (size_t j = 0; j < k; ++j) {
          ASSERT_EQ(idx[r * k + j], order[j]) << "w=" << w << " k=" << k << " j=" << j;
          ASSERT_EQ(vals[r * k + j], row[order[j]]);
        }
      }
    }
  }
  float v;
  int32_t i;
  const float one = 1.0f;
  EXPECT_FALSE(topK(&one, 1, 1, 2, &v, &i).isOk());
}

}  // namespace
}  // namespace transfuse::kernels
