// Per-target helpers shared by the row kernels (norm, elementwise, attention):
// partial-vector loads and stores that never touch memory past the end of a
// row (so any pointer alignment and any length are safe on every target), and
// horizontal reductions returning a scalar. Include after hwy/foreach_target.h
// or highway.h; the toggle guard re-includes it per target.

#if defined(TRANSFUSE_KERNELS_COMMON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TRANSFUSE_KERNELS_COMMON_INL_H_
#undef TRANSFUSE_KERNELS_COMMON_INL_H_
#else
#define TRANSFUSE_KERNELS_COMMON_INL_H_
#endif

#include <hwy/highway.h>

#include <limits>

#include <cstddef>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace transfuse::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Loads n < Lanes(d) elements from p, the other lanes set to `fill`. Where
// masked memory ops cannot fault (AVX-512) a masked load; elsewhere through
// a stack buffer (a store-forwarding stall, which a masked load avoids: it
// made the AVX-512 decode attention 2.5x slower than AVX2 on tails).
template <class D, class T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> LoadTail(D d, const T* HWY_RESTRICT p, size_t n, T fill) {
#if !HWY_MEM_OPS_MIGHT_FAULT
  const auto m = hn::FirstN(d, n);
  return hn::IfThenElse(m, hn::MaskedLoad(m, d, p), hn::Set(d, fill));
#else
  HWY_ALIGN T buf[hn::MaxLanes(d)];
  for (size_t i = 0; i < hn::MaxLanes(d); ++i) buf[i] = fill;
  std::memcpy(buf, p, n * sizeof(T));
  return hn::Load(d, buf);
#endif
}

// Stores the first n < Lanes(d) lanes of v to p (masked where it cannot fault).
template <class D, class T = hn::TFromD<D>>
HWY_INLINE void StoreTail(D d, hn::Vec<D> v, T* HWY_RESTRICT p, size_t n) {
#if !HWY_MEM_OPS_MIGHT_FAULT
  hn::BlendedStore(v, hn::FirstN(d, n), d, p);
#else
  HWY_ALIGN T buf[hn::MaxLanes(d)];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, n * sizeof(T));
#endif
}

template <class D>
HWY_INLINE float ReduceSumF(D d, hn::Vec<D> v) {
  return hn::GetLane(hn::SumOfLanes(d, v));
}

// The largest lane; -inf when every lane is -inf (a fully masked row).
template <class D>
HWY_INLINE float ReduceMaxF(D d, hn::Vec<D> v) {
#if HWY_TARGET == HWY_EMU128
  // Highway 1.0.3's EMU128 MaxOfLanes starts from -FLT_MAX instead of -inf,
  // so an all -inf vector would give -FLT_MAX (and a masked row NaNs).
  HWY_ALIGN float lanes[hn::MaxLanes(d)];
  hn::Store(v, d, lanes);
  float m = lanes[0];
  for (size_t i = 1; i < hn::Lanes(d); ++i) m = lanes[i] > m ? lanes[i] : m;
  return m;
#else
  return hn::GetLane(hn::MaxOfLanes(d, v));
#endif
}

// Folds a[0..n) into one vector with `op` (an add or a max of two vectors)
// over four independent chains: a row of 512 floats is only 32 AVX-512
// vectors, so one or two chains would be bound by the op's latency, not the
// loads. Tail lanes past n read as `identity`. Reduce the result across lanes
// with ReduceSumF / ReduceMaxF.
template <class D, class Op>
HWY_INLINE hn::Vec<D> FoldRow(D d, const float* HWY_RESTRICT a, size_t n, float identity,
                              const Op& op) {
  const size_t N = hn::Lanes(d);
  auto acc0 = hn::Set(d, identity), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    acc0 = op(acc0, hn::LoadU(d, a + i));
    acc1 = op(acc1, hn::LoadU(d, a + i + N));
    acc2 = op(acc2, hn::LoadU(d, a + i + 2 * N));
    acc3 = op(acc3, hn::LoadU(d, a + i + 3 * N));
  }
  acc0 = op(acc0, acc2);
  acc1 = op(acc1, acc3);
  for (; i + 2 * N <= n; i += 2 * N) {
    acc0 = op(acc0, hn::LoadU(d, a + i));
    acc1 = op(acc1, hn::LoadU(d, a + i + N));
  }
  for (; i + N <= n; i += N) acc0 = op(acc0, hn::LoadU(d, a + i));
  if (i < n) acc1 = op(acc1, LoadTail(d, a + i, n - i, identity));
  return op(acc0, acc1);
}

