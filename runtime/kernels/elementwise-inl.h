// Generic vectorized elementwise maps for fp32, per target: the building block
// that generated code (and Elementwise.cpp) instantiates with a Highway lambda.
//
// Usage, in a translation unit compiled once per target with Highway's dynamic
// dispatch:
//
//   #undef HWY_TARGET_INCLUDE
//   #define HWY_TARGET_INCLUDE "gen/model_kernels.cpp"   // this file
//   #include <hwy/foreach_target.h>
//   #include <hwy/highway.h>
//   #include "runtime/kernels/elementwise-inl.h"
//   HWY_BEFORE_NAMESPACE();
//   namespace gen { namespace HWY_NAMESPACE {
//   namespace hn = hwy::HWY_NAMESPACE;
//   namespace tk = transfuse::kernels::HWY_NAMESPACE;
//   void BiasGelu(const float* x, const float* b, float* y, size_t n) {
//     tk::MapBinary(x, b, y, n, [](auto d, auto xv, auto bv) {
//       return tk::GeluErf(d, hn::Add(xv, bv));
//     });
//   }
//   }}  HWY_AFTER_NAMESPACE();
//   #if HWY_ONCE  ... HWY_EXPORT(BiasGelu); HWY_DYNAMIC_DISPATCH(BiasGelu)(...) ...
//
// The lambda receives the descriptor `d` (hn::ScalableTag<float>) and one
// vector per input, and returns the output vector. It is called on full
// vectors and once on a partial tail whose unused lanes hold 0 (their results
// are discarded, so an op may produce anything there, NaN included). Inputs
// and output need no alignment; out may alias an input element for element.
// Only inline functions and templates live here, so any number of TUs may
// include it.

#if defined(TRANSFUSE_KERNELS_ELEMENTWISE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TRANSFUSE_KERNELS_ELEMENTWISE_INL_H_
#undef TRANSFUSE_KERNELS_ELEMENTWISE_INL_H_
#else
#define TRANSFUSE_KERNELS_ELEMENTWISE_INL_H_
#endif

#include <hwy/highway.h>

#include "runtime/kernels/Activation.h"
#include "runtime/kernels/Common-inl.h"
#include "runtime/kernels/Erf-inl.h"

#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace transfuse::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// out[i] = op(d, in[i]) for i in [0, n).
template <class Op>
HWY_INLINE void MapUnary(const float* in, float* out, size_t n, const Op& op) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto v0 = op(d, hn::LoadU(d, in + i));
    const auto v1 = op(d, hn::LoadU(d, in + i + N));
    hn::StoreU(v0, d, out + i);
    hn::StoreU(v1, d, out + i + N);
  }
  for (; i + N <= n; i += N) hn::StoreU(op(d, hn::LoadU(d, in + i)), d, out + i);
  if (i < n) StoreTail(d, op(d, LoadTail(d, in + i, n - i, 0.0f)), out + i, n - i);
}

// out[i] = op(d, a[i], b[i]) for i in [0, n).
template <class Op>
HWY_INLINE void MapBinary(const float* a, const float* b, float* out, size_t n,
                          const Op& op) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(op(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
  if (i < n)
    StoreTail(d, op(d, LoadTail(d, a + i, n - i, 0.0f), LoadTail(d, b + i, n - i, 0.0f)),
              out + i, n - i);
}

// Row-broadcast binary map: out[r, j] = op(d, a[r, j], row[j]) for a rows × width
// (contiguous), e.g. a bias add before an activation.
template <class Op>
HWY_INLINE void MapRowBroadcast(const float* a, const float* row, float* out, size_t rows,
                                size_t width, const Op& op) {
  for (size_t r = 0; r < rows; ++r) MapBinary(a + r * width, row, out + r * width, width, op);
}

// y = act(x) for [0, n) with Erf-inl.h's forms (kernels::activate's body;
// kNone copies). y may be x.
HWY_INLINE void ActivateSpan(Activation act, const float* x, float* y, size_t n) {
  switch (act) {
    case Activation::kNone:
      if (x != y) std::memmove(y, x, n * sizeof(float));
      return;
    case Activation::kRelu:
      return MapUnary(x, y, n, [](auto d, auto v) HWY_ATTR { return Relu(d, v); });
    case Activation::kGelu:
      return MapUnary(x, y, n, [](auto d, auto v) HWY_ATTR { return GeluErf(d, v); });
    case Activation::kGeluTanh:
      return MapUnary(x, y, n, [](auto d, auto v) HWY_ATTR { return GeluTanh(d, v); });
    case Activation::kSilu:
      return MapUnary(x, y, n, [](auto d, auto v) HWY_ATTR { return Silu(d, v); });
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace transfuse::kernels
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
