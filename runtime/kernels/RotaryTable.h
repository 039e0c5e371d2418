// The rotary tables of a product with a rotary epilogue (the fp32 GEMM's
// GemmEpilogue::invFreq, the int8 GEMM's Int8Epilogue::invFreq): cos and
// sin of position offset + t for t < positions, [positions, half], as
// math::rotaryCosSin forms them. Computed on the calling thread and kept
// for its next call with the same frequencies and positions (the Q/K
// projections of every layer of a step share them); workers read them
// through the returned reference while the call runs.
#ifndef TRANSFUSE_RUNTIME_KERNELS_ROTARYTABLE_H_
#define TRANSFUSE_RUNTIME_KERNELS_ROTARYTABLE_H_

#include "runtime/kernels/ElementwiseMath.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace transfuse::kernels {

struct RotaryTable {
  std::vector<float> freq, cos, sin;
  size_t offset = 0, positions = 0;
  bool valid = false;
};

inline const RotaryTable& rotaryTableFor(const float* invFreq, size_t half, size_t offset,
                                         size_t positions) {
  static thread_local RotaryTable table;
  if (table.valid && table.offset == offset && table.positions == positions &&
      table.freq.size() == half && std::equal(invFreq, invFreq + half, table.freq.begin()))
    return table;
  table.freq.assign(invFreq, invFreq + half);
  table.cos.resize(positions * half);
  table.sin.resize(positions * half);
  for (size_t t = 0; t < positions; ++t)
    for (size_t i = 0; i < half; ++i)
      math::rotaryCosSin(static_cast<float>(offset + t), invFreq[i], &table.cos[t * half + i],
                         &table.sin[t * half + i]);
  table.offset = offset;
  table.positions = positions;
  table.valid = true;
  return table;
}

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_ROTARYTABLE_H_
