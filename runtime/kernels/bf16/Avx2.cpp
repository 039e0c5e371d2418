// The bf16 block kernel without bf16 instructions (see Bf16Kernels.h): the
// packed pairs widened to fp32 (a bf16 is the high half of its float: the
// even value shifted up, the odd one masked) and summed by FMAs, k odd
// then k even (as vdpbf16ps adds a pair), against A's rounded values as
// floats; and the row rounding in AVX2.
#include "runtime/kernels/bf16/Bf16Kernels.h"

#include <immintrin.h>

#include <cstring>

namespace transfuse::kernels::bf16 {

TRANSFUSE_BF16_AVX2
void roundRowAvx2(const float* x, int64_t k, uint16_t* q) {
  const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1),
                quiet = _mm256_set1_epi32(0x0040);
  int64_t j = 0;
  for (; j + 8 <= k; j += 8) {
    const __m256 v = _mm256_loadu_ps(x + j);
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i high = _mm256_srli_epi32(bits, 16);
    const __m256i lsb = _mm256_and_si256(high, one);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(bias, lsb)), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(high, quiet), nan);
    // 8 values of 32 bits (high halves zero) to 16 bits: pack, then the
    // two 64-bit halves that hold them.
    const __m256i packed = _mm256_packus_epi32(r, r);
    const __m128i lo = _mm256_castsi256_si128(packed), hi = _mm256_extracti128_si256(packed, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + j), _mm_unpacklo_epi64(lo, hi));
  }
  for (; j < k; ++j) {
    uint32_t bits;
    std::memcpy(&bits, x + j, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
      q[j] = static_cast<uint16_t>((bits >> 16) | 0x40u);
    } else {
      q[j] = static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    }
  }
}

TRANSFUSE_BF16_AVX2
void storeRowsAvx2(const float* sums, int64_t rows, const float* bias, int64_t n,
                   const float* res, int64_t ldr, float* out, int64_t ldo) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = sums + r * kBlockCols;
    float* o = out + r * ldo;
    const float* x = res ? res + r * ldr : nullptr;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      __m256 v = _mm256_loadu_ps(s + j);
      if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + j));
      if (x) v = _mm256_add_ps(v, _mm256_loadu_ps(x + j));
      _mm256_storeu_ps(o + j, v);
    }
    for (; j < n; ++j) {
      float v = s[j];
      if (bias) v += bias[j];
      if (x) v += x[j];
      o[j] = v;
    }
  }
}

namespace {

// R rows against one panel (16 columns: two vectors of 8 pairs). A's rows
// are floats here (bf16 values widened when A was rounded: Bf16Gemm.cpp),
// broadcast from memory.
template <int R>
TRANSFUSE_BF16_AVX2
void panelAvx2(const float* a, int64_t lda, const uint16_t* panel, int64_t kLength, float* acc,
               int64_t ldAcc, bool accumulate) {
  __m256 sum[R][2];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h)
      sum[r][h] = accumulate ? _mm256_loadu_ps(acc + r * ldAcc + h * 8) : _mm256_setzero_ps();
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  for (int64_t p = 0; p < kLength / 2; ++p) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + p * 32));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + p * 32 + 16));
    const __m256 e0 = _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16));
    const __m256 e1 = _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16));
    const __m256 o0 = _mm256_castsi256_ps(_mm256_and_si256(w0, high));
    const __m256 o1 = _mm256_castsi256_ps(_mm256_and_si256(w1, high));
    for (int r = 0; r < R; ++r) {
      const __m256 xe = _mm256_broadcast_ss(a + r * lda + 2 * p);
      const __m256 xo = _mm256_broadcast_ss(a + r * lda + 2 * p + 1);
      sum[r][0] = _mm256_fmadd_ps(xe, e0, _mm256_fmadd_ps(xo, o0, sum[r][0]));
      sum[r][1] = _mm256_fmadd_ps(xe, e1, _mm256_fmadd_ps(xo, o1, sum[r][1]));
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(acc + r * ldAcc, sum[r][0]);
    _mm256_storeu_ps(acc + r * ldAcc + 8, sum[r][1]);
  }
}

template <int R>
TRANSFUSE_BF16_AVX2
void rowsAvx2(const uint16_t* a, int64_t lda, const uint16_t* panel0, const uint16_t* panel1,
              int64_t kLength, float* acc, int64_t ldAcc, bool accumulate) {
  const float* wide = reinterpret_cast<const float*>(a);
  panelAvx2<R>(wide, lda, panel0, kLength, acc, ldAcc, accumulate);
  panelAvx2<R>(wide, lda, panel1, kLength, acc + kPanel, ldAcc, accumulate);
}

}  // namespace

TRANSFUSE_BF16_AVX2
void blockAvx2(const uint16_t* a, int64_t lda, const uint16_t* panel0, const uint16_t* panel1,
               int64_t kLength, int64_t rows, float* acc, int64_t ldAcc, bool accumulate) {
  static_assert(kRowsAvx2 == 4);
  if (rows <= 1) return rowsAvx2<1>(a, lda, panel0, panel1, kLength, acc, ldAcc, accumulate);
  if (rows <= 2) return rowsAvx2<2>(a, lda, panel0, panel1, kLength, acc, ldAcc, accumulate);
  rowsAvx2<4>(a, lda, panel0, panel1, kLength, acc, ldAcc, accumulate);
}

}  // namespace transfuse::kernels::bf16
