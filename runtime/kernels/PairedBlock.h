// The column pairs' epilogue of the packed int8 and bf16 GEMMs (Int8Gemm.h,
// Bf16Gemm.h), a row of a 32-column block at a time: the block's two
// panels hold a pair's two sets of n0 <= 16 columns, x[t] and x[16 + t];
// the bias is added as the fp32 GEMM's paired epilogues add it, then
//   rotary  C[c0 + t] = x0·cos − x1·sin, C[c1 + t] = x1·cos + x0·sin, at
//           the row's position (each product, then the sum, as
//           transfuse.rotary rounds them; tables from RotaryTable.h);
//   gated   C[c0 + t] = act(gate)·up into C's N/2 columns.
#ifndef TRANSFUSE_RUNTIME_KERNELS_PAIREDBLOCK_H
#define TRANSFUSE_RUNTIME_KERNELS_PAIREDBLOCK_H

#include "runtime/kernels/Activation.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/GemmPairs.h"
#include "runtime/kernels/RotaryTable.h"

#include <algorithm>
#include <cstdint>

namespace transfuse::kernels {

class PairedBlock {
public:
  // For a product of m rows whose row i is at position positionOffset +
  // i % seqLen (rotary; invFreq holds headDim/2 inverse frequencies).
  PairedBlock(const GemmPairs& pairs, Activation activation, const float* invFreq,
              int64_t seqLen, int64_t positionOffset, int64_t m)
      : pairs_(pairs), activation_(activation), half_(static_cast<int64_t>(pairs.headDim / 2)),
        seqLen_(std::max<int64_t>(seqLen, 1)) {
    if (pairs.kind != GemmPairs::Kind::kRotary) return;
    const RotaryTable& t = rotaryTableFor(invFreq, static_cast<size_t>(half_),
                                          static_cast<size_t>(positionOffset),
                                          static_cast<size_t>(std::min(m, seqLen_)));
    cos_ = t.cos.data();
    sin_ = t.sin.data();
  }

  // Row `row` of the product: x (32 values, modified) into C's row crow.
  void combine(float* x, const float* bias, int64_t row, int64_t c0, int64_t c1, int64_t n0,
               float* crow) const {
    constexpr int64_t kPanel = 16;
    if (bias)
      for (int64_t t = 0; t < n0; ++t) {
        x[t] += bias[c0 + t];
        x[kPanel + t] += bias[c1 + t];
      }
    if (pairs_.kind == GemmPairs::Kind::kRotary) {
      const int64_t at = (row % seqLen_) * half_ + c0 % (2 * half_);
      for (int64_t t = 0; t < n0; ++t) {
        const float cs = cos_[at + t], sn = sin_[at + t], u = x[t], v = x[kPanel + t];
        const float uc = u * cs, vs = v * sn, vc = v * cs, us = u * sn;
        crow[c0 + t] = uc - vs;
        crow[c1 + t] = vc + us;
      }
      return;
    }
    activate(activation_, x, x, static_cast<size_t>(n0));
    for (int64_t t = 0; t < n0; ++t) crow[c0 + t] = x[t] * x[kPanel + t];
  }

private:
  GemmPairs pairs_;
  Activation activation_;
  int64_t half_, seqLen_;
  const float *cos_ = nullptr, *sin_ = nullptr;
};

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_PAIREDBLOCK_H
