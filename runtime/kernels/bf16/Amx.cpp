// The bf16 block kernel with AMX-BF16 tiles (see Bf16Kernels.h): a 32×32
// block as four 16×16 fp32 tiles (tmm0-3), A as two 16×32 bf16 tiles
// (tmm4-5: 16 rows, 32 k; Bf16Gemm lays A out as whole tiles, so each loads
// 1 KiB in a row), the two panels as 16×64-byte tiles of k-pairs (tmm6-7:
// 16 pairs × 16 columns × 2), tdpbf16ps per 32 k. Blocks of 16 rows or
// fewer (a decode step) take the first group of rows alone: two C tiles,
// each getting the same instructions as in a 32-row block (the same bits).
#include "runtime/kernels/bf16/Bf16Kernels.h"

#include <immintrin.h>

namespace transfuse::kernels::bf16 {

namespace {

// `Groups` groups of 16 rows (1 or 2) against the two panels.
template <int Groups>
TRANSFUSE_BF16_AMX
void tilesAmx(const uint16_t* a, int64_t lda, const uint16_t* panel0, const uint16_t* panel1,
              int64_t kLength, float* acc, int64_t ldAcc, bool accumulate) {
  const int64_t stride = ldAcc * static_cast<int64_t>(sizeof(float));
  // C tiles: tmm0-1 the first group's two panels, tmm2-3 the second's.
  if (accumulate) {
    _tile_loadd(0, acc, stride);
    _tile_loadd(1, acc + kPanel, stride);
    if constexpr (Groups == 2) {
      _tile_loadd(2, acc + 16 * ldAcc, stride);
      _tile_loadd(3, acc + 16 * ldAcc + kPanel, stride);
    }
  } else {
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (Groups == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
  }
  // For each group of 16 rows, its 16×32 tiles one after another (512
  // values each); `lda` is the distance between the two groups. A panel's
  // 32 k are 512 values too.
  for (int64_t k = 0; k < kLength; k += 32) {
    // The B tiles of the step after next, from L2 into L1 (the block's A
    // stays in L1 while the panels stream).
    if (k + 64 < kLength)
      for (int line = 0; line < 512; line += 32) {
        _mm_prefetch(reinterpret_cast<const char*>(panel0 + (k + 64) * 16 + line), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(panel1 + (k + 64) * 16 + line), _MM_HINT_T0);
      }
    _tile_loadd(4, a + k * 16, 64);
    _tile_loadd(6, panel0 + k * 16, 64);
    _tile_loadd(7, panel1 + k * 16, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (Groups == 2) {
      _tile_loadd(5, a + lda + k * 16, 64);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, acc, stride);
  _tile_stored(1, acc + kPanel, stride);
  if constexpr (Groups == 2) {
    _tile_stored(2, acc + 16 * ldAcc, stride);
    _tile_stored(3, acc + 16 * ldAcc + kPanel, stride);
  }
}

}  // namespace

TRANSFUSE_BF16_AMX
void blockAmx(const uint16_t* a, int64_t lda, const uint16_t* panel0, const uint16_t* panel1,
              int64_t kLength, int64_t rows, float* acc, int64_t ldAcc, bool accumulate) {
  if (rows <= 16) return tilesAmx<1>(a, lda, panel0, panel1, kLength, acc, ldAcc, accumulate);
  tilesAmx<2>(a, lda, panel0, panel1, kLength, acc, ldAcc, accumulate);
}

}  // namespace transfuse::kernels::bf16
