// The int8 block kernel with AVX512-VNNI's vpdpbusd (see Int8Kernels.h): A
// as u8 = qa + 128 broadcast four bytes at a time, times a panel's 16
// columns of s8 quads; Int8Gemm subtracts the compensation.
#include "runtime/kernels/int8/Int8Kernels.h"

#include <immintrin.h>

#include <cstring>

namespace transfuse::kernels::int8 {

void blockVnni(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
               int64_t kPadded, int32_t* acc) {
  constexpr int R = static_cast<int>(kRowsVnni);
  __m512i sum[R][2];
  for (int r = 0; r < R; ++r) sum[r][0] = sum[r][1] = _mm512_setzero_si512();
  for (int64_t q = 0; q < kPadded / 4; ++q) {
    const __m512i w0 = _mm512_loadu_si512(panel0 + q * 64);
    const __m512i w1 = _mm512_loadu_si512(panel1 + q * 64);
    for (int r = 0; r < R; ++r) {
      int32_t quad;
      std::memcpy(&quad, a + r * lda + q * 4, 4);
      const __m512i x = _mm512_set1_epi32(quad);
      sum[r][0] = _mm512_dpbusd_epi32(sum[r][0], x, w0);
      sum[r][1] = _mm512_dpbusd_epi32(sum[r][1], x, w1);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_si512(acc + r * kBlockCols, sum[r][0]);
    _mm512_storeu_si512(acc + r * kBlockCols + kPanel, sum[r][1]);
  }
}

}  // namespace transfuse::kernels::int8
