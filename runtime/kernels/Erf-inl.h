// Vectorized erf, erfc and the activations (GELU, SiLU, ReLU) for fp32 (Highway 1.0.3
// has Exp, Log and Tanh in contrib/math but no Erf). Per-target code: include
// it after hwy/foreach_target.h (or in a single-target TU after highway.h);
// the toggle guard below re-includes it once per target.
//
// Math (coefficients fitted for this project by a weighted least-squares
// (Lawson) minimax iteration against mpmath at 40 digits):
//   |x| <  0.875:  erf(x)  = x · P(x²),                 P of degree 5
//                  relative fit error 8.5e-9 (below fp32 rounding)
//   a  >= 0.875:   erfc(a) = exp(-a² + g(1/a)) / a,     g of degree 9 in u = 1/a,
//                  fitted on a in [0.875, 10]; absolute fit error of g 6.4e-8,
//                  i.e. erfc's relative fit error is 6.4e-8; erfc(a) = 0 for
//                  a > 10 (the true value, 2e-45, is below fp32's range anyway).
//                  erf(x) = sign(x) · (1 - erfc(|x|)).
// Measured against std::erf (double) over every 64th fp32 bit pattern
// (tests/unit/kernels/elementwise_test.cpp, ErfWholeRange): max absolute error
// 1.64e-7 (at x = 0.87537, about 1.5 ulp of the result), max relative error
// 1.77e-7 for 1e-30 < |x| < 0.875 (subnormal results are within 2 subnormal
// ulp). The tests assert 2e-7 and 2.5e-7. The rounding of a² (relative 6e-8) limits erfc's relative
// accuracy to about 1e-6·a² for large a; erf itself is unaffected (erfc < 1e-7
// there). NaN in gives NaN out; ±inf gives ±1.
//
//   GeluErf(x)  = x/2 · (1 + erf(x/√2)), computed as x - x/2·erfc(x/√2) for
//                 x/√2 >= 0.875 and x/2·erfc(-x/√2) for x/√2 <= -0.875, so the
//                 negative tail keeps its relative accuracy (no 1 + erf
//                 cancellation).
//   GeluTanh(x) = x/2 · (1 + tanh(√(2/π)(x + 0.044715x³)))
//               = x / (1 + exp(-2√(2/π)(x + 0.044715x³))), the same function
//                 written without the cancellation of 1 + tanh for x << 0.
//   Silu(x)     = x / (1 + exp(-x)), exp's argument held at 88 (its range; the
//                 result is below 1e-36·|x| there).
//   Relu(x)     = max(x, 0).
//   Sigmoid(x)  = 1 / (1 + exp(-x)), exp's argument held at 88 (0 below -88,
//                 where the true value is under 6e-39).
//   Sqrt(x)     = hn::Sqrt, correctly rounded like std::sqrt.
//   Pow(a, b)   = exp(b·log|a|), negated for a < 0 and odd integer b; NaN for
//                 a < 0 and b not an integer; 1 for b = 0; 0 or inf for a = 0.
//                 Its relative error grows with |b·log|a|| (the rounding of
//                 the product): about 1e-7·(1 + |b·log|a||).

#if defined(TRANSFUSE_KERNELS_ERF_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TRANSFUSE_KERNELS_ERF_INL_H_
#undef TRANSFUSE_KERNELS_ERF_INL_H_
#else
#define TRANSFUSE_KERNELS_ERF_INL_H_
#endif

#include <cmath>

#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

HWY_BEFORE_NAMESPACE();
namespace transfuse::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// erf(x)/x for |x| < 0.875, as a polynomial in x².
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ErfSmallOverX(D d, V x2) {
  V p = hn::Set(d, -6.203263183e-04f);
  p = hn::MulAdd(p, x2, hn::Set(d, 5.032183137e-03f));
  p = hn::MulAdd(p, x2, hn::Set(d, -2.679146454e-02f));
  p = hn::MulAdd(p, x2, hn::Set(d, 1.128245518e-01f));
  p = hn::MulAdd(p, x2, hn::Set(d, -3.761255145e-01f));
  p = hn::MulAdd(p, x2, hn::Set(d, 1.128379107e+00f));
  return p;
}

