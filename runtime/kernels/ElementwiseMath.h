// The math of every elementwise op of the transfuse dialect, written once.
//
// Each op is one scalar template below (the definition): the reference
// interpreter instantiates it in double, generated scalar code and the
// runtime's scalar loops in float. Its vectorized form is the Highway
// function the table names (Erf-inl.h, contrib/math), an evaluation of the
// same formula tested against this one (tests/unit/kernels). Code
// generators print the names from the table; they never restate a formula.
//
//   add(a, b) = a + b    sub(a, b) = a - b    mul(a, b) = a · b    div(a, b) = a / b
//   relu(x)      = max(x, 0)                  (NaN stays NaN)
//   exp(x), tanh(x)
//   gelu(x)      = x/2 · (1 + erf(x/√2))                      (exact GELU)
//                = x/2 · erfc(-x/√2), the form evaluated: no cancellation of
//                  1 + erf for x << 0, so the negative tail keeps its
//                  relative accuracy
//   gelu_tanh(x) = x/2 · (1 + tanh(√(2/π)·(x + 0.044715·x³)))  (GPT-2's)
//                = x / (1 + exp(-2√(2/π)·(x + 0.044715·x³))), the form
//                  evaluated, for the same reason
//   silu(x)      = x · sigmoid(x) = x / (1 + exp(-x))
//   sigmoid(x)   = 1 / (1 + exp(-x))
//   sqrt(x), erf(x)
//   pow(a, b)    = a^b as std::pow: NaN for a < 0 and b not an integer,
//                  1 for b = 0 (even a = NaN)
//
// No Highway or MLIR dependency: compilers, the runtime and generated code
// all include it.
#ifndef TRANSFUSE_RUNTIME_KERNELS_ELEMENTWISEMATH_H_
#define TRANSFUSE_RUNTIME_KERNELS_ELEMENTWISEMATH_H_

#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

// The formulas are host and device functions: CUDA code (runtime/kernels/
// cuda, generated regions) evaluates the same templates.
#include "runtime/HostDevice.h"
#include "runtime/kernels/Activation.h"

namespace transfuse::kernels::math {

// X(Kind, arity, scalar template, Highway function, Highway function takes
// the descriptor `d` first). Every list of elementwise ops expands this.
#define TRANSFUSE_ELEMENTWISE_OPS(X)                 \
  X(kAdd, 2, add, hn::Add, false)                    \
  X(kSub, 2, sub, hn::Sub, false)                    \
  X(kMul, 2, mul, hn::Mul, false)                    \
  X(kDiv, 2, div, hn::Div, false)                    \
  X(kRelu, 1, relu, tk::Relu, true)                  \
  X(kExp, 1, exp, hn::Exp, true)                     \
  X(kTanh, 1, tanh, hn::Tanh, true)                  \
  X(kGelu, 1, gelu, tk::GeluErf, true)               \
  X(kGeluTanh, 1, geluTanh, tk::GeluTanh, true)      \
  X(kSilu, 1, silu, tk::Silu, true)                  \
  X(kSigmoid, 1, sigmoid, tk::Sigmoid, true)         \
  X(kSqrt, 1, sqrt, tk::Sqrt, true)                  \
  X(kErf, 1, erf, tk::Erf, true)                     \
  X(kPow, 2, pow, tk::Pow, true)

// The activations' derivatives, for their gradients: X(Kind, scalar
// template, Highway function taking `d` first).
#define TRANSFUSE_DERIVATIVES(X)                               \
  X(kRelu, reluDerivative, tk::ReluDerivative)                 \
  X(kGelu, geluDerivative, tk::GeluErfDerivative)              \
  X(kGeluTanh, geluTanhDerivative, tk::GeluTanhDerivative)     \
  X(kSilu, siluDerivative, tk::SiluDerivative)

enum class Kind : uint8_t {
#define TRANSFUSE_KIND(kind, arity, scalar, vector, tag) kind,
  TRANSFUSE_ELEMENTWISE_OPS(TRANSFUSE_KIND)
#undef TRANSFUSE_KIND
};
#define TRANSFUSE_COUNT(kind, arity, scalar, vector, tag) +1
inline constexpr int kNumKinds = 0 TRANSFUSE_ELEMENTWISE_OPS(TRANSFUSE_COUNT);
#undef TRANSFUSE_COUNT

template <class T> TRANSFUSE_HD T add(T a, T b) { return a + b; }
template <class T> TRANSFUSE_HD T sub(T a, T b) { return a - b; }
template <class T> TRANSFUSE_HD T mul(T a, T b) { return a * b; }
template <class T> TRANSFUSE_HD T div(T a, T b) { return a / b; }
template <class T> TRANSFUSE_HD T relu(T x) { return x < T(0) ? T(0) : x; }
template <class T> TRANSFUSE_HD T exp(T x) { return std::exp(x); }
template <class T> TRANSFUSE_HD T tanh(T x) { return std::tanh(x); }
template <class T> TRANSFUSE_HD T gelu(T x) { return T(0.5) * x * std::erfc(x * T(-0.70710678118654752440)); }
template <class T> TRANSFUSE_HD T geluTanh(T x) {
  return x / (T(1) + std::exp(T(-1.5957691216057307118) * (x + T(0.044715) * x * x * x)));
}
template <class T> TRANSFUSE_HD T silu(T x) { return x / (T(1) + std::exp(-x)); }
template <class T> TRANSFUSE_HD T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }
template <class T> TRANSFUSE_HD T sqrt(T x) { return std::sqrt(x); }
template <class T> TRANSFUSE_HD T erf(T x) { return std::erf(x); }
template <class T> TRANSFUSE_HD T pow(T a, T b) { return std::pow(a, b); }

