// Deterministic random initialization of parameters from a seed, matching the
// distributions of PyTorch's defaults (not its bit streams). Values come from
// Philox4x32-10 (Philox.h) with a counter derived from the tensor's index, so a
// tensor's values depend only on (seed, tensorIndex, kind, fans, element count),
// never on which other tensors were initialized or in what order.
#ifndef TRANSFUSE_RUNTIME_INIT_H
#define TRANSFUSE_RUNTIME_INIT_H

#include <cstdint>
#include <string_view>

#include "runtime/Tensor.h"

namespace transfuse::rt {

enum class InitKind {
  Zeros,
  Ones,
  XavierUniform,  // U(-b, b), b = sqrt(6 / (fan_in + fan_out))   (nn.init.xavier_uniform_)
  Normal002,      // N(0, 0.02^2)                                  (GPT-2 weights)
  UniformFanIn,   // U(-b, b), b = 1 / sqrt(fan_in), 0 if fan_in <= 0 (nn.Linear bias)
};

// Spellings: "zeros", "ones", "xavier_uniform", "normal_0.02", "uniform_fan_in".
bool parseInitKind(std::string_view name, InitKind* out);
const char* initKindName(InitKind kind);

// Fills an F32 tensor `t` (shape and byte size already set) in place.
// Random stream: key = {lo32(seed), hi32(seed) ^ 0x1D17A11Bu} (the xor keeps init
// numbers apart from dropout's, which keys by the bare seed);
// counter for block b = {lo32(b), hi32(b), lo32(tensorIndex), hi32(tensorIndex)}.
// Block b gives 4 words, used by elements 4b..4b+3: uniform kinds map word i%4 to
// [0,1) with 24 bits; Normal002 runs Box-Muller on words (0,1) and (2,3), element
// 4b+2p taking the cosine and 4b+2p+1 the sine output of pair p.
void initTensor(Tensor& t, InitKind kind, int64_t fanIn, int64_t fanOut, uint64_t seed,
                uint64_t tensorIndex);

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_INIT_H