// erfc(a) for a >= 0.875 (smaller a are clamped to 0.875: callers select the
// small-argument formula there). Returns 0 for a > 10 and for a = +inf.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ErfcLarge(D d, V a) {
  const V kLo = hn::Set(d, 0.875f);
  const V kHi = hn::Set(d, 10.0f);
  const V ac = hn::Min(hn::Max(a, kLo), kHi);
  const V u = hn::Div(hn::Set(d, 1.0f), ac);
  V g = hn::Set(d, -4.830094799e-02f);
  g = hn::MulAdd(g, u, hn::Set(d, 3.502098620e-01f));
  g = hn::MulAdd(g, u, hn::Set(d, -1.113309145e+00f));
  g = hn::MulAdd(g, u, hn::Set(d, 2.017961502e+00f));
  g = hn::MulAdd(g, u, hn::Set(d, -2.230124235e+00f));
  g = hn::MulAdd(g, u, hn::Set(d, 1.386385798e+00f));
  g = hn::MulAdd(g, u, hn::Set(d, -1.587097943e-01f));
  g = hn::MulAdd(g, u, hn::Set(d, -4.800071716e-01f));
  g = hn::MulAdd(g, u, hn::Set(d, -1.386511954e-03f));
  g = hn::MulAdd(g, u, hn::Set(d, -5.723246932e-01f));
  const V e = hn::Exp(d, hn::NegMulAdd(ac, ac, g));  // exp(g - a²)
  return hn::IfThenZeroElse(hn::Gt(a, kHi), hn::Mul(e, u));
}

// erf(x) for any fp32 x (see the header comment for its accuracy).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V Erf(D d, V x) {
  const V a = hn::Abs(x);
  const V small = hn::Mul(a, ErfSmallOverX(d, hn::Mul(a, a)));
  const V large = hn::Sub(hn::Set(d, 1.0f), ErfcLarge(d, a));
  const V r = hn::IfThenElse(hn::Lt(a, hn::Set(d, 0.875f)), small, large);
  // Restore the sign (erf is odd); NaN propagates through `small`/`large`
  // only if we let it: keep x's NaN explicitly.
  const V signed_r = hn::CopySignToAbs(r, x);
  return hn::IfThenElse(hn::Eq(x, x), signed_r, x);
}

// Exact GELU: x/2 · (1 + erf(x/√2)), on |x| <= 13.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V GeluErfCore(D d, V x) {
  const V kHalf = hn::Set(d, 0.5f);
  const V z = hn::Mul(x, hn::Set(d, 0.70710678118654752f));
  const V a = hn::Abs(z);
  const V hx = hn::Mul(kHalf, x);
  // |z| < 0.875: x/2 + x/2 · z·P(z²).
  const V small = hn::MulAdd(hx, hn::Mul(z, ErfSmallOverX(d, hn::Mul(z, z))), hx);
  // |z| >= 0.875: x/2·erfc(|z|) for x < 0, x - x/2·erfc(|z|) for x > 0.
  const V t = hn::Mul(hx, ErfcLarge(d, a));
  const V large = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), t, hn::Sub(x, t));
  return hn::IfThenElse(hn::Lt(a, hn::Set(d, 0.875f)), small, large);
}

// The gelus are evaluated on a clamped x so that their exp never returns a
// subnormal (each costs a ~150-cycle microcode assist; with GEMM outputs of
// magnitude ~10 a fifth of them did, and a gelu epilogue took longer than the
// 1024³ product). Outside the clamp the result is exact to fp32: gelu(x) = x
// for x > 13 (erfc(13/√2) < 1e-37) and 0 for x < -13 (|gelu| < 1e-36);
// gelu_tanh(x) = x for x > 9 (1 + e^-66 rounds to 1). NaN stays NaN.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V GeluErf(D d, V x) {
  const V lim = hn::Set(d, 13.0f);
  const V y = GeluErfCore(d, hn::Min(hn::Max(x, hn::Neg(lim)), lim));
  const V big = hn::IfThenElse(hn::Gt(x, lim), x, y);
  return hn::IfThenElse(hn::Lt(x, hn::Neg(lim)), hn::Zero(d),
                        hn::IfThenElse(hn::Eq(x, x), big, x));
}

