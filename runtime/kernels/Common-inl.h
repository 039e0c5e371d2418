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

#include <cstddef>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace transfuse::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Loads n < Lanes(d) elements from p, the other lanes set to `fill`.
template <class D, class T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> LoadTail(D d, const T* HWY_RESTRICT p, size_t n, T fill) {
  HWY_ALIGN T buf[hn::MaxLanes(d)];
  for (size_t i = 0; i < hn::MaxLanes(d); ++i) buf[i] = fill;
  std::memcpy(buf, p, n * sizeof(T));
  return hn::Load(d, buf);
}

// Stores the first n < Lanes(d) lanes of v to p.
template <class D, class T = hn::TFromD<D>>
HWY_INLINE void StoreTail(D d, hn::Vec<D> v, T* HWY_RESTRICT p, size_t n) {
  HWY_ALIGN T buf[hn::MaxLanes(d)];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, n * sizeof(T));
}

template <class D>
HWY_INLINE float ReduceSumF(D d, hn::Vec<D> v) {
  return hn::GetLane(hn::SumOfLanes(d, v));
}

template <class D>
HWY_INLINE float ReduceMaxF(D d, hn::Vec<D> v) {
  return hn::GetLane(hn::MaxOfLanes(d, v));
}

}  // namespace HWY_NAMESPACE
}  // namespace transfuse::kernels
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