// Derivatives of the activations, for their gradients (activation_grad):
//   relu'(x)      = x > 0 ? 1 : 0
//   gelu'(x)      = Φ(x) + x·φ(x), Φ(x) = erfc(-x/√2)/2, φ(x) = exp(-x²/2)/√(2π)
//   gelu_tanh'(x) = s + x·s·(1 - s)·2√(2/π)·(1 + 3·0.044715·x²) with
//                   s = 1/(1 + exp(-2√(2/π)·(x + 0.044715·x³))), as
//                   gelu_tanh(x) = x·s
//   silu'(x)      = s · (1 + x·(1 - s)), s = sigmoid(x) = 1/(1 + exp(-x))
template <class T> TRANSFUSE_HD T reluDerivative(T x) { return x > T(0) ? T(1) : T(0); }
template <class T> TRANSFUSE_HD T geluDerivative(T x) {
  return T(0.5) * std::erfc(x * T(-0.70710678118654752440)) +
         x * T(0.39894228040143267794) * std::exp(T(-0.5) * x * x);
}
template <class T> TRANSFUSE_HD T geluTanhDerivative(T x) {
  const T k = T(1.5957691216057307118);  // 2√(2/π)
  const T s = T(1) / (T(1) + std::exp(-k * (x + T(0.044715) * x * x * x)));
  return s + x * s * (T(1) - s) * k * (T(1) + T(3 * 0.044715) * x * x);
}
template <class T> TRANSFUSE_HD T siluDerivative(T x) {
  // sigmoid(|x|) and sigmoid(-|x|) = 1 - sigmoid(|x|) from exp(-|x|) <= 1:
  // no overflow for x << 0, no cancellation of 1 - s for x >> 0.
  const T e = std::exp(-std::fabs(x));
  const T p = T(1) / (T(1) + e), q = e * p;
  const bool positive = x >= T(0);
  return (positive ? p : q) * (T(1) + x * (positive ? q : p));
}

