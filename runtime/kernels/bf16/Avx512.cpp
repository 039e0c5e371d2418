// The bf16 block kernel with AVX512-BF16's vdpbf16ps (see Bf16Kernels.h): a
// row's k-pair broadcast, times a panel's 16 columns of pairs, into 16 fp32
// sums per instruction; and the row rounding in AVX-512.
#include "runtime/kernels/bf16/Bf16Kernels.h"

#include <immintrin.h>

#include <cstring>

namespace transfuse::kernels::bf16 {

namespace {

// Each lane of v rounded to bf16, in the low half of its 32-bit lane: bits
// + 0x7fff + (bit 16), then the high half; a NaN's high half with the
// quiet bit set. (Not vcvtneps2bf16: it flushes denormals.)
TRANSFUSE_BF16_AVX512
inline __m512i roundLanes(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x0040));
}

// The first n (<= 16) lanes.
inline __mmask16 firstLanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// Rows k0 and k0 + 1 of B (those below k), the columns `cols` from
// `first`, rounded: 16 lanes of (even | odd << 16), a packed pair row.
TRANSFUSE_BF16_AVX512
inline __m512i pairRow(const float* b, int64_t ldb, int64_t k0, int64_t k, int64_t first,
                       __mmask16 cols) {
  __m512i lanes = _mm512_setzero_si512();
  if (k0 < k) lanes = roundLanes(_mm512_maskz_loadu_ps(cols, b + k0 * ldb + first));
  if (k0 + 1 < k)
    lanes = _mm512_or_si512(
        lanes,
        _mm512_slli_epi32(roundLanes(_mm512_maskz_loadu_ps(cols, b + (k0 + 1) * ldb + first)), 16));
  return lanes;
}

}  // namespace

TRANSFUSE_BF16_AVX512
void roundRowAvx512(const float* x, int64_t k, uint16_t* q) {
  int64_t j = 0;
  for (; j + 16 <= k; j += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + j),
                        _mm512_cvtepi32_epi16(roundLanes(_mm512_loadu_ps(x + j))));
  if (j < k) roundRowAvx2(x + j, k - j, q + j);
}

TRANSFUSE_BF16_AVX512
void packPanelAvx512(const float* b, int64_t ldb, bool transB, int64_t first, int64_t count,
                     int64_t k, int64_t kp, uint16_t* panel) {
  if (!transB) {
    // Pair row p: rows 2p and 2p + 1 of B, 16 columns each, side by side.
    const __mmask16 cols = firstLanes(count);
    for (int64_t p = 0; p < kp / 2; ++p)
      _mm512_storeu_si512(panel + p * 32, pairRow(b, ldb, 2 * p, k, first, cols));
    return;
  }
  // Column j's k are a row of b: 32 of them rounded are its 16 pairs; 16
  // columns' pairs, transposed as 32-bit lanes, are 16 pair rows.
  alignas(64) uint32_t pairs[16][16];
  for (int64_t p0 = 0; p0 < kp / 2; p0 += 16) {
    const int64_t k0 = 2 * p0;
    const __mmask16 m0 = firstLanes(k - k0), m1 = firstLanes(k - k0 - 16);
    for (int64_t c = 0; c < 16; ++c) {
      __m512i row = _mm512_setzero_si512();
      if (c < count && k0 < k) {  // (no pointer past the row: k may be 0, b null)
        const float* src = b + (first + c) * ldb + k0;
        const __m256i lo = _mm512_cvtepi32_epi16(roundLanes(_mm512_maskz_loadu_ps(m0, src)));
        const __m256i hi =
            k - k0 > 16 ? _mm512_cvtepi32_epi16(roundLanes(_mm512_maskz_loadu_ps(m1, src + 16)))
                        : _mm256_setzero_si256();
        row = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
      }
      _mm512_store_si512(pairs[c], row);
    }
    transpose16Avx512(reinterpret_cast<const float*>(pairs[0]), 16,
                      reinterpret_cast<float*>(panel + p0 * 32), 16);
  }
}

TRANSFUSE_BF16_AVX512
void storeRowsAvx512(const float* sums, int64_t rows, const float* bias, int64_t n,
                     const float* res, int64_t ldr, float* out, int64_t ldo) {
  const __mmask16 m0 = static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << n) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(n >= 32 ? 0xffff : n > 16 ? (1u << (n - 16)) - 1 : 0);
  const __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
  const __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
  for (int64_t r = 0; r < rows; ++r) {
    __m512 v0 = _mm512_loadu_ps(sums + r * kBlockCols);
    __m512 v1 = _mm512_loadu_ps(sums + r * kBlockCols + kPanel);
    if (bias) {
      v0 = _mm512_add_ps(v0, b0);
      v1 = _mm512_add_ps(v1, b1);
    }
    if (res) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, res + r * ldr));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, res + r * ldr + 16));
    }
    _mm512_mask_storeu_ps(out + r * ldo, m0, v0);
    _mm512_mask_storeu_ps(out + r * ldo + 16, m1, v1);
  }
}

