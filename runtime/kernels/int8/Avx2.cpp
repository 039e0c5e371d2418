// The int8 block kernel with AVX2's vpmaddubsw (see Int8Kernels.h): |qa| as
// u8 times qw carrying qa's sign (vpsignb), pairs of products (at most
// 32,258: no int16 saturation) summed to int32 by vpmaddwd.
#include "runtime/kernels/int8/Int8Kernels.h"

#include <immintrin.h>

#include <cstring>

namespace transfuse::kernels::int8 {

namespace {

// Rows [0, kRowsAvx2) of A against one panel (16 columns: two vectors of 8).
void panelAvx2(const uint8_t* a, int64_t lda, const int8_t* panel, int64_t kPadded, int32_t* acc) {
  constexpr int R = static_cast<int>(kRowsAvx2);
  __m256i sum[R][2];
  for (int r = 0; r < R; ++r) sum[r][0] = sum[r][1] = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t q = 0; q < kPadded / 4; ++q) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + q * 64));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + q * 64 + 32));
    for (int r = 0; r < R; ++r) {
      int32_t quad;
      std::memcpy(&quad, a + r * lda + q * 4, 4);
      const __m256i x = _mm256_set1_epi32(quad);
      const __m256i ax = _mm256_sign_epi8(x, x);  // |qa| (qa > -128)
      const __m256i p0 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(w0, x));
      const __m256i p1 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(w1, x));
      sum[r][0] = _mm256_add_epi32(sum[r][0], _mm256_madd_epi16(p0, ones));
      sum[r][1] = _mm256_add_epi32(sum[r][1], _mm256_madd_epi16(p1, ones));
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + r * kBlockCols), sum[r][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + r * kBlockCols + 8), sum[r][1]);
  }
}

}  // namespace

void blockAvx2(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
               int64_t kPadded, int32_t* acc) {
  panelAvx2(a, lda, panel0, kPadded, acc);
  panelAvx2(a, lda, panel1, kPadded, acc + kPanel);
}

}  // namespace transfuse::kernels::int8
