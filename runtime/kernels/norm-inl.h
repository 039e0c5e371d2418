// Per-target row kernels of Norm.cpp: layer_norm, add+layer_norm, softmax,
// log-sum-exp.
// Rows are contiguous (row r starts at r·width). Each function handles rows
// [r0, r1), so callers split rows across threads. See Norm.h for the math.

#if defined(TRANSFUSE_KERNELS_NORM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TRANSFUSE_KERNELS_NORM_INL_H_
#undef TRANSFUSE_KERNELS_NORM_INL_H_
#else
#define TRANSFUSE_KERNELS_NORM_INL_H_
#endif

#include <hwy/highway.h>
#include <hwy/aligned_allocator.h>
#include <hwy/contrib/math/math-inl.h>

#include "runtime/kernels/Common-inl.h"
#include "runtime/kernels/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

HWY_BEFORE_NAMESPACE();
namespace transfuse::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// s[i] = a[i] + b[i] (b may be null: s = a, then s may alias a); returns Σ s.
// s is also the scratch the later passes re-read from L1.
HWY_INLINE float AddAndSum(const float* HWY_RESTRICT a, const float* b, float* s, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  auto acc0 = hn::Zero(d), acc1 = hn::Zero(d);
  size_t i = 0;
  if (b) {
    for (; i + 2 * N <= n; i += 2 * N) {
      const auto v0 = hn::Add(hn::LoadU(d, a + i), hn::LoadU(d, b + i));
      const auto v1 = hn::Add(hn::LoadU(d, a + i + N), hn::LoadU(d, b + i + N));
      hn::StoreU(v0, d, s + i);
      hn::StoreU(v1, d, s + i + N);
      acc0 = hn::Add(acc0, v0);
      acc1 = hn::Add(acc1, v1);
    }
    for (; i + N <= n; i += N) {
      const auto v = hn::Add(hn::LoadU(d, a + i), hn::LoadU(d, b + i));
      hn::StoreU(v, d, s + i);
      acc0 = hn::Add(acc0, v);
    }
    if (i < n) {
      const auto v = hn::Add(LoadTail(d, a + i, n - i, 0.0f), LoadTail(d, b + i, n - i, 0.0f));
      StoreTail(d, v, s + i, n - i);
      acc1 = hn::Add(acc1, v);
    }
    return ReduceSumF(d, hn::Add(acc0, acc1));
  }
  return ReduceSumF(d, FoldRow(d, a, n, 0.0f,
                               [](auto x, auto y) HWY_ATTR { return hn::Add(x, y); }));
}

// Σ (x[i] - mean)².
HWY_INLINE float SumSquaredDev(const float* HWY_RESTRICT x, size_t n, float mean) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto m = hn::Set(d, mean);
  auto acc0 = hn::Zero(d), acc1 = hn::Zero(d), acc2 = hn::Zero(d), acc3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const auto v0 = hn::Sub(hn::LoadU(d, x + i), m);
    const auto v1 = hn::Sub(hn::LoadU(d, x + i + N), m);
    const auto v2 = hn::Sub(hn::LoadU(d, x + i + 2 * N), m);
    const auto v3 = hn::Sub(hn::LoadU(d, x + i + 3 * N), m);
    acc0 = hn::MulAdd(v0, v0, acc0);
    acc1 = hn::MulAdd(v1, v1, acc1);
    acc2 = hn::MulAdd(v2, v2, acc2);
    acc3 = hn::MulAdd(v3, v3, acc3);
  }
  acc0 = hn::Add(acc0, acc2);
  acc1 = hn::Add(acc1, acc3);
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto v0 = hn::Sub(hn::LoadU(d, x + i), m);
    const auto v1 = hn::Sub(hn::LoadU(d, x + i + N), m);
    acc0 = hn::MulAdd(v0, v0, acc0);
    acc1 = hn::MulAdd(v1, v1, acc1);
  }
  for (; i + N <= n; i += N) {
    const auto v = hn::Sub(hn::LoadU(d, x + i), m);
    acc0 = hn::MulAdd(v, v, acc0);
  }
  if (i < n) {
    const auto v = hn::Sub(LoadTail(d, x + i, n - i, mean), m);  // pad lanes give 0
    acc1 = hn::MulAdd(v, v, acc1);
  }
  return ReduceSumF(d, hn::Add(acc0, acc1));
}