TRANSFUSE_BF16_AVX512
void roundTransposedAvx512(const float* a, int64_t lda, int64_t i0, int64_t live, int64_t k,
                           int64_t k0, uint16_t* out, int64_t ldo) {
  // The pair rows of Aᵀ's rows k0.. (A's k-pairs of rows i0..i0+15 as
  // 32-bit lanes), transposed: row r's 16 pairs.
  alignas(64) uint32_t pairs[16][16];
  const __mmask16 rows = firstLanes(live);
  for (int64_t p = 0; p < 16; ++p)
    _mm512_store_si512(pairs[p], pairRow(a, lda, k0 + 2 * p, k, i0, rows));
  transpose16Avx512(reinterpret_cast<const float*>(pairs[0]), 16, reinterpret_cast<float*>(out),
                    ldo / 2);
}

TRANSFUSE_BF16_AVX512
void transpose16Avx512(const float* a, int64_t lda, float* out, int64_t ldo) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(a + i * lda);
  // 32-bit, then 64-bit interleaves within 128-bit lanes: t[4g + q]'s lane
  // L holds column 4L + q of rows 4g..4g+3.
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    const __m512d t0 = _mm512_castps_pd(t[i]), t1 = _mm512_castps_pd(t[i + 1]);
    const __m512d t2 = _mm512_castps_pd(t[i + 2]), t3 = _mm512_castps_pd(t[i + 3]);
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  // Then the four row groups' lanes side by side: output row 4L + q.
  for (int q = 0; q < 4; ++q) {
    const __m512 lo01 = _mm512_shuffle_f32x4(r[q], r[4 + q], 0x44);
    const __m512 lo23 = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0x44);
    const __m512 hi01 = _mm512_shuffle_f32x4(r[q], r[4 + q], 0xEE);
    const __m512 hi23 = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0xEE);
    _mm512_storeu_ps(out + q * ldo, _mm512_shuffle_f32x4(lo01, lo23, 0x88));
    _mm512_storeu_ps(out + (4 + q) * ldo, _mm512_shuffle_f32x4(lo01, lo23, 0xDD));
    _mm512_storeu_ps(out + (8 + q) * ldo, _mm512_shuffle_f32x4(hi01, hi23, 0x88));
    _mm512_storeu_ps(out + (12 + q) * ldo, _mm512_shuffle_f32x4(hi01, hi23, 0xDD));
  }
}

namespace {

// R rows against the two panels: one chain of vdpbf16ps per row and panel
// (which adds a lane's odd product, then its even one).
template <int R>
TRANSFUSE_BF16_AVX512
void rowsAvx512(const uint16_t* a, int64_t lda, const uint16_t* panel0, const uint16_t* panel1,
                int64_t kLength, float* acc, int64_t ldAcc, bool accumulate) {
  __m512 sum[R][2];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h)
      sum[r][h] = accumulate ? _mm512_loadu_ps(acc + r * ldAcc + h * kPanel)
                             : _mm512_setzero_ps();
  for (int64_t p = 0; p < kLength / 2; ++p) {
    const __m512i w0 = _mm512_loadu_si512(panel0 + p * 32);
    const __m512i w1 = _mm512_loadu_si512(panel1 + p * 32);
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * lda + p * 2, 4);
      const __m512i x = _mm512_set1_epi32(pair);
      sum[r][0] = _mm512_dpbf16_ps(sum[r][0], (__m512bh)x, (__m512bh)w0);
      sum[r][1] = _mm512_dpbf16_ps(sum[r][1], (__m512bh)x, (__m512bh)w1);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(acc + r * ldAcc, sum[r][0]);
    _mm512_storeu_ps(acc + r * ldAcc + kPanel, sum[r][1]);
  }
}

}  // namespace

TRANSFUSE_BF16_AVX512
void blockAvx512(const uint16_t* a, int64_t lda, const uint16_t* panel0, const uint16_t* panel1,
                 int64_t kLength, int64_t rows, float* acc, int64_t ldAcc, bool accumulate) {
  static_assert(kRowsAvx512 == 8);
  if (rows <= 1) return rowsAvx512<1>(a, lda, panel0, panel1, kLength, acc, ldAcc, accumulate);
  if (rows <= 2) return rowsAvx512<2>(a, lda, panel0, panel1, kLength, acc, ldAcc, accumulate);
  if (rows <= 4) return rowsAvx512<4>(a, lda, panel0, panel1, kLength, acc, ldAcc, accumulate);
  rowsAvx512<8>(a, lda, panel0, panel1, kLength, acc, ldAcc, accumulate);
}

}  // namespace transfuse::kernels::bf16
