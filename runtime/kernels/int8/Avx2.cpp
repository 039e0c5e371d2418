// The int8 block kernel with AVX2's vpmaddubsw (see Int8Kernels.h): |qa| as
// u8 times qw carrying qa's sign (vpsignb), pairs of products (at most
// 32,258: no int16 saturation) summed to int32 by vpmaddwd.
#include "runtime/kernels/int8/Int8Kernels.h"

#include <immintrin.h>

#include <cstring>

namespace transfuse::kernels::int8 {

namespace {

// Rows [0, R) of A against one panel (16 columns: two vectors of 8).
template <int R>
TRANSFUSE_INT8_AVX2
void panelAvx2(const uint8_t* a, int64_t lda, const int8_t* panel, int64_t kPadded, int32_t* acc) {
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

TRANSFUSE_INT8_AVX2
void quantizeRowAvx2(const float* x, int64_t k, float inverse, int8_t* q) {
  const __m256 scale = _mm256_set1_ps(inverse), hi = _mm256_set1_ps(127.0f),
               lo = _mm256_set1_ps(-127.0f);
  int64_t j = 0;
  for (; j + 8 <= k; j += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j), scale);
    v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
    const __m256i i32 = _mm256_cvtps_epi32(v);
    const __m128i i16 = _mm_packs_epi32(_mm256_castsi256_si128(i32),
                                        _mm256_extracti128_si256(i32, 1));
    const __m128i i8 = _mm_packs_epi16(i16, i16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + j), i8);
  }
  for (; j < k; ++j) {
    float v = __builtin_nearbyintf(x[j] * inverse);
    v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
    q[j] = static_cast<int8_t>(v);
  }
}

TRANSFUSE_INT8_AVX2
float maxAbsAvx2(const float* x, int64_t k) {
  // Four chains of vmaxps (one would wait on its latency).
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 peak[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                    _mm256_setzero_ps()};
  int64_t j = 0;
  for (; j + 32 <= k; j += 32)
    for (int c = 0; c < 4; ++c)
      peak[c] = _mm256_max_ps(peak[c], _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j + 8 * c)));
  for (; j + 8 <= k; j += 8)
    peak[0] = _mm256_max_ps(peak[0], _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(_mm256_max_ps(peak[0], peak[1]),
                                       _mm256_max_ps(peak[2], peak[3])));
  float m = 0.0f;
  for (float v : lanes) m = v > m ? v : m;
  for (; j < k; ++j) {
    const float v = __builtin_fabsf(x[j]);
    m = v > m ? v : m;
  }
  return m;
}

TRANSFUSE_INT8_AVX2
void epilogueAvx2(const int32_t* acc, int64_t lda, const int32_t* comp, const float* sa,
                  int64_t rows, const float* sw, const float* bias, int64_t n, float* out,
                  int64_t ldo) {
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* sums = acc + r * lda;
    float* o = out + r * ldo;
    const __m256 row = _mm256_set1_ps(sa[r]);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      __m256i sum = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + j));
      if (comp)
        sum = _mm256_sub_epi32(sum, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(comp + j)));
      __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(row, _mm256_loadu_ps(sw + j)));
      if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + j));
      _mm256_storeu_ps(o + j, v);
    }
    for (; j < n; ++j) {
      float v = static_cast<float>(sums[j] - (comp ? comp[j] : 0)) * (sa[r] * sw[j]);
      if (bias) v += bias[j];
      o[j] = v;
    }
  }
}

TRANSFUSE_INT8_AVX2
void blockAvx2(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
               int64_t kPadded, int64_t rows, int32_t* acc) {
  static_assert(kRowsAvx2 == 4);
  auto both = [&](auto panel) {
    panel(a, lda, panel0, kPadded, acc);
    panel(a, lda, panel1, kPadded, acc + kPanel);
  };
  if (rows <= 1) return both(panelAvx2<1>);
  if (rows <= 2) return both(panelAvx2<2>);
  both(panelAvx2<4>);
}

}  // namespace transfuse::kernels::int8