// y = (x - mean)·rstd·gamma + beta; gamma/beta may be null (1 and 0).
HWY_INLINE void Normalize(const float* x, const float* HWY_RESTRICT gamma,
                          const float* HWY_RESTRICT beta, float* y, size_t n,
                          float mean, float rstd) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto vr = hn::Set(d, rstd);
  // (x - mean)·rstd, not x·rstd - mean·rstd: the folded form loses the low
  // bits when |mean| >> std (an ulp of mean·rstd, not of the result).
  const auto vm = hn::Set(d, mean);
  size_t i = 0;
  auto one = [&](auto xv, size_t j, bool tail) {
    auto v = hn::Mul(hn::Sub(xv, vm), vr);
    if (gamma) v = hn::Mul(v, tail ? LoadTail(d, gamma + j, n - j, 0.0f) : hn::LoadU(d, gamma + j));
    if (beta) v = hn::Add(v, tail ? LoadTail(d, beta + j, n - j, 0.0f) : hn::LoadU(d, beta + j));
    return v;
  };
  for (; i + N <= n; i += N) hn::StoreU(one(hn::LoadU(d, x + i), i, false), d, y + i);
  if (i < n) StoreTail(d, one(LoadTail(d, x + i, n - i, 0.0f), i, true), y + i, n - i);
}

// Rows [r0, r1) of y = LN(x + residual) (residual may be null); when sum is
// non-null it receives x + residual. y may alias x (and sum may alias x).
// With `rms` the norm is RMSNorm: the mean is taken as 0.
HWY_NOINLINE void AddLayerNormRows(const float* x, const float* residual,
                                   const float* gamma, const float* beta, float* y,
                                   float* sum, size_t width, float eps, bool rms, size_t r0,
                                   size_t r1) {
  if (width == 0) return;
  for (size_t r = r0; r < r1; ++r) {
    const float* xr = x + r * width;
    const float* rr = residual ? residual + r * width : nullptr;
    float* yr = y + r * width;
    // Where the summed row lives for passes 2 and 3 (L1-resident).
    float* sr = sum ? sum + r * width : (rr ? yr : nullptr);
    const float* src = sr ? sr : xr;
    if (!rr && sum) std::memcpy(sum + r * width, xr, width * sizeof(float));
    const float total = AddAndSum(xr, rr, sr ? sr : yr, width);
    const float mean = rms ? 0.0f : total / static_cast<float>(width);
    const float var = SumSquaredDev(src, width, mean) / static_cast<float>(width);
    const float rstd = 1.0f / std::sqrt(var + eps);
    Normalize(src, gamma, beta, yr, width, mean, rstd);
  }
}

// Σ_j exp(x_j - c) over a row with maximum mx > -inf, storing each term in
// y when kStore, and c in *shift when given: c = k·ln 2 below, or mx.
//   exp(x - max) = 2^(x·log2 e - k) with the integer k = ceil(max·log2 e)
//   (so every result is <= 1 and the maximum's is >= 1/2): t = x·log2 e + c
//   with c = 1.5·2^23 + 127 - k rounds x·log2 e - k to an integer n in the
//   low mantissa bits (2^n is one shift), and r = x·log2 e - (n + k) comes
//   from one FMA with the exact product, so r carries a single rounding.
//   The polynomial is Exp2Fast's (Common-inl.h): ~2 ulp in all, about half
//   the instructions of hn::Exp. Results below 2^-126 are flushed to 0.
template <bool kStore>
HWY_INLINE float ExpShiftedSum(const float* xr, float* yr, size_t width, float mx,
                               double* shift = nullptr) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const float kNegInf = -std::numeric_limits<float>::infinity();
  const auto l2e = hn::Set(d, 1.44269504088896341f);
  const float k = std::ceil(mx * 1.44269504088896341f);
  const auto c = hn::Set(d, 12582912.0f + 127.0f - k);
  const auto cmin = hn::Set(d, 12582912.0f + 1.0f);
  // The shifter needs |k| < 2^22; rows with |max| > 2^21/log2 e (~1.45e6,
  // not a real logit) take the plain path.
  // The exactness of r needs a fused multiply-add: targets without one
  // (SSE4 and below) take the plain path too.
  const bool shifted = HWY_NATIVE_FMA && std::fabs(k) < 2097152.0f;
  if (shift) *shift = shifted ? (double)k * 0.69314718055994530942 : (double)mx;
  const auto vm = hn::Set(d, mx);
  auto ex = [&](auto v) {
    if (HWY_UNLIKELY(!shifted)) return Exp2Fast(d, hn::Mul(hn::Sub(v, vm), l2e));
    const auto t = hn::MulAdd(v, l2e, c);
    const auto u = hn::Sub(t, c);  // n + k, exact
    const auto r = hn::MulSub(v, l2e, u);
    return hn::IfThenZeroElse(hn::Not(hn::Ge(t, cmin)), Exp2Scaled(d, r, t));
  };
  auto s0 = hn::Zero(d), s1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * N <= width; i += 2 * N) {
    const auto e0 = ex(hn::LoadU(d, xr + i));
    const auto e1 = ex(hn::LoadU(d, xr + i + N));
    if constexpr (kStore) {
      hn::StoreU(e0, d, yr + i);
      hn::StoreU(e1, d, yr + i + N);
    }
    s0 = hn::Add(s0, e0);
    s1 = hn::Add(s1, e1);
  }
  for (; i + N <= width; i += N) {
    const auto e = ex(hn::LoadU(d, xr + i));
    if constexpr (kStore) hn::StoreU(e, d, yr + i);
    s0 = hn::Add(s0, e);
  }
  if (i < width) {
    const auto e = ex(LoadTail(d, xr + i, width - i, kNegInf));
    if constexpr (kStore) StoreTail(d, e, yr + i, width - i);
    s1 = hn::Add(s1, e);
  }
  return ReduceSumF(d, hn::Add(s0, s1));
}

