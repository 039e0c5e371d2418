// The activations of a GEMM's epilogue and of an activation's gradient: the
// one enum that the CPU and CUDA kernels, generated code, the config reader
// and export-kernel share. The compiler's #transfuse.activation attribute has
// the same cases in the same order and converts to it in one place
// (codegen/lowering/OpMath.cpp, which also names each one's formula in
// ElementwiseMath.h).
//
//   none       the identity
//   relu       max(x, 0)
//   gelu       x/2 · (1 + erf(x/√2))                    (exact)
//   gelu_tanh  x/2 · (1 + tanh(√(2/π)(x + 0.044715x³)))  (GPT-2's)
//   silu       x · sigmoid(x) = x / (1 + exp(-x))        (SwiGLU's gate)
//
// No dependency beyond the standard library: compilers, the runtime, CUDA
// code, generated code and exported kernels all include it.
#ifndef TRANSFUSE_RUNTIME_KERNELS_ACTIVATION_H_
#define TRANSFUSE_RUNTIME_KERNELS_ACTIVATION_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace transfuse::kernels {

enum class Activation : uint8_t { kNone, kRelu, kGelu, kGeluTanh, kSilu };
inline constexpr int kNumActivations = 5;

struct ActivationInfo {
  const char* name;        // "gelu_tanh": as configs, flags and the IR spell it
  const char* enumerator;  // "kGeluTanh": as generated code names Activation::kGeluTanh
};

inline const ActivationInfo& activationInfo(Activation a) {
  static const ActivationInfo table[kNumActivations] = {{"none", "kNone"},
                                                        {"relu", "kRelu"},
                                                        {"gelu", "kGelu"},
                                                        {"gelu_tanh", "kGeluTanh"},
                                                        {"silu", "kSilu"}};
  return table[static_cast<int>(a)];
}

inline const char* activationName(Activation a) { return activationInfo(a).name; }

// The activation `name` spells ("gelu_tanh"); none for another name.
inline std::optional<Activation> parseActivation(std::string_view name) {
  for (int i = 0; i < kNumActivations; ++i)
    if (name == activationName(static_cast<Activation>(i))) return static_cast<Activation>(i);
  return std::nullopt;
}

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_ACTIVATION_H_
