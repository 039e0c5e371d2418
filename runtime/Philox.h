// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11): a counter-based generator. Output = bijection(counter) under a key, so any
// element's random number is computed directly from (key, counter) with no state;
// every backend, fused or unfused path, and backward (regenerating a dropout mask)
// draws identical numbers. Header-only so generated code and kernels can inline it.
//
// One round on counter (c0, c1, c2, c3) with key (k0, k1):
//   (hi0, lo0) = M0 * c0,  (hi1, lo1) = M1 * c2      (32x32 -> 64-bit products)
//   counter'   = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
// and between rounds the key is bumped by the Weyl constants (W0, W1). Ten rounds.
#ifndef TRANSFUSE_RUNTIME_PHILOX_H
#define TRANSFUSE_RUNTIME_PHILOX_H

#include <array>
#include <cstdint>

namespace transfuse::rt {

inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter,
                                             std::array<uint32_t, 2> key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    uint64_t p0 = static_cast<uint64_t>(kM0) * counter[0];
    uint64_t p1 = static_cast<uint64_t>(kM1) * counter[2];
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    counter = {hi1 ^ counter[1] ^ key[0], lo1, hi0 ^ counter[3] ^ key[1], lo0};
  }
  return counter;
}

// Maps the top 24 bits of a 32-bit word to a float in [0, 1): k * 2^-24, exact.
inline float philoxWordToUniform(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

// The random number for one element, in [0, 1), from 24 bits; one
// generator call serves four consecutive elements (block = index / 4):
//   key     = {low 32 bits of seed, high 32 bits of seed}
//   counter = {low 32 bits of block, high 32 bits of block,
//              low 32 bits of stream, low 32 bits of step}
//   result  = philoxWordToUniform(word index % 4 of philox4x32_10(counter, key))
// `stream` identifies the op (e.g. one dropout site), `step` the training step,
// `index` the element's flat row-major index. Dropout keeps an element when
// philoxUniform(seed, step, stream, index) >= rate (so P(keep) = 1 - rate).
// Only the low 32 bits of stream and step are used.
inline std::array<uint32_t, 4> philoxBlock(uint64_t seed, uint64_t step, uint64_t stream,
                                           uint64_t block) {
  return philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                        static_cast<uint32_t>(stream), static_cast<uint32_t>(step)},
                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

inline float philoxUniform(uint64_t seed, uint64_t step, uint64_t stream, uint64_t index) {
  return philoxWordToUniform(philoxBlock(seed, step, stream, index >> 2)[index & 3]);
}

// out[i] = philoxUniform(seed, step, stream, first + i) for i < n, one
// generator call per four elements (what dropout loops use).
inline void philoxUniforms(uint64_t seed, uint64_t step, uint64_t stream, uint64_t first,
                           uint64_t n, float* out) {
  for (uint64_t i = 0; i < n;) {
    const uint64_t index = first + i;
    const std::array<uint32_t, 4> w = philoxBlock(seed, step, stream, index >> 2);
    for (uint64_t k = index & 3; k < 4 && i < n; ++k, ++i) out[i] = philoxWordToUniform(w[k]);
  }
}

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_PHILOX_H