// The maximum of a row (-inf for an empty or fully masked one).
HWY_INLINE float RowMax(const float* xr, size_t width) {
  const hn::ScalableTag<float> d;
  return ReduceMaxF(d, FoldRow(d, xr, width, -std::numeric_limits<float>::infinity(),
                               [](auto a, auto b) HWY_ATTR { return hn::Max(a, b); }));
}

// Rows [r0, r1) of y = softmax(x) along the row; a row whose maximum is -inf
// (every entry -inf, i.e. fully masked) yields zeros. y may alias x.
HWY_NOINLINE void SoftmaxRows(const float* x, float* y, size_t width, size_t r0, size_t r1) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t r = r0; r < r1; ++r) {
    const float* xr = x + r * width;
    float* yr = y + r * width;
    const float mx = RowMax(xr, width);
    if (!(mx > kNegInf)) {  // fully masked (or empty) row
      for (size_t j = 0; j < width; ++j) yr[j] = 0.0f;
      continue;
    }
    size_t i = 0;
    const auto inv = hn::Set(d, 1.0f / ExpShiftedSum<true>(xr, yr, width, mx));
    for (; i + N <= width; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, yr + i), inv), d, yr + i);
    for (; i < width; ++i) yr[i] *= hn::GetLane(inv);
  }
}

// out[r] = log Σ_j exp(x[r, j]) for rows [r0, r1): max + log Σ exp(x - max),
// the sum as softmax forms it; -inf for a fully masked row.
HWY_NOINLINE void LogSumExpRows(const float* x, float* out, size_t width, size_t r0, size_t r1) {
  for (size_t r = r0; r < r1; ++r) {
    const float* xr = x + r * width;
    const float mx = RowMax(xr, width);
    if (!(mx > -std::numeric_limits<float>::infinity())) {
      out[r] = mx;
      continue;
    }
    double shift;
    const float sum = ExpShiftedSum<false>(xr, nullptr, width, mx, &shift);
    out[r] = static_cast<float>(shift + std::log((double)sum));
  }
}

// Rows [r0, r1) of the cross-entropy (Norm.h): loss[r], and with `grad`
// the gradient row, from one exp pass that writes the exp terms into it.
HWY_NOINLINE void CrossEntropyRows(const float* x, const int32_t* labels, size_t width,
                                   float smoothing, int32_t ignore, float* loss, float* grad,
                                   float gradScale, size_t r0, size_t r1) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const float spread = smoothing / static_cast<float>(width);
  for (size_t r = r0; r < r1; ++r) {
    const float* xr = x + r * width;
    float* gr = grad ? grad + r * width : nullptr;
    const int32_t y = labels[r];
    if (y == ignore) {
      loss[r] = 0.0f;
      if (gr) std::fill(gr, gr + width, 0.0f);
      continue;
    }
    // Everything read of the row before the exp pass, which may overwrite
    // it (grad == x).
    const float mx = RowMax(xr, width), xy = xr[y];
    const double total = ReduceSumF(d, FoldRow(d, xr, width, 0.0f, [](auto a, auto b) HWY_ATTR {
      return hn::Add(a, b);
    }));
    double shift;
    const float sum = gr ? ExpShiftedSum<true>(xr, gr, width, mx, &shift)
                         : ExpShiftedSum<false>(xr, nullptr, width, mx, &shift);
    const double lse = shift + std::log((double)sum);
    loss[r] = static_cast<float>(lse - (1.0 - smoothing) * xy - spread * total);
    if (!gr) continue;
    // exp terms / sum is softmax; minus the smoothed target, times the scale.
    const auto inv = hn::Set(d, gradScale / sum), off = hn::Set(d, gradScale * spread);
    size_t i = 0;
    for (; i + N <= width; i += N)
      hn::StoreU(hn::MulSub(hn::LoadU(d, gr + i), inv, off), d, gr + i);
    for (; i < width; ++i) gr[i] = gr[i] * hn::GetLane(inv) - hn::GetLane(off);
    gr[y] -= gradScale * (1.0f - smoothing);
  }
}

