// layer_norm, add+layer_norm, softmax, pooling and l2 normalization
// (runtime/kernels/Norm.h) against
// scalar references with double accumulation, on every Highway target compiled
// in, over sizes 0..33, odd and large widths and misaligned pointers.
// Tolerances: |y - ref| <= 1e-5 · (1 + |ref|) for layer norm (fp32 rounding of
// the mean/variance over up to 4097 elements); softmax |p - ref| <= 2e-6·ref
// + 1e-9 (Highway's Exp is within 1 ulp; the sum adds a few more).
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Norm.h"
#include "tests/unit/kernels/KernelTestUtil.h"

#include <hwy/tests/hwy_gtest.h>

#include <cmath>
#include <limits>

namespace transfuse::kernels {
namespace {

using ktest::Buf;

// LayerNorm (RMSNorm with `rms`: no centering) of x + res in double.
void refAddLN(const float* x, const float* res, const float* g, const float* be, size_t rows,
              size_t w, float eps, std::vector<double>& y, std::vector<double>& s,
              bool rms = false) {
  y.assign(rows * w, 0);
  s.assign(rows * w, 0);
  for (size_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (size_t j = 0; j < w; ++j) {
      // The sum is rounded to fp32 as the kernel's output is.
      s[r * w + j] = static_cast<float>(x[r * w + j] + (res ? res[r * w + j] : 0.0f));
      mean += s[r * w + j];
    }
    mean = rms ? 0.0 : mean / w;
    for (size_t j = 0; j < w; ++j) var += (s[r * w + j] - mean) * (s[r * w + j] - mean);
    var /= w;
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (size_t j = 0; j < w; ++j)
      y[r * w + j] = (s[r * w + j] - mean) * rstd * (g ? g[j] : 1.0) + (be ? be[j] : 0.0);
  }
}

class NormTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(NormTest);

TEST_P(NormTest, LayerNormAndAddLayerNorm) {
  std::mt19937 rng(7);
  for (size_t w : ktest::sweepSizes()) {
    for (size_t mis : {0, 1, 3}) {
      const size_t rows = 3;
      Buf x(rows * w, mis), res(rows * w, (mis + 1) % 4), g(w, mis), be(w, mis),
          y(rows * w, (mis + 2) % 4), s(rows * w, mis);
      x.fill(rng, -3.0f, 5.0f);  // a non-zero mean
      res.fill(rng, -1.0f, 1.0f);
      g.fill(rng, 0.5f, 1.5f);
      be.fill(rng, -0.5f, 0.5f);
      std::vector<double> ry, rs;
      for (int mode = 0; mode < 6; ++mode) {
        // 0: layerNorm; 1: addLayerNorm with the sum; 2: without it, no
        // gamma/beta; 3..5: the same of RMSNorm (3: with gamma only).
        const bool rms = mode >= 3;
        const float* gp = mode == 2 || mode == 5 ? nullptr : g.data();
        const float* bp = mode == 2 || mode >= 3 ? nullptr : be.data();
        if (mode % 3 == 0) {
          (rms ? rmsNorm : layerNorm)(x.data(), gp, bp, y.data(), rows, w, 1e-5f, nullptr);
          refAddLN(x.data(), nullptr, gp, bp, rows, w, 1e-5f, ry, rs, rms);
        } else {
          (rms ? addRmsNorm : addLayerNorm)(x.data(), res.data(), gp, bp, y.data(),
                                            mode % 3 == 1 ? s.data() : nullptr, rows, w, 1e-5f,
                                            nullptr);
          refAddLN(x.data(), res.data(), gp, bp, rows, w, 1e-5f, ry, rs, rms);
        }
        for (size_t i = 0; i < rows * w; ++i) {
          ASSERT_NEAR(y[i], ry[i], 1e-5 * (1 + std::fabs(ry[i])))
              << "w=" << w << " mis=" << mis << " mode=" << mode << " i=" << i;
          if (mode % 3 == 1) ASSERT_EQ(s[i], static_cast<float>(rs[i]));
        }
      }
    }
  }
}

TEST_P(NormTest, LayerNormInPlaceAndLargeMean) {
  std::mt19937 rng(8);
  const size_t rows = 4, w = 768;
  Buf x(rows * w, 1);
  x.fill(rng, 999.0f, 1001.0f);  // mean 1000, std ~0.6: E[x²]-μ² would cancel
  std::vector<float> x0(x.data(), x.data() + rows * w);
  std::vector<double> ry, rs;
  refAddLN(x0.data(), nullptr, nullptr, nullptr, rows, w, 1e-5f, ry, rs);
  layerNorm(x.data(), nullptr, nullptr, x.data(), rows, w, 1e-5f);
  // Tolerance: the inputs themselves carry fp32 rounding of ulp(1000)/2 = 3e-5,
  // which after centering is 3e-5/0.6 = 5e-5 of a normalized value (plus the
  // mean's own rounding); 1e-3 is a 10-20x margin over that, and a one-pass
  // E[x²]-μ² variance would be off by O(1).
  for (size_t i = 0; i < rows * w; ++i) ASSERT_NEAR(x[i], ry[i], 1e-3 * (1 + std::fabs(ry[i])));
}

void refSoftmax(const float* x, size_t rows, size_t w, std::vector<double>& y) {
  y.assign(rows * w, 0);
  for (size_t r = 0; r < rows; ++r) {
    double mx = -INFINITY;
    for (size_t j = 0; j < w; ++j) mx = std::max<double>(mx, x[r * w + j]);
    if (mx == -INFINITY) continue;
    double sum = 0;
    for (size_t j = 0; j < w; ++j) sum += std::exp(x[r * w + j] - mx);
    for (size_t j = 0; j < w; ++j) y[r * w + j] = std::exp(x[r * w + j] - mx) / sum;
  }
}

TEST_P(NormTest, Softmax) {
  std::mt19937 rng(9);
  const float ninf = -std::numeric_limits<float>::infinity();
  for (size_t w : ktest::sweepSizes()) {
    for (size_t mis : {0, 1, 2}) {
      const size_t rows = 4;
      Buf x(rows * w, mis), y(rows * w, (mis + 1) % 4);
      x.fill(rng, -20.0f, 20.0f);
      // Row 1: partially masked; row 2: fully masked.
      for (size_t j = 0; j < w; j += 3) x[1 * w + j] = ninf;
      for (size_t j = 0; j < w; ++j) x[2 * w + j] = ninf;
      std::vector<double> ref;
      refSoftmax(x.data(), rows, w, ref);
      softmax(x.data(), y.data(), rows, w);
      for (size_t i = 0; i < rows * w; ++i) {
        ASSERT_FALSE(std::isnan(y[i]));
        ASSERT_NEAR(y[i], ref[i], 2e-6 * ref[i] + 1e-9) << "w=" << w << " i=" << i;
      }
      for (size_t j = 0; j < w; ++j) ASSERT_EQ(y[2 * w + j], 0.0f);  // exactly 0
      softmax(x.data(), x.data(), rows, w);  // in place
      for (size_t i = 0; i < rows * w; ++i) ASSERT_EQ(x[i], y[i]);
    }
  }
}

// log Σ exp against a double reference: rows of logits (a vocabulary's
// width and every sweep size), partially and fully masked, misaligned.
TEST_P(NormTest, LogSumExp) {
  std::mt19937 rng(11);
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<size_t> widths = ktest::sweepSizes();
  widths.push_back(37000);
  for (size_t w : widths) {
    for (size_t mis : {0, 3}) {
      const size_t rows = 4;
      Buf x(rows * w, mis);
      x.fill(rng, -30.0f, 30.0f);
      for (size_t j = 0; j < w; j += 3) x[1 * w + j] = ninf;
      for (size_t j = 0; j < w; ++j) x[2 * w + j] = ninf;
      std::vector<float> out(rows);
      logSumExp(x.data(), out.data(), rows, w);
      for (size_t r = 0; r < rows; ++r) {
        double mx = -INFINITY, sum = 0;
        for (size_t j = 0; j < w; ++j) mx = std::max<double>(mx, x[r * w + j]);
        if (w == 0 || mx == -INFINITY) {
          ASSERT_EQ(out[r], ninf) << "w=" << w << " row " << r;
          continue;
        }
        for (size_t j = 0; j < w; ++j) sum += std::exp(x[r * w + j] - mx);
        double ref = mx + std::log(sum);
        ASSERT_NEAR(out[r], ref, 1e-6 * (1 + std::fabs(ref))) << "w=" << w << " row " << r;
      }
    }
  }
}

// Logits far beyond any real model's (the exp's shifter needs |max| < 1.4e6;
// larger rows take a plain path) and rows mixing -inf with huge values.
TEST_P(NormTest, SoftmaxHugeLogits) {
  for (float base : {-3e7f, -1e6f, 1e6f, 2e6f, 3e7f}) {
    const size_t w = 37;
    std::vector<float> x(w), y(w);
    for (size_t j = 0; j < w; ++j) x[j] = base + static_cast<float>(j % 5) * std::fabs(base) * 1e-6f;
    x[3] = -INFINITY;
    std::vector<double> ref;
    refSoftmax(x.data(), 1, w, ref);
    softmax(x.data(), y.data(), 1, w);
    for (size_t j = 0; j < w; ++j) ASSERT_NEAR(y[j], ref[j], 2e-6 * ref[j] + 1e-9) << base;
  }
}

// columnSums: the bits of the serial double loop (row order, one rounding
// after the division) for every width around the vector blocks, odd row
// counts, misaligned rows, a mean's divisor, and on 2 threads.
TEST_P(NormTest, ColumnSumsEqualTheSerialDoubleLoop) {
  rt::ThreadPool pool(2);
  for (size_t rows : {1, 2, 7, 300})
    for (size_t cols : ktest::sweepSizes()) {
      if (rows * cols > 300000) continue;
      ktest::Buf x(rows * cols, rows % 4);
      std::mt19937 rng(static_cast<uint32_t>(rows * 7 + cols));
      x.fill(rng, -3, 3);
      for (double divisor : {1.0, static_cast<double>(rows)}) {
        ktest::Buf out(cols), threaded(cols);
        columnSums(x.data(), rows, cols, divisor, out.data());
        columnSums(x.data(), rows, cols, divisor, threaded.data(), &pool);
        for (size_t j = 0; j < cols; ++j) {
          double s = 0.0;
          for (size_t r = 0; r < rows; ++r) s += x[r * cols + j];
          ASSERT_EQ(out[j], static_cast<float>(s / divisor)) << rows << "x" << cols << " col " << j;
          ASSERT_EQ(threaded[j], out[j]) << rows << "x" << cols << " col " << j;
        }
      }
    }
}

// layerNormGrad (and rmsNormGrad: μ = 0, no mean(d) term) against the
// backward written out in double: with x̂ = (x -
// μ)·rstd and d = dy·gamma, dx = rstd·(d - mean(d) - x̂·mean(d·x̂)),
// dgamma = Σ_r dy·x̂, dbeta = Σ_r dy. Bounds: dx within 2e-5·(1 +
// rstd·max|d|·(1 + |x̂|)) (fp32 statistics and means over up to 4097
// terms); dbeta is the serial double loop's bits; dgamma within 1e-5·(1 +
// Σ|dy·x̂|) (x̂ rounded to fp32 per element). A mean of 5 keeps the two-pass
// variance honest. Threads and dx aliasing dy do not change any bit.
TEST_P(NormTest, LayerNormGradAgainstReference) {
  rt::ThreadPool pool(2);
  for (bool rms : {false, true})
  for (size_t rows : {1, 3, 70})
    for (size_t w : ktest::sweepSizes()) {
      if (w == 0 || rows * w > 200000) continue;
      std::mt19937 rng(static_cast<uint32_t>(rows * 31 + w));
      Buf x(rows * w, w % 3), g(w, 1), dy(rows * w), dx(rows * w), dgam(w), dbet(w);
      x.fill(rng, 3, 7);
      g.fill(rng, 0, 2);
      dy.fill(rng, -1, 1);
      auto grad = rms ? rmsNormGrad : layerNormGrad;
      grad(x.data(), g.data(), dy.data(), dx.data(), dgam.data(), dbet.data(), rows, w, 1e-5f,
           nullptr);
      std::vector<double> rg(w, 0.0), rb(w, 0.0), rgAbs(w, 0.0);
      for (size_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (size_t j = 0; j < w && !rms; ++j) mean += x[r * w + j];
        mean /= w;
        for (size_t j = 0; j < w; ++j) var += (x[r * w + j] - mean) * (x[r * w + j] - mean);
        const double rstd = 1.0 / std::sqrt(var / w + 1e-5);
        std::vector<double> xh(w), d(w);
        double md = 0, mdx = 0, maxD = 0;
        for (size_t j = 0; j < w; ++j) {
          xh[j] = (x[r * w + j] - mean) * rstd;
          d[j] = double(dy[r * w + j]) * g[j];
          md += d[j] / w;
          mdx += d[j] * xh[j] / w;
          maxD = std::max(maxD, std::fabs(d[j]));
          rg[j] += dy[r * w + j] * xh[j];
          rgAbs[j] += std::fabs(dy[r * w + j] * xh[j]);
          rb[j] += dy[r * w + j];
        }
        for (size_t j = 0; j < w; ++j) {
          const double ref = rstd * (d[j] - (rms ? 0.0 : md) - xh[j] * mdx);
          ASSERT_NEAR(dx[r * w + j], ref, 2e-5 * (1 + rstd * maxD * (1 + std::fabs(xh[j]))))
              << rows << "x" << w << " dx at " << r << "," << j;
        }
      }
      for (size_t j = 0; j < w; ++j) {
        ASSERT_EQ(dbet[j], static_cast<float>(rb[j])) << rows << "x" << w << " dbeta " << j;
        ASSERT_NEAR(dgam[j], rg[j], 1e-5 * (1 + rgAbs[j])) << rows << "x" << w << " dgamma " << j;
      }
      Buf dx2(rows * w), dg2(w), db2(w), inPlace(rows * w);
      grad(x.data(), g.data(), dy.data(), dx2.data(), dg2.data(), db2.data(), rows, w, 1e-5f,
           &pool);
      for (size_t i = 0; i < rows * w; ++i) inPlace[i] = dy[i];
      grad(x.data(), g.data(), inPlace.data(), inPlace.data(), dg2.data(), db2.data(), rows, w,
           1e-5f, &pool);
      for (size_t i = 0; i < rows * w; ++i) {
        ASSERT_EQ(dx2[i], dx[i]) << i;
        ASSERT_EQ(inPlace[i], dx[i]) << i;
      }
      for (size_t j = 0; j < w; ++j) {
        ASSERT_EQ(dg2[j], dgam[j]);
        ASSERT_EQ(db2[j], dbet[j]);
      }
    }
}

TEST_P(NormTest, ThreadedEqualsSingleThreaded) {
  std::mt19937 rng(10);
  rt::ThreadPool pool(2);
  for (size_t w : {7, 512, 2048}) {
    const size_t rows = 301;
    Buf x(rows * w), res(rows * w), g(w), be(w), y1(rows * w), y2(rows * w), s1(rows * w),
        s2(rows * w);
    x.fill(rng, -2, 2);
    res.fill(rng, -2, 2);
    g.fill(rng, 0, 2);
    be.fill(rng, -1, 1);
    addLayerNorm(x.data(), res.data(), g.data(), be.data(), y1.data(), s1.data(), rows, w, 1e-5f);
    addLayerNorm(x.data(), res.data(), g.data(), be.data(), y2.data(), s2.data(), rows, w, 1e-5f,
                 &pool);
    for (size_t i = 0; i < rows * w; ++i) ASSERT_EQ(y1[i], y2[i]);
    for (size_t i = 0; i < rows * w; ++i) ASSERT_EQ(s1[i], s2[i]);
    softmax(x.data(), y1.data(), rows, w);
    softmax(x.data(), y2.data(), rows, w, &pool);
    for (size_t i = 0; i < rows * w; ++i) ASSERT_EQ(y1[i], y2[i]);
  }
}

// Pooling (every mode) and its gradient against a double loop, over padded
// rows, a row with one kept token and one with none; the bits equal on one
// thread and two.
void refPool(const Buf& x, const std::vector<uint8_t>& keep, size_t B, size_t S, size_t D,
             int32_t mode, const Buf* dy, std::vector<double>& out) {
  out.assign(dy ? B * S * D : B * D, 0.0);
  for (size_t b = 0; b < B; ++b) {
    size_t kept = 0;
    for (size_t s = 0; s < S; ++s) kept += keep[b * S + s];
    for (size_t d = 0; d < D; ++d) {
      auto at = [&](size_t s) { return (b * S + s) * D + d; };
      double acc = 0.0;
      size_t best = S;
      for (size_t s = 0; s < S; ++s)
        if (keep[b * S + s]) {
          acc += x[at(s)];
          if (best == S || x[at(s)] > x[at(best)]) best = s;
        }
      if (mode == kPoolCls) {
        if (dy) out[at(0)] = (*dy)[b * D + d]; else out[b * D + d] = x[at(0)];
      } else if (mode == kPoolMean && kept) {
        for (size_t s = 0; dy && s < S; ++s)
          if (keep[b * S + s]) out[at(s)] = (*dy)[b * D + d] / kept;
        if (!dy) out[b * D + d] = acc / kept;
      } else if (mode == kPoolMax && best < S) {
        if (dy) out[at(best)] = (*dy)[b * D + d]; else out[b * D + d] = x[at(best)];
      }
    }
  }
}

TEST(PoolTest, EveryModeAndItsGradient) {
  std::mt19937 rng(11);
  rt::ThreadPool threads(2);
  const size_t B = 5, S = 7;
  const size_t keptPerRow[B] = {7, 3, 1, 0, 6};
  for (size_t D : {1, 13, 384}) {
    Buf x(B * S * D), dy(B * D), y(B * D), y2(B * D), dx(B * S * D), dx2(B * S * D);
    x.fill(rng, -3, 3);
    dy.fill(rng, -1, 1);
    std::vector<uint8_t> keep(B * S, 0);
    for (size_t b = 0; b < B; ++b)
      for (size_t s = 0; s < keptPerRow[b]; ++s) keep[b * S + s] = 1;
    for (int32_t mode : {kPoolCls, kPoolMean, kPoolMax}) {
      SCOPED_TRACE("mode " + std::to_string(mode) + ", width " + std::to_string(D));
      std::vector<double> ref;
      refPool(x, keep, B, S, D, mode, nullptr, ref);
      pool(x.data(), keep.data(), y.data(), B, S, D, mode);
      pool(x.data(), keep.data(), y2.data(), B, S, D, mode, &threads);
      for (size_t i = 0; i < B * D; ++i) {
        ASSERT_NEAR(y[i], ref[i], 1e-6 * (1 + std::fabs(ref[i]))) << i;
        ASSERT_EQ(y[i], y2[i]) << i;
      }
      refPool(x, keep, B, S, D, mode, &dy, ref);
      dx.fill(rng, 5, 6);  // every element is written
      poolGrad(x.data(), keep.data(), dy.data(), dx.data(), B, S, D, mode);
      poolGrad(x.data(), keep.data(), dy.data(), dx2.data(), B, S, D, mode, &threads);
      for (size_t i = 0; i < B * S * D; ++i) {
        ASSERT_NEAR(dx[i], ref[i], 1e-6 * (1 + std::fabs(ref[i]))) << i;
        ASSERT_EQ(dx[i], dx2[i]) << i;
      }
    }
  }
}

// l2Normalize and its gradient against double formulas, a zero row (the
// norm clamped at eps) included; in place; one thread and two alike.
TEST(L2NormalizeTest, RowsAndGradient) {
  std::mt19937 rng(12);
  rt::ThreadPool threads(2);
  const float eps = 1e-12f;
  for (size_t D : {1, 7, 384, 1025}) {
    const size_t rows = 9;
    Buf x(rows * D), dy(rows * D), y(rows * D), y2(rows * D), dx(rows * D), dx2(rows * D);
    x.fill(rng, -2, 2);
    dy.fill(rng, -1, 1);
    for (size_t j = 0; j < D; ++j) x[3 * D + j] = 0.0f;  // a zero row
    l2Normalize(x.data(), y.data(), rows, D, eps);
    l2Normalize(x.data(), y2.data(), rows, D, eps, &threads);
    l2NormalizeGrad(x.data(), dy.data(), dx.data(), rows, D, eps);
    l2NormalizeGrad(x.data(), dy.data(), dx2.data(), rows, D, eps, &threads);
    for (size_t r = 0; r < rows; ++r) {
      double n = 0.0, xg = 0.0;
      for (size_t j = 0; j < D; ++j) {
        n += double(x[r * D + j]) * x[r * D + j];
        xg += double(x[r * D + j]) * dy[r * D + j];
      }
      n = std::sqrt(n);
      for (size_t j = 0; j < D; ++j) {
        const size_t i = r * D + j;
        const double want = x[i] / std::max(n, double(eps));
        const double wantGrad = n > eps ? (dy[i] - x[i] * xg / (n * n)) / n : dy[i] / eps;
        ASSERT_NEAR(y[i], want, 1e-6 * (1 + std::fabs(want))) << r << ", " << j;
        ASSERT_NEAR(dx[i], wantGrad, 1e-5 * (1 + std::fabs(wantGrad))) << r << ", " << j;
        ASSERT_EQ(y[i], y2[i]);
        ASSERT_EQ(dx[i], dx2[i]);
      }
    }
    l2Normalize(x.data(), x.data(), rows, D, eps);  // in place
    for (size_t i = 0; i < rows * D; ++i) ASSERT_EQ(x[i], y[i]);
  }
}

}  // namespace
}  // namespace transfuse::kernels
