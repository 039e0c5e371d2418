// The int8 block kernel with AVX512-VNNI's vpdpbusd (see Int8Kernels.h): A
// as u8 = qa + 128 broadcast four bytes at a time, times a panel's 16
// columns of s8 quads; Int8Gemm subtracts the compensation.
#include "runtime/kernels/int8/Int8Kernels.h"

#include <immintrin.h>

#include <cstring>

namespace transfuse::kernels::int8 {

TRANSFUSE_INT8_AVX512
void quantizeRowAvx512(const float* x, int64_t k, float inverse, int8_t* q) {
  const __m512 scale = _mm512_set1_ps(inverse), hi = _mm512_set1_ps(127.0f),
               lo = _mm512_set1_ps(-127.0f);
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {
    __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + j), scale);
    v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + j), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(v)));
  }
  if (j < k) quantizeRowAvx2(x + j, k - j, inverse, q + j);
}

TRANSFUSE_INT8_AVX512
float maxAbsAvx512(const float* x, int64_t k) {
  // Four chains of vmaxps (one would wait on its latency).
  __m512 peak[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                    _mm512_setzero_ps()};
  int64_t j = 0;
  for (; j + 64 <= k; j += 64)
    for (int c = 0; c < 4; ++c)
      peak[c] = _mm512_max_ps(peak[c], _mm512_abs_ps(_mm512_loadu_ps(x + j + 16 * c)));
  for (; j + 16 <= k; j += 16)
    peak[0] = _mm512_max_ps(peak[0], _mm512_abs_ps(_mm512_loadu_ps(x + j)));
  const float body = _mm512_reduce_max_ps(
      _mm512_max_ps(_mm512_max_ps(peak[0], peak[1]), _mm512_max_ps(peak[2], peak[3])));
  const float tail = j < k ? maxAbsAvx2(x + j, k - j) : 0.0f;
  return body > tail ? body : tail;
}

TRANSFUSE_INT8_AVX512
void epilogueAvx512(const int32_t* acc, int64_t lda, const int32_t* comp, const float* sa,
                    int64_t rows, const float* sw, const float* bias, int64_t n, float* out,
                    int64_t ldo) {
  if (n == 32) {  // a whole block: its column values loaded once (1-3% of a 1024³ AMX call)
    const __m512 sw0 = _mm512_loadu_ps(sw), sw1 = _mm512_loadu_ps(sw + 16);
    const __m512i c0 = comp ? _mm512_loadu_si512(comp) : _mm512_setzero_si512();
    const __m512i c1 = comp ? _mm512_loadu_si512(comp + 16) : _mm512_setzero_si512();
    const __m512 b0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    const __m512 b1 = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
    for (int64_t r = 0; r < rows; ++r) {
      const __m512 row = _mm512_set1_ps(sa[r]);
      const int32_t* sums = acc + r * lda;
      __m512 v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_loadu_si512(sums), c0)),
                                _mm512_mul_ps(row, sw0));
      __m512 v1 = _mm512_mul_ps(
          _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_loadu_si512(sums + 16), c1)),
          _mm512_mul_ps(row, sw1));
      if (bias) {
        v0 = _mm512_add_ps(v0, b0);
        v1 = _mm512_add_ps(v1, b1);
      }
      _mm512_storeu_ps(out + r * ldo, v0);
      _mm512_storeu_ps(out + r * ldo + 16, v1);
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* sums = acc + r * lda;
    float* o = out + r * ldo;
    const __m512 row = _mm512_set1_ps(sa[r]);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
      __m512i sum = _mm512_loadu_si512(sums + j);
      if (comp) sum = _mm512_sub_epi32(sum, _mm512_loadu_si512(comp + j));
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(row, _mm512_loadu_ps(sw + j)));
      if (bias) v = _mm512_add_ps(v, _mm512_loadu_ps(bias + j));
      _mm512_storeu_ps(o + j, v);
    }
    if (j < n)
      epilogueAvx2(sums + j, lda, comp ? comp + j : nullptr, sa + r, 1, sw + j,
                   bias ? bias + j : nullptr, n - j, o + j, ldo);
  }
}

namespace {

// R rows against the two panels. One row keeps two sums per panel (even
// and odd k-quads, added at the end: the same int32 sums) so that two
// chains of vpdpbusd hide its latency.
template <int R>
TRANSFUSE_INT8_AVX512
void rowsVnni(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
              int64_t kPadded, int32_t* acc) {
  constexpr int S = R == 1 ? 2 : 1;  // sums per row and panel
  __m512i sum[R][2][S];
  for (int r = 0; r < R; ++r)
    for (int s = 0; s < S; ++s) sum[r][0][s] = sum[r][1][s] = _mm512_setzero_si512();
  for (int64_t q = 0; q < kPadded / 4; q += S) {  // kPadded / 4 is a multiple of 16
    for (int s = 0; s < S; ++s) {
      const __m512i w0 = _mm512_loadu_si512(panel0 + (q + s) * 64);
      const __m512i w1 = _mm512_loadu_si512(panel1 + (q + s) * 64);
      for (int r = 0; r < R; ++r) {
        int32_t quad;
        std::memcpy(&quad, a + r * lda + (q + s) * 4, 4);
        const __m512i x = _mm512_set1_epi32(quad);
        sum[r][0][s] = _mm512_dpbusd_epi32(sum[r][0][s], x, w0);
        sum[r][1][s] = _mm512_dpbusd_epi32(sum[r][1][s], x, w1);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h) {
      __m512i total = sum[r][h][0];
      for (int s = 1; s < S; ++s) total = _mm512_add_epi32(total, sum[r][h][s]);
      _mm512_storeu_si512(acc + r * kBlockCols + h * kPanel, total);
    }
}

}  // namespace

TRANSFUSE_INT8_AVX512
void blockVnni(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
               int64_t kPadded, int64_t rows, int32_t* acc) {
  static_assert(kRowsVnni == 8);
  if (rows <= 1) return rowsVnni<1>(a, lda, panel0, panel1, kPadded, acc);
  if (rows <= 2) return rowsVnni<2>(a, lda, panel0, panel1, kPadded, acc);
  if (rows <= 4) return rowsVnni<4>(a, lda, panel0, panel1, kPadded, acc);
  rowsVnni<8>(a, lda, panel0, panel1, kPadded, acc);
}

}  // namespace transfuse::kernels::int8