// Tanh-approximated GELU, in its sigmoid form x / (1 + exp(-2k(x + 0.044715x³))),
// on x <= 9 (see above).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V GeluTanhCore(D d, V x) {
  const V k2 = hn::Set(d, -2.0f * 0.79788456080286536f);  // -2·√(2/π)
  const V x2 = hn::Mul(x, x);
  const V inner = hn::Mul(x, hn::MulAdd(hn::Set(d, 0.044715f), x2, hn::Set(d, 1.0f)));
  // Clamp so Exp stays in its valid range; exp(88) already makes the result ~0.
  const V arg = hn::Min(hn::Mul(k2, inner), hn::Set(d, 88.0f));
  const V den = hn::Add(hn::Set(d, 1.0f), hn::Exp(d, arg));
  return hn::Div(x, den);
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V GeluTanh(D d, V x) {
  const V lim = hn::Set(d, 9.0f);
  const V y = GeluTanhCore(d, hn::Min(x, lim));
  return hn::IfThenElse(hn::Gt(x, lim), x, hn::IfThenElse(hn::Eq(x, x), y, x));
}

// The activations' derivatives (ElementwiseMath.h states them; these are
// their vector forms, for activation_grad), clamped like the gelus above so
// that no exp returns a subnormal:
//   gelu'(x) = Φ(x) + x·φ(x): Φ as GeluErfCore forms gelu's (erf(z)/z near 0,
//     erfc(|z|) beyond, so the negative tail does not cancel), φ(x) =
//     exp(-x²/2)/√(2π); 1 for x > 13, 0 for x < -13 (|gelu'| < 1e-35 there).
//   gelu_tanh'(x) = s + x·s·(1 - s)·2√(2/π)·(1 + 3·0.044715·x²),
//     s = 1/(1 + exp(-2√(2/π)(x + 0.044715x³))); 1 for x > 9, 0 for x < -9
//     (|gelu_tanh'| < 1e-26 there).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V GeluErfDerivative(D d, V x) {
  const V lim = hn::Set(d, 13.0f), half = hn::Set(d, 0.5f);
  const V xc = hn::Min(hn::Max(x, hn::Neg(lim)), lim);
  const V z = hn::Mul(xc, hn::Set(d, 0.70710678118654752f));
  const V a = hn::Abs(z);
  const V small = hn::MulAdd(half, hn::Mul(z, ErfSmallOverX(d, hn::Mul(z, z))), half);
  const V t = hn::Mul(half, ErfcLarge(d, a));
  const V large = hn::IfThenElse(hn::Lt(xc, hn::Zero(d)), t, hn::Sub(hn::Set(d, 1.0f), t));
  const V cdf = hn::IfThenElse(hn::Lt(a, hn::Set(d, 0.875f)), small, large);
  const V pdf = hn::Mul(hn::Set(d, 0.39894228040143267794f),
                        hn::Exp(d, hn::Mul(hn::Set(d, -0.5f), hn::Mul(xc, xc))));
  const V y = hn::MulAdd(xc, pdf, cdf);
  return hn::IfThenElse(hn::Gt(x, lim), hn::Set(d, 1.0f),
                        hn::IfThenElse(hn::Lt(x, hn::Neg(lim)), hn::Zero(d),
                                       hn::IfThenElse(hn::Eq(x, x), y, x)));
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V GeluTanhDerivative(D d, V x) {
  const V lim = hn::Set(d, 9.0f), one = hn::Set(d, 1.0f);
  const V k = hn::Set(d, 1.5957691216057307118f);  // 2√(2/π)
  const V xc = hn::Min(hn::Max(x, hn::Neg(lim)), lim);
  const V x2 = hn::Mul(xc, xc);
  const V inner = hn::Mul(xc, hn::MulAdd(hn::Set(d, 0.044715f), x2, one));
  const V e = hn::Exp(d, hn::Neg(hn::Mul(k, inner)));
  const V s = hn::Div(one, hn::Add(one, e));
  // 1 - s as e·s: near s = 1 the subtraction loses the whole term (at x = 5
  // the derivative is 1 + 2e-6, and 1 - s rounds to 0 in fp32).
  const V slope = hn::Mul(k, hn::MulAdd(hn::Set(d, 3.0f * 0.044715f), x2, one));
  const V y = hn::MulAdd(hn::Mul(xc, hn::Mul(s, hn::Mul(e, s))), slope, s);
  return hn::IfThenElse(hn::Gt(x, lim), one,
                        hn::IfThenElse(hn::Lt(x, hn::Neg(lim)), hn::Zero(d),
                                       hn::IfThenElse(hn::Eq(x, x), y, x)));
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V Silu(D d, V x) {
  const V e = hn::Exp(d, hn::Min(hn::Neg(x), hn::Set(d, 88.0f)));
  const V y = hn::Div(x, hn::Add(hn::Set(d, 1.0f), e));
  return hn::IfThenElse(hn::Eq(x, x), y, x);
}

// silu'(x) = s·(1 + x·(1 - s)), s = 1/(1 + e), e = exp(-x), 1 - s as e·s;
// 1 for x > 30, 0 for x < -30 (|silu' - those| < 3e-12 there).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V SiluDerivative(D d, V x) {
  const V lim = hn::Set(d, 30.0f), one = hn::Set(d, 1.0f);
  const V xc = hn::Min(hn::Max(x, hn::Neg(lim)), lim);
  const V e = hn::Exp(d, hn::Neg(xc));
  const V s = hn::Div(one, hn::Add(one, e));
  const V y = hn::Mul(s, hn::MulAdd(xc, hn::Mul(e, s), one));
  return hn::IfThenElse(hn::Gt(x, lim), one,
                        hn::IfThenElse(hn::Lt(x, hn::Neg(lim)), hn::Zero(d),
                                       hn::IfThenElse(hn::Eq(x, x), y, x)));
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V Sigmoid(D d, V x) {
  const V one = hn::Set(d, 1.0f);
  const V e = hn::Exp(d, hn::Min(hn::Neg(x), hn::Set(d, 88.0f)));
  const V y = hn::Div(one, hn::Add(one, e));
  return hn::IfThenElse(hn::Eq(x, x), y, x);
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V Sqrt(D, V x) {
  return hn::Sqrt(x);
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V Pow(D d, V a, V b) {
  const V zero = hn::Zero(d), one = hn::Set(d, 1.0f);
  const V absA = hn::Abs(a);
  // exp's range: above 88.7 the result is inf, below -87 it is 0 (fp32's
  // subnormals are given up, as by Exp itself).
  const V t = hn::Mul(b, hn::Log(d, hn::Max(absA, hn::Set(d, 1e-38f))));
  const V mag = hn::IfThenElse(
      hn::Gt(t, hn::Set(d, 88.72f)), hn::Set(d, HUGE_VALF),
      hn::IfThenZeroElse(hn::Lt(t, hn::Set(d, -87.0f)), hn::Exp(d, hn::Min(hn::Max(t, hn::Set(d, -87.0f)), hn::Set(d, 88.72f)))));
  const auto integer = hn::Eq(hn::Round(b), b);
  const V half = hn::Mul(b, hn::Set(d, 0.5f));
  const auto odd = hn::AndNot(hn::Eq(hn::Round(half), half), integer);
  const auto negative = hn::Lt(a, zero);
  // a = 0: 0 for b > 0, inf for b < 0 (signed like a for odd b).
  const V atZero = hn::IfThenElse(hn::Gt(b, zero), zero, hn::Set(d, HUGE_VALF));
  V r = hn::IfThenElse(hn::Eq(absA, zero), atZero, mag);
  r = hn::IfThenElse(hn::And(hn::Lt(hn::CopySign(one, a), zero), odd), hn::Neg(r), r);
  r = hn::IfThenElse(hn::AndNot(integer, negative), hn::Set(d, NAN), r);
  r = hn::IfThenElse(hn::Or(hn::Eq(a, a), hn::Eq(b, zero)), r, a);  // NaN^b = NaN, but NaN^0 = 1
  return hn::IfThenElse(hn::Eq(b, zero), one, r);
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V Relu(D d, V x) {
  return hn::Max(x, hn::Zero(d));
}

// relu'(x) = x > 0 ? 1 : 0 (NaN: 0), as ElementwiseMath.h's reluDerivative.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ReluDerivative(D d, V x) {
  return hn::IfThenElseZero(hn::Gt(x, hn::Zero(d)), hn::Set(d, 1.0f));
}

}  // namespace HWY_NAMESPACE
}  // namespace transfuse::kernels
HWY_AFTER_NAMESPACE();

#endif  // TRANSFUSE_KERNELS_ERF_INL_H_ toggle guard
