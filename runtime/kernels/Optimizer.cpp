// Optimizer.h: the per-target Adam pass, dispatch and threading.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/Optimizer.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "runtime/kernels/Common-inl.h"
#include "runtime/kernels/Optimizer.h"

#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace transfuse::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Elements [begin, end); c: lr / bc1, 1 / sqrt(bc2) precomputed.
void AdamRange(float* HWY_RESTRICT p, const float* HWY_RESTRICT g, float* HWY_RESTRICT m,
               float* HWY_RESTRICT v, const AdamStep& s, float stepSize, float invSqrtBc2,
               size_t begin, size_t end) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto b1 = hn::Set(d, s.beta1), c1 = hn::Set(d, 1.0f - s.beta1);
  const auto b2 = hn::Set(d, s.beta2), c2 = hn::Set(d, 1.0f - s.beta2);
  const auto scale = hn::Set(d, s.gradScale), decay = hn::Set(d, 1.0f - s.lr * s.weightDecay);
  const auto size = hn::Set(d, stepSize), inv = hn::Set(d, invSqrtBc2), eps = hn::Set(d, s.eps);
  auto update = [&](size_t i, size_t count) {
    const bool full = count == N;
    auto gi = hn::Mul(full ? hn::LoadU(d, g + i) : LoadTail(d, g + i, count, 0.0f), scale);
    auto pi = full ? hn::LoadU(d, p + i) : LoadTail(d, p + i, count, 0.0f);
    auto mi = full ? hn::LoadU(d, m + i) : LoadTail(d, m + i, count, 0.0f);
    auto vi = full ? hn::LoadU(d, v + i) : LoadTail(d, v + i, count, 0.0f);
    if (s.weightDecay != 0.0f) pi = hn::Mul(pi, decay);
    mi = hn::MulAdd(b1, mi, hn::Mul(c1, gi));
    vi = hn::MulAdd(b2, vi, hn::Mul(c2, hn::Mul(gi, gi)));
    const auto denom = hn::MulAdd(hn::Sqrt(vi), inv, eps);
    pi = hn::NegMulAdd(size, hn::Div(mi, denom), pi);
    if (full) {
      hn::StoreU(pi, d, p + i);
      hn::StoreU(mi, d, m + i);
      hn::StoreU(vi, d, v + i);
    } else {
      StoreTail(d, pi, p + i, count);
      StoreTail(d, mi, m + i, count);
      StoreTail(d, vi, v + i, count);
    }
  };
  size_t i = begin;
  for (; i + N <= end; i += N) update(i, N);
  if (i < end) update(i, end - i);
}

}  // namespace HWY_NAMESPACE
}  // namespace transfuse::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "runtime/kernels/Parallel.h"

namespace transfuse::kernels {

HWY_EXPORT(AdamRange);

void adamUpdate(float* param, const float* grad, float* m, float* v, size_t n, const AdamStep& s,
                rt::ThreadPool* pool) {
  if (n == 0) return;
  const double t = static_cast<double>(s.step);
  const float stepSize = static_cast<float>(s.lr / (1.0 - std::pow(double(s.beta1), t)));
  const float invSqrtBc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(double(s.beta2), t)));
  auto* fn = HWY_DYNAMIC_DISPATCH(AdamRange);
  // An element's result does not depend on where the chunks split (full
  // vectors and the tail compute alike): any thread count gives the same bits.
  parallelFor(pool, n, 1 << 14, [&](size_t b, size_t e) {
    fn(param, grad, m, v, s, stepSize, invSqrtBc2, b, e);
  });
}

}  // namespace transfuse::kernels
#endif  // HWY_ONCE
