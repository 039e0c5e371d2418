// What the packed GEMMs' column pairs (GemmPairs.h) must give, from the
// plain product of the same operands (Int8Gemm and Bf16Gemm tests): the
// rotation of each head's columns i and i + headDim/2 by the row's position
// (as transfuse.rotary rounds it), or act(gate)·up.
#ifndef TRANSFUSE_TESTS_UNIT_KERNELS_PAIREDREFERENCE_H
#define TRANSFUSE_TESTS_UNIT_KERNELS_PAIREDREFERENCE_H

#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/ElementwiseMath.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace transfuse::kernels {

// headDim/2 inverse frequencies of base 10000.
inline std::vector<float> inverseFrequencies(int64_t headDim) {
  std::vector<float> f(static_cast<size_t>(headDim / 2));
  for (int64_t i = 0; i < headDim / 2; ++i) f[i] = std::pow(10000.0f, -2.0f * i / headDim);
  return f;
}

// Rotates `c` (m rows of n; its first `columns` columns heads of headDim)
// in place: row r at position offset + r % seqLen.
inline void rotateReference(std::vector<float>& c, int64_t m, int64_t n, int64_t columns,
                            int64_t headDim, const std::vector<float>& invFreq, int64_t seqLen,
                            int64_t offset) {
  const int64_t half = headDim / 2;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t h = 0; h < columns; h += headDim)
      for (int64_t i = 0; i < half; ++i) {
        float cs, sn;
        math::rotaryCosSin(static_cast<float>(offset + r % seqLen), invFreq[i], &cs, &sn);
        float* row = c.data() + r * n + h;
        const float x0 = row[i], x1 = row[i + half];
        const float ac = x0 * cs, bs = x1 * sn, bc = x1 * cs, as = x0 * sn;
        row[i] = ac - bs;
        row[i + half] = bc + as;
      }
}

// act(gate)·up from `plain` (m rows of 2·half: gate columns, then up).
inline std::vector<float> gateReference(const std::vector<float>& plain, int64_t m, int64_t half,
                                        Activation act) {
  std::vector<float> want(static_cast<size_t>(m * half));
  for (int64_t r = 0; r < m; ++r) {
    activate(act, plain.data() + r * 2 * half, want.data() + r * half, static_cast<size_t>(half));
    for (int64_t j = 0; j < half; ++j) want[r * half + j] *= plain[r * 2 * half + half + j];
  }
  return want;
}

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_TESTS_UNIT_KERNELS_PAIREDREFERENCE_H
