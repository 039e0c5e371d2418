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
#include <cmath>
#include <cstdint>

#include "runtime/HostDevice.h"

namespace transfuse::rt {

// The ten rounds on c (the counter, replaced by the output) under key (k0,
// k1); a host and device function (CUDA kernels draw the same numbers).
TRANSFUSE_HD inline void philoxRounds(uint32_t c[4], uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    const uint32_t c1 = c[1], c3 = c[3];
    c[0] = hi1 ^ c1 ^ k0;
    c[1] = lo1;
    c[2] = hi0 ^ c3 ^ k1;
    c[3] = lo0;
  }
}

inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter,
                                             std::array<uint32_t, 2> key) {
  philoxRounds(counter.data(), key[0], key[1]);
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
// The four words of a block into w (host and device).
TRANSFUSE_HD inline void philoxBlockWords(uint64_t seed, uint64_t step, uint64_t stream,
                                          uint64_t block, uint32_t w[4]) {
  w[0] = static_cast<uint32_t>(block);
  w[1] = static_cast<uint32_t>(block >> 32);
  w[2] = static_cast<uint32_t>(stream);
  w[3] = static_cast<uint32_t>(step);
  philoxRounds(w, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

inline std::array<uint32_t, 4> philoxBlock(uint64_t seed, uint64_t step, uint64_t stream,
                                           uint64_t block) {
  std::array<uint32_t, 4> w;
  philoxBlockWords(seed, step, stream, block, w.data());
  return w;
}

inline float philoxUniform(uint64_t seed, uint64_t step, uint64_t stream, uint64_t index) {
  return philoxWordToUniform(philoxBlock(seed, step, stream, index >> 2)[index & 3]);
}

// Inverted dropout's two constants for a rate in [0, 1): an element is kept
// when word >> 8 >= dropoutThreshold(rate) (philoxUniform = k·2^-24 >= rate
// <=> k >= ceil(rate·2^24), k an integer), and a kept element is scaled by
// dropoutKeepScale(rate) = float(1 / (1 - rate)). The CPU and CUDA kernels
// both use these.
inline uint32_t dropoutThreshold(double rate) {
  return static_cast<uint32_t>(std::ceil(rate * 16777216.0));
}
inline float dropoutKeepScale(double rate) { return static_cast<float>(1.0 / (1.0 - rate)); }
// Whether the element whose generator word is `word` is kept (host and device).
TRANSFUSE_HD inline bool dropoutKept(uint32_t word, uint32_t threshold) {
  return (word >> 8) >= threshold;
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
