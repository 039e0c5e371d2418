// The int8 block kernel with AMX-INT8 tiles (see Int8Kernels.h): a 32×32
// block as four 16×16 int32 tiles (tmm0-3), A as two 16×64 s8 tiles
// (tmm4-5: 16 rows, 64 k; packed by Int8Gemm as whole tiles, so each loads
// 1 KiB in a row), the two panels as 16×64 tiles of k-quads (tmm6-7: 16
// quads × 16 columns × 4), tdpbssd per 64 k.
#include "runtime/kernels/int8/Int8Kernels.h"

#include <immintrin.h>


namespace transfuse::kernels::int8 {

TRANSFUSE_INT8_AMX
void blockAmx(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
              int64_t kPadded, int64_t /*rows: always 32*/, int32_t* acc) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  // A comes in tiles (Int8Gemm packs it): for each group of 16 rows, its
  // 16×64 tiles one after another; `lda` is the distance between groups.
  for (int64_t k = 0; k < kPadded; k += 64) {
    // The B tiles of the step after next, from L2 into L1 (Int8Gemm keeps
    // the block's A in L1 and streams the panels).
    if (k + 128 < kPadded)
      for (int line = 0; line < 1024; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(panel0 + (k + 128) * 16 + line), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(panel1 + (k + 128) * 16 + line), _MM_HINT_T0);
      }
    _tile_loadd(4, a + k * 16, 64);
    _tile_loadd(5, a + lda + k * 16, 64);
    _tile_loadd(6, panel0 + k * 16, 64);
    _tile_loadd(7, panel1 + k * 16, 64);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  constexpr int64_t stride = kBlockCols * sizeof(int32_t);
  _tile_stored(0, acc, stride);
  _tile_stored(1, acc + kPanel, stride);
  _tile_stored(2, acc + 16 * kBlockCols, stride);
  _tile_stored(3, acc + 16 * kBlockCols + kPanel, stride);
}

}  // namespace transfuse::kernels::int8