// Columns [j0, j1) of columnSums (Norm.h): rows streamed in order, each
// added to a row of double accumulators (the range's columns, contiguous).
HWY_NOINLINE void ColumnSumRange(const float* HWY_RESTRICT x, size_t rows, size_t cols,
                                 double divisor, float* HWY_RESTRICT out, size_t j0, size_t j1) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> dh;  // as many floats as doubles
  const size_t N = hn::Lanes(dd), w = j1 - j0;
  auto acc = hwy::AllocateAligned<double>(w + N);
  std::fill_n(acc.get(), w, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    const float* HWY_RESTRICT xr = x + r * cols + j0;
    size_t j = 0;
    for (; j + N <= w; j += N)
      hn::Store(hn::Add(hn::Load(dd, acc.get() + j), hn::PromoteTo(dd, hn::LoadU(dh, xr + j))), dd,
                acc.get() + j);
    for (; j < w; ++j) acc[j] += xr[j];
  }
  size_t j = 0;
  const auto div = hn::Set(dd, divisor);
  for (; j + N <= w; j += N)
    hn::StoreU(hn::DemoteTo(dh, hn::Div(hn::Load(dd, acc.get() + j), div)), dh, out + j0 + j);
  for (; j < w; ++j) out[j0 + j] = static_cast<float>(acc[j] / divisor);
}

// ---- layerNormGrad (Norm.h): three passes ----

// Rows [r0, r1): stats[2r] = the mean of row r (0 for RMSNorm), stats[2r +
// 1] = 1/sqrt(var + eps), in fp32 as the forward computes them.
HWY_NOINLINE void LayerNormStatsRows(const float* x, size_t width, float eps, bool rms,
                                     float* stats, size_t r0, size_t r1) {
  for (size_t r = r0; r < r1; ++r) {
    const float* xr = x + r * width;
    const float mean =
        rms ? 0.0f : AddAndSum(xr, nullptr, nullptr, width) / static_cast<float>(width);
    const float var = SumSquaredDev(xr, width, mean) / static_cast<float>(width);
    stats[2 * r] = mean;
    stats[2 * r + 1] = 1.0f / std::sqrt(var + eps);
  }
}

// Columns [j0, j1): dgamma = Σ_r dy·x̂ and dbeta = Σ_r dy over the rows in
// row order, in double (x̂ = (x - mean)·rstd in fp32), rounded once.
HWY_NOINLINE void LayerNormParamGradRange(const float* HWY_RESTRICT x,
                                          const float* HWY_RESTRICT dy, const float* stats,
                                          size_t rows, size_t cols, float* HWY_RESTRICT dgamma,
                                          float* HWY_RESTRICT dbeta, size_t j0, size_t j1) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> dh;  // as many floats as doubles
  const size_t N = hn::Lanes(dd), w = j1 - j0;
  auto accG = hwy::AllocateAligned<double>(w + N), accB = hwy::AllocateAligned<double>(w + N);
  std::fill_n(accG.get(), w, 0.0);
  std::fill_n(accB.get(), w, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    const float* HWY_RESTRICT xr = x + r * cols + j0;
    const float* HWY_RESTRICT gr = dy + r * cols + j0;
    const float mean = stats[2 * r], rstd = stats[2 * r + 1];
    const auto vm = hn::Set(dh, mean), vr = hn::Set(dh, rstd);
    size_t j = 0;
    for (; j + N <= w; j += N) {
      const auto xh = hn::PromoteTo(dd, hn::Mul(hn::Sub(hn::LoadU(dh, xr + j), vm), vr));
      const auto g = hn::PromoteTo(dd, hn::LoadU(dh, gr + j));
      hn::Store(hn::MulAdd(g, xh, hn::Load(dd, accG.get() + j)), dd, accG.get() + j);
      hn::Store(hn::Add(hn::Load(dd, accB.get() + j), g), dd, accB.get() + j);
    }
    for (; j < w; ++j) {
      const float xh = (xr[j] - mean) * rstd;
      accG[j] += static_cast<double>(gr[j]) * xh;
      accB[j] += gr[j];
    }
  }
  for (size_t j = 0; j < w; ++j) {
    dgamma[j0 + j] = static_cast<float>(accG[j]);
    dbeta[j0 + j] = static_cast<float>(accB[j]);
  }
}