// 2^x for softmax arguments (x = (s - max)·log2 e <= 0 in row softmax; x <= 12
// in attention, whose scores are kept in log2 units) and -inf:
// x = n + r with n = round(x) (the 1.5·2^23 shifter, which also leaves n + 127
// in the low mantissa bits, so 2^n is one shift: no float-to-int conversion)
// and |r| <= 1/2; 2^r by a degree-5 polynomial (coefficients fitted for this
// project by a weighted least-squares minimax iteration: relative error
// 1.5e-7, 2.3e-7 evaluated in fp32). x < -126 (including -inf) gives exactly 0;
// the true value there is below 1.2e-38. 12 instructions against ~24 for
// hn::Exp, which handles every x. Valid for x <= 127.
// p(r)·2^n for |r| <= 1/2 and t holding n + 127 in its low mantissa bits (t =
// y + 1.5·2^23 + 127 for an integer-rounded y; 0 <= n + 127 < 256): the
// polynomial and scaling step of Exp2Fast, for callers that reduce themselves.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V Exp2Scaled(D d, V r, V t) {
  const hn::RebindToSigned<D> di;
  V p = hn::Set(d, 1.327646547e-03f);
  p = hn::MulAdd(p, r, hn::Set(d, 9.675541893e-03f));
  p = hn::MulAdd(p, r, hn::Set(d, 5.550713465e-02f));
  p = hn::MulAdd(p, r, hn::Set(d, 2.402212024e-01f));
  p = hn::MulAdd(p, r, hn::Set(d, 6.931469440e-01f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.000000119e+00f));
  return hn::Mul(p, hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(di, t))));
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V Exp2Fast(D d, V x) {
  const V kShift = hn::Set(d, 12582912.0f + 127.0f);  // 1.5·2^23 + bias
  const V kMin = hn::Set(d, -126.0f);
  const V xc = hn::Max(x, kMin);
  const V t = hn::Add(xc, kShift);     // low mantissa bits: n + 127
  const V r = hn::Sub(xc, hn::Sub(t, kShift));  // x - n, in [-1/2, 1/2]
  return hn::IfThenZeroElse(hn::Lt(x, kMin), Exp2Scaled(d, r, t));
}

// p[j] = 2^(s[j] - m) in place for j < n (scores in log2 units; -inf
// gives 0), returning Σ p: the weights of a softmax row with maximum m.
template <class D>
HWY_INLINE float Exp2ShiftedSumInPlace(D d, float* HWY_RESTRICT s, size_t n, float m) {
  const size_t N = hn::Lanes(d);
  const auto vm = hn::Set(d, m);
  auto sum = hn::Zero(d);
  size_t j = 0;
  for (; j + N <= n; j += N) {
    const auto p = Exp2Fast(d, hn::Sub(hn::LoadU(d, s + j), vm));
    hn::StoreU(p, d, s + j);
    sum = hn::Add(sum, p);
  }
  if (j < n) {
    const auto p = Exp2Fast(d, hn::Sub(LoadTail(d, s + j, n - j, -std::numeric_limits<float>::infinity()), vm));
    StoreTail(d, p, s + j, n - j);
    sum = hn::Add(sum, p);
  }
  return ReduceSumF(d, sum);
}

}  // namespace HWY_NAMESPACE
}  // namespace transfuse::kernels
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