// The op `kind` on a (and b, for binary ops).
template <class T> TRANSFUSE_HD T apply(Kind kind, T a, T b = T(0)) {
  switch (kind) {
#define TRANSFUSE_APPLY(kind, arity, scalar, vector, tag) \
  case Kind::kind:                                        \
    if constexpr (arity == 2) return scalar(a, b);        \
    else return scalar(a);
    TRANSFUSE_ELEMENTWISE_OPS(TRANSFUSE_APPLY)
#undef TRANSFUSE_APPLY
  }
  return a;
}

// f'(x) of the activation `kind` (TRANSFUSE_DERIVATIVES); x for another kind.
template <class T> TRANSFUSE_HD T derivative(Kind kind, T x) {
  switch (kind) {
#define TRANSFUSE_DERIVATIVE(kind, scalar, vector) \
  case Kind::kind:                                 \
    return scalar(x);
    TRANSFUSE_DERIVATIVES(TRANSFUSE_DERIVATIVE)
#undef TRANSFUSE_DERIVATIVE
    default:
      return x;
  }
}

// How generated code names the op.
struct KindInfo {
  const char* enumerator;  // "kGelu": Kind::kGelu
  int arity;
  const char* scalar;      // "gelu": transfuse::kernels::math::gelu
  const char* vector;      // "tk::GeluErf", with hn = hwy::HWY_NAMESPACE and
                           // tk = transfuse::kernels::HWY_NAMESPACE
  bool vectorTakesTag;     // called as vector(d, x) rather than vector(x, y)
};

inline const KindInfo& info(Kind kind) {
  static const KindInfo table[] = {
#define TRANSFUSE_INFO(kind, arity, scalar, vector, tag) {#kind, arity, #scalar, #vector, tag},
      TRANSFUSE_ELEMENTWISE_OPS(TRANSFUSE_INFO)
#undef TRANSFUSE_INFO
  };
  return table[static_cast<int>(kind)];
}

// The scalar template of the activation `kind`'s derivative as generated
// code names it ("geluDerivative"); nullptr for a kind without one.
inline const char* derivativeName(Kind kind) {
  switch (kind) {
#define TRANSFUSE_DERIVATIVE_NAME(kind, scalar, vector) \
  case Kind::kind:                                      \
    return #scalar;
    TRANSFUSE_DERIVATIVES(TRANSFUSE_DERIVATIVE_NAME)
#undef TRANSFUSE_DERIVATIVE_NAME
    default:
      return nullptr;
  }
}

// The kind whose enumerator is `name` ("kGelu"), as printed into the kernel
// IR's `kind` attributes; none for another name.
inline std::optional<Kind> kindNamed(std::string_view name) {
  for (int i = 0; i < kNumKinds; ++i)
    if (name == info(static_cast<Kind>(i)).enumerator) return static_cast<Kind>(i);
  return std::nullopt;
}

// An activation's kind (its function, and its derivative for the
// gradient); none for kNone. The compiler's activations convert to
// kernels::Activation first (codegen/lowering/OpMath.cpp).
inline std::optional<Kind> activationKind(Activation a) {
  switch (a) {
    case Activation::kRelu: return Kind::kRelu;
    case Activation::kGelu: return Kind::kGelu;
    case Activation::kGeluTanh: return Kind::kGeluTanh;
    case Activation::kSilu: return Kind::kSilu;
    case Activation::kNone: break;
  }
  return std::nullopt;
}

// The rotary embedding's cos θ and sin θ (transfuse.rotary) at `position`
// for one inverse frequency: θ = fp32(position·invFreq), rounded to float as
// Hugging Face forms it, then cos and sin in double, rounded once. The
// rotary ops and the GEMMs' rotary epilogues (CPU and CUDA) share it.
TRANSFUSE_HD inline void rotaryCosSin(float position, float invFreq, float* cosine, float* sine) {
  const float theta = position * invFreq;
  const double angle = theta;
  *cosine = static_cast<float>(cos(angle));
  *sine = static_cast<float>(sin(angle));
}

}  // namespace transfuse::kernels::math

#endif  // TRANSFUSE_RUNTIME_KERNELS_ELEMENTWISEMATH_H_