// Rows [r0, r1): dx = rstd·(d - mean(d) - x̂·mean(d·x̂)), d = dy·gamma, the
// means in fp32 (RMSNorm: without the mean(d) term). dx may alias x or dy
// (each element is read before it is written).
HWY_NOINLINE void LayerNormInputGradRows(const float* x, const float* HWY_RESTRICT gamma,
                                         const float* dy, const float* stats, float* dx,
                                         size_t width, bool rms, size_t r0, size_t r1) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const float inv = 1.0f / static_cast<float>(width);
  for (size_t r = r0; r < r1; ++r) {
    const float* xr = x + r * width;
    const float* gr = dy + r * width;
    float* outr = dx + r * width;
    const auto vm = hn::Set(d, stats[2 * r]), vr = hn::Set(d, stats[2 * r + 1]);
    // One element block: d = dy·gamma and x̂ (tail lanes 0).
    auto load = [&](size_t j, bool tail, auto* dv, auto* xh) HWY_ATTR {
      const size_t n = width - j;
      const auto xv = tail ? LoadTail(d, xr + j, n, stats[2 * r]) : hn::LoadU(d, xr + j);
      const auto gv = tail ? LoadTail(d, gr + j, n, 0.0f) : hn::LoadU(d, gr + j);
      const auto gm = tail ? LoadTail(d, gamma + j, n, 0.0f) : hn::LoadU(d, gamma + j);
      *dv = hn::Mul(gv, gm);
      *xh = hn::Mul(hn::Sub(xv, vm), vr);
    };
    auto accD = hn::Zero(d), accDx = hn::Zero(d);
    size_t j = 0;
    for (; j + N <= width; j += N) {
      hn::Vec<decltype(d)> dv, xh;
      load(j, false, &dv, &xh);
      accD = hn::Add(accD, dv);
      accDx = hn::MulAdd(dv, xh, accDx);
    }
    if (j < width) {
      hn::Vec<decltype(d)> dv, xh;
      load(j, true, &dv, &xh);
      accD = hn::Add(accD, dv);
      accDx = hn::MulAdd(dv, xh, accDx);
    }
    const auto md = hn::Set(d, rms ? 0.0f : ReduceSumF(d, accD) * inv);
    const auto mdx = hn::Set(d, ReduceSumF(d, accDx) * inv);
    auto result = [&](auto dv, auto xh) HWY_ATTR {
      return hn::Mul(vr, hn::Sub(hn::Sub(dv, md), hn::Mul(xh, mdx)));
    };
    for (j = 0; j + N <= width; j += N) {
      hn::Vec<decltype(d)> dv, xh;
      load(j, false, &dv, &xh);
      hn::StoreU(result(dv, xh), d, outr + j);
    }
    if (j < width) {
      hn::Vec<decltype(d)> dv, xh;
      load(j, true, &dv, &xh);
      StoreTail(d, result(dv, xh), outr + j, width - j);
    }
  }
}

// Norm.h's addLayerNorm and softmax over all rows, split on the pool in
// tasks of about 32 KiB of row data (enough to hide a task's overhead).
HWY_NOINLINE void AddLayerNormRun(const float* x, const float* residual, const float* gamma,
                                  const float* beta, float* y, float* sum, size_t rows,
                                  size_t width, float eps, bool rms, rt::ThreadPool* pool) {
  if (rows == 0 || width == 0) return;
  parallelFor(pool, rows, rowGrain(width), [&](size_t r0, size_t r1) {
    AddLayerNormRows(x, residual, gamma, beta, y, sum, width, eps, rms, r0, r1);
  });
}

HWY_NOINLINE void SoftmaxRun(const float* x, float* y, size_t rows, size_t width,
                             rt::ThreadPool* pool) {
  if (rows == 0 || width == 0) return;
  parallelFor(pool, rows, rowGrain(width),
              [&](size_t r0, size_t r1) { SoftmaxRows(x, y, width, r0, r1); });
}

}  // namespace HWY_NAMESPACE
}  // namespace transfuse::kernels
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
