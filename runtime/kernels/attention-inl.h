// Per-target code of Attention.cpp: the fused flash-attention task and the
// pieces of the unfused path. See Attention.h for the contract. Strides in
// AttentionArgs are already resolved (non-zero) when these functions run.
//
// Fused task (b, h, query tile of M = 2 vectors of queries, 32 on AVX-512):
//   Qᵀ tile  qt[d·M + r] = scale·log2(e) · Q[i0 + r, d]   (D × M, zero-padded;
//                          scores in log2 units, so softmax uses 2^x)
//   for key tiles [j0, j0 + 72) up to the last visible key (causal: tiles
//   wholly above the diagonal are never visited):
//     S[j·M + r] = Σ_d K[j0 + j, d] · qt[d·M + r]     QKTile: micro-kernel of
//                  12 keys × 2 query vectors (24 accumulators; 6 keys and 12
//                  on AVX2, which has 16 registers) for dense K with
//                  D = 64 or 128 (rows at immediate offsets), else 8 (4) keys × 2
//                  vectors with a pointer per key row; K broadcast from its rows
//                  in place; also returns the tile maximum per query
//     masks → S = -inf (and + additive·log2 e)
//     lazy reference maximum m (an integer, raised to ceil(max) only when a
//     score exceeds m + 12): then α = 2^(m - m'), l ·= α, Oᵀ ·= α (per lane)
//     P = 2^(S - m) (Exp2Shifted, 10 instructions), l += Σ_j P
//     Oᵀ[d·M + r] += Σ_j V[j0 + j, d] · P[j·M + r]     PVTile: micro-kernel
//                  of 12 rows of D × 2 query vectors (24 accumulators; 6 rows
//                  on AVX2), V broadcast from its rows in place: QK's shape
//   O[i0 + r, :] = Oᵀ[:, r] / l[r]   (l == 0, a fully masked row: 0;
//                  transposed back in registers once per task, as Qᵀ was
//                  formed: TransposeBlock)
// Every softmax statistic is per lane (per query): no horizontal reductions,
// and the rescale by α is a vector multiply per row of Oᵀ.
// QKTile and PVTile are separate (not inlined) functions so that their
// register allocation is not disturbed by the softmax constants.

#if defined(TRANSFUSE_KERNELS_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TRANSFUSE_KERNELS_ATTENTION_INL_H_
#undef TRANSFUSE_KERNELS_ATTENTION_INL_H_
#else
#define TRANSFUSE_KERNELS_ATTENTION_INL_H_
#endif

#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "runtime/kernels/Attention.h"
#include "runtime/kernels/Common-inl.h"
#include "runtime/kernels/Parallel.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

HWY_BEFORE_NAMESPACE();
namespace transfuse::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The micro-kernels' shapes fill the vector registers with accumulators:
// AVX2 has 16 (QK 6 keys × 2 query vectors and PV 6 queries × 2 vectors of
// D, 12 accumulators each), AVX-512 32 (QK 12 × 2, PV 6 × 4: 24). SSE4 and
// SSSE3 also have 16, but without FMA the smaller shapes measured no faster
// there (forced SSE4 on a Xeon, noisy), so they keep the wide ones.
#if HWY_TARGET == HWY_AVX2
constexpr bool kAttnFewRegisters = true;
#else
constexpr bool kAttnFewRegisters = false;
#endif
constexpr size_t kAttnKeyBlock = kAttnFewRegisters ? 4 : 8;  // keys per QK micro-kernel call
constexpr size_t kAttnKeyBlockFixed = kAttnFewRegisters ? 6 : 12;  // QKMicroFixed's block
constexpr size_t kAttnPVRows = kAttnFewRegisters ? 6 : 12;  // rows of D per PV micro-kernel
constexpr size_t kAttnKeyTile = 72;   // keys per tile (a multiple of both blocks)
constexpr size_t kAttnMaxDim = 256;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// The same 2^(s - m) for a score s and an integer reference m, given
// c = 1.5·2^23 + 127 - m: t = s + c rounds s - m to an integer n in place
// (m being an integer, t - c = n + m exactly and r = s - (n + m) exactly), so
// the subtraction s - m and the clamp disappear: 10 instructions. Results
// below 2^-126 (and s = -inf, which makes t = -inf or r = NaN) are zeroed by
// the final select.
HWY_INLINE VF Exp2Shifted(DF d, VF s, VF c) {
  const VF t = hn::Add(s, c);
  const VF r = hn::Sub(s, hn::Sub(t, c));
  return hn::IfThenElseZero(hn::Ge(t, hn::Set(d, 12582912.0f + 1.0f)), Exp2Scaled(d, r, t));
}

// S rows [0, KB) of a key block: S[r·M + c·N + lane] = Σ_d k_r[d] · qt[d·M + c·N + lane]
// (KB keys × 2 query vectors of accumulators: 24 registers for KB = 12).
// Also folds the block's maximum per query into max0/max1 (rows past the
// tile's end repeat a real key, so they never raise it).
template <size_t KB>
HWY_INLINE void QKMicro(DF d, const float* HWY_RESTRICT qt, size_t M, size_t D,
                        const float* const* krow, float* HWY_RESTRICT s, VF& max0, VF& max1) {
  const size_t N = hn::Lanes(d);
  VF a0[KB], a1[KB];
  const float* k[KB];
#pragma GCC unroll 12
  for (size_t r = 0; r < KB; ++r) {
    a0[r] = hn::Zero(d);
    a1[r] = hn::Zero(d);
    k[r] = krow[r];
  }
  for (size_t dd = 0; dd < D; ++dd) {
    const VF q0 = hn::Load(d, qt + dd * M);
    const VF q1 = hn::Load(d, qt + dd * M + N);
#pragma GCC unroll 12
    for (size_t r = 0; r < KB; ++r) {
      const VF kv = hn::Set(d, k[r][dd]);
      a0[r] = hn::MulAdd(kv, q0, a0[r]);
      a1[r] = hn::MulAdd(kv, q1, a1[r]);
    }
  }
#pragma GCC unroll 12
  for (size_t r = 0; r < KB; ++r) {
    hn::Store(a0[r], d, s + r * M);
    hn::Store(a1[r], d, s + r * M + N);
    max0 = hn::Max(max0, a0[r]);
    max1 = hn::Max(max1, a1[r]);
  }
}

// Rows [d0, d0 + R) of the Oᵀ tile (D × M, queries in the lanes):
//   ot[(d0+r)·M + q] += Σ_j V[j, d0 + r] · p[j·M + q]
// the shape of QKMicroFixed with V in K's place: 2 vectors of P loaded per
// key, R values of V's row broadcast (2R accumulators), so both products of
// a tile run the same loop.
template <size_t R>
HWY_INLINE void PVMicro(DF d, const float* HWY_RESTRICT p, size_t nk, size_t M,
                        const float* vbase, size_t vstride, size_t d0, float* HWY_RESTRICT ot) {
  const size_t N = hn::Lanes(d);
  VF a0[R], a1[R];
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r) {
    a0[r] = hn::Load(d, ot + (d0 + r) * M);
    a1[r] = hn::Load(d, ot + (d0 + r) * M + N);
  }
  const float* vrow = vbase + d0;
  const float* prow = p;
  for (size_t j = 0; j < nk; ++j, vrow += vstride, prow += M) {
    const VF p0 = hn::Load(d, prow);
    const VF p1 = hn::Load(d, prow + N);
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      const VF vv = hn::Set(d, vrow[r]);
      a0[r] = hn::MulAdd(vv, p0, a0[r]);
      a1[r] = hn::MulAdd(vv, p1, a1[r]);
    }
  }
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r) {
    hn::Store(a0[r], d, ot + (d0 + r) * M);
    hn::Store(a1[r], d, ot + (d0 + r) * M + N);
  }
}

// Oᵀ-tile += (P · V-tile)ᵀ over all D rows. Not inlined: register
// allocation stays local to the micro-kernels (inlined into AttentionTask,
// the softmax constants it keeps live caused spills).
HWY_NOINLINE void PVTile(DF d, const float* p, size_t nk, size_t M, const float* vbase,
                         size_t vstride, size_t D, float* ot) {
  constexpr size_t R = kAttnPVRows;
  size_t d0 = 0;
  for (; d0 + R <= D; d0 += R) PVMicro<R>(d, p, nk, M, vbase, vstride, d0, ot);
  if (R > 8 && d0 + 8 <= D) {
    PVMicro<8>(d, p, nk, M, vbase, vstride, d0, ot);
    d0 += 8;
  }
  if (d0 + 4 <= D) {
    PVMicro<4>(d, p, nk, M, vbase, vstride, d0, ot);
    d0 += 4;
  }
  if (d0 + 2 <= D) {
    PVMicro<2>(d, p, nk, M, vbase, vstride, d0, ot);
    d0 += 2;
  }
  if (d0 < D) PVMicro<1>(d, p, nk, M, vbase, vstride, d0, ot);
}

// QKMicro for K rows at a fixed stride kD (dense K with D = kD): row r of the
// block is at k0 + r·kD, an immediate displacement, so 12 keys need no
// pointer registers (24 accumulators).
template <size_t KB, size_t kD>
HWY_INLINE void QKMicroFixed(DF d, const float* HWY_RESTRICT qt, size_t M, const float* k0,
                             float* HWY_RESTRICT s, VF& max0, VF& max1) {
  const size_t N = hn::Lanes(d);
  VF a0[KB], a1[KB];
#pragma GCC unroll 16
  for (size_t r = 0; r < KB; ++r) a0[r] = a1[r] = hn::Zero(d);
  for (size_t dd = 0; dd < kD; ++dd) {
    const VF q0 = hn::Load(d, qt + dd * M);
    const VF q1 = hn::Load(d, qt + dd * M + N);
#pragma GCC unroll 16
    for (size_t r = 0; r < KB; ++r) {
      const VF kv = hn::Set(d, k0[r * kD + dd]);
      a0[r] = hn::MulAdd(kv, q0, a0[r]);
      a1[r] = hn::MulAdd(kv, q1, a1[r]);
    }
  }
  VF m0 = max0, m1 = max1;
#pragma GCC unroll 16
  for (size_t r = 0; r < KB; ++r) {
    hn::Store(a0[r], d, s + r * M);
    hn::Store(a1[r], d, s + r * M + N);
    m0 = hn::Max(m0, a0[r]);
    m1 = hn::Max(m1, a1[r]);
  }
  max0 = m0;
  max1 = m1;
}

// Blocks of kAttnKeyBlockFixed keys of a dense K tile; returns how many keys
// were done (a multiple of the block; the caller does the rest).
template <size_t kD>
HWY_INLINE size_t QKTileFixed(DF d, const float* HWY_RESTRICT qt, size_t M, const float* kb,
                              size_t j0, size_t nk, float* HWY_RESTRICT s, VF& t0, VF& t1) {
  constexpr size_t KB = kAttnKeyBlockFixed;
  size_t jb = 0;
  for (; jb + KB <= nk; jb += KB)
    QKMicroFixed<KB, kD>(d, qt, M, kb + (j0 + jb) * kD, s + jb * M, t0, t1);
  return jb;
}

// S-tile (nk keys × M queries) = K-tile · Qᵀ; returns the per-query maxima in
// t0/t1 (not inlined, for the same reason as PVTile).
HWY_NOINLINE void QKTile(DF d, const float* HWY_RESTRICT qt, size_t M, size_t D,
                         const float* kb, size_t kstride, size_t j0, size_t nk,
                         float* HWY_RESTRICT s, VF& t0, VF& t1) {
  size_t done = 0;
  if (kstride == D && D == 64) done = QKTileFixed<64>(d, qt, M, kb, j0, nk, s, t0, t1);
  if (kstride == D && D == 128) done = QKTileFixed<128>(d, qt, M, kb, j0, nk, s, t0, t1);
  constexpr size_t KB = kAttnKeyBlock;
  for (size_t jb = done; jb < nk; jb += KB) {
    const float* krow[KB];
    for (size_t r = 0; r < KB; ++r) krow[r] = kb + (j0 + std::min(jb + r, nk - 1)) * kstride;
    QKMicro<KB>(d, qt, M, D, krow, s + jb * M, t0, t1);
  }
}

// out[c·outStride + r] = in[r·inStride + c] · scale[c] for an N × N block
// (N lanes). Each of the log2(N) rounds of ConcatEven/ConcatOdd over the N
// rows rotates the bits of the (row, column) index by one, so together they
// transpose: 64 two-source permutes for AVX-512's 16 × 16, where a vector
// gather per column costs 16 loads.
HWY_INLINE void TransposeBlock(DF d, const float* in, size_t inStride, VF scale, float* out,
                               size_t outStride) {
  const size_t N = hn::Lanes(d);
  VF v[hn::MaxLanes(DF())];
  for (size_t r = 0; r < N; ++r) v[r] = hn::Mul(hn::LoadU(d, in + r * inStride), scale);
#if HWY_TARGET != HWY_SCALAR
  VF w[hn::MaxLanes(DF())];
  for (size_t round = 1; round < N; round *= 2) {
    for (size_t i = 0; i < N / 2; ++i) {
      w[i] = hn::ConcatEven(d, v[2 * i + 1], v[2 * i]);
      w[N / 2 + i] = hn::ConcatOdd(d, v[2 * i + 1], v[2 * i]);
    }
    for (size_t r = 0; r < N; ++r) v[r] = w[r];
  }
#endif
  for (size_t r = 0; r < N; ++r) hn::StoreU(v[r], d, out + r * outStride);
}

// The last key (exclusive) any query of [i0, i0 + nq) may see.
HWY_INLINE size_t AttnKeyEnd(const AttentionArgs& a, size_t b, size_t i0, size_t nq) {
  size_t end = a.seqK;
  if (a.keyLengths) {
    const int32_t len = a.keyLengths[b];
    end = std::min(end, static_cast<size_t>(std::max<int32_t>(0, len)));
  }
  if (a.causal) {
    // Query i sees j <= i + Sk - Sq; the tile's last query is i0 + nq - 1.
    const ptrdiff_t lim = static_cast<ptrdiff_t>(i0 + nq) + static_cast<ptrdiff_t>(a.seqK) -
                          static_cast<ptrdiff_t>(a.seqQ);
    end = std::min(end, static_cast<size_t>(std::max<ptrdiff_t>(0, lim)));
  }
  return end;
}

// One query row i of head (b, h), with D in the vector lanes: the path for
// tiles of few queries (a decode step with a KV cache, Sq = 1, or the last
// rows of Sq), where the query-lane tile would leave most lanes idle.
//   s_j = (scale·log2 e)·q·K_j (a dot product per key), masks, then per block
//   of 64 keys the exact block maximum m' = max(m, max_j s_j): α = 2^(m - m'),
//   l = α·l + Σ_j 2^(s_j - m'), o = α·o + Σ_j 2^(s_j - m')·V_j.
HWY_NOINLINE void AttentionRow(const AttentionArgs& a, size_t b, size_t h, size_t i) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const size_t D = a.headDim;
  const size_t Dp = (D + N - 1) / N * N;
  const size_t full = D / N, rem = D % N;
  HWY_ALIGN float q[kAttnMaxDim + hn::MaxLanes(DF())];
  HWY_ALIGN float o[kAttnMaxDim + hn::MaxLanes(DF())];
  HWY_ALIGN float s[kAttnKeyTile];
  const float kNegInf = -std::numeric_limits<float>::infinity();
  constexpr float kLog2e = 1.44269504088896341f;
  const float* qrow = a.q.data + b * a.q.batchStride + h * a.q.headStride + i * a.q.rowStride;
  for (size_t dd = 0; dd < Dp; ++dd) {
    q[dd] = dd < D ? qrow[dd] * a.scale * kLog2e : 0.0f;
    o[dd] = 0.0f;
  }
  const float* kb = a.k.data + b * a.k.batchStride + a.kvHead(h) * a.k.headStride;
  const float* vb = a.v.data + b * a.v.batchStride + a.kvHead(h) * a.v.headStride;
  const uint8_t* kmask = a.keyMask ? a.keyMask + b * a.seqK : nullptr;
  const float* add = a.additive ? a.additive + b * a.additiveBatchStride +
                                      h * a.additiveHeadStride + i * a.additiveRowStride
                                : nullptr;
  const size_t kEnd = AttnKeyEnd(a, b, i, 1);  // exact for one row, causal included
  float m = kNegInf, l = 0.0f;
  for (size_t j0 = 0; j0 < kEnd; j0 += kAttnKeyTile) {
    const size_t nk = std::min(kAttnKeyTile, kEnd - j0);
    float bmax = kNegInf;
    for (size_t j = 0; j < nk; ++j) {
      const float* k = kb + (j0 + j) * a.k.rowStride;
      VF acc0 = hn::Zero(d), acc1 = hn::Zero(d);
      size_t c = 0;
      for (; c + 2 <= full; c += 2) {
        acc0 = hn::MulAdd(hn::Load(d, q + c * N), hn::LoadU(d, k + c * N), acc0);
        acc1 = hn::MulAdd(hn::Load(d, q + c * N + N), hn::LoadU(d, k + c * N + N), acc1);
      }
      if (c < full) acc0 = hn::MulAdd(hn::Load(d, q + c * N), hn::LoadU(d, k + c * N), acc0);
      if (rem) acc1 = hn::MulAdd(hn::Load(d, q + full * N), LoadTail(d, k + full * N, rem, 0.0f), acc1);
      float sj = ReduceSumF(d, hn::Add(acc0, acc1));
      if (add) sj += add[(j0 + j)] * kLog2e;
      if (kmask && kmask[j0 + j] == 0) sj = kNegInf;
      s[j] = sj;
      bmax = std::max(bmax, sj);
    }
    const float mn = std::max(m, bmax);
    if (mn == kNegInf) continue;  // nothing visible yet
    if (mn != m) {
      const float alpha = m == kNegInf ? 0.0f : std::exp2(m - mn);
      l *= alpha;
      const VF al = hn::Set(d, alpha);
      for (size_t c = 0; c < Dp; c += N) hn::Store(hn::Mul(hn::Load(d, o + c), al), d, o + c);
      m = mn;
    }
    l += Exp2ShiftedSumInPlace(d, s, nk, m);
    // o += Σ_j p_j·V_j, four vectors of D at a time in registers, two keys
    // interleaved (independent FMA chains), summed at the end.
    const float* vt = vb + j0 * a.v.rowStride;
    const size_t vs = a.v.rowStride;
    size_t c = 0;
    for (; c + 4 <= full; c += 4) {
      VF e0 = hn::Load(d, o + c * N), e1 = hn::Load(d, o + c * N + N);
      VF e2 = hn::Load(d, o + c * N + 2 * N), e3 = hn::Load(d, o + c * N + 3 * N);
      VF f0 = hn::Zero(d), f1 = f0, f2 = f0, f3 = f0;
      size_t jj = 0;
      for (; jj + 2 <= nk; jj += 2) {
        const float* v0 = vt + jj * vs + c * N;
        const float* v1 = v0 + vs;
        const VF p0 = hn::Set(d, s[jj]), p1 = hn::Set(d, s[jj + 1]);
        e0 = hn::MulAdd(p0, hn::LoadU(d, v0), e0);
        e1 = hn::MulAdd(p0, hn::LoadU(d, v0 + N), e1);
        e2 = hn::MulAdd(p0, hn::LoadU(d, v0 + 2 * N), e2);
        e3 = hn::MulAdd(p0, hn::LoadU(d, v0 + 3 * N), e3);
        f0 = hn::MulAdd(p1, hn::LoadU(d, v1), f0);
        f1 = hn::MulAdd(p1, hn::LoadU(d, v1 + N), f1);
        f2 = hn::MulAdd(p1, hn::LoadU(d, v1 + 2 * N), f2);
        f3 = hn::MulAdd(p1, hn::LoadU(d, v1 + 3 * N), f3);
      }
      if (jj < nk) {
        const float* v0 = vt + jj * vs + c * N;
        const VF p0 = hn::Set(d, s[jj]);
        e0 = hn::MulAdd(p0, hn::LoadU(d, v0), e0);
        e1 = hn::MulAdd(p0, hn::LoadU(d, v0 + N), e1);
        e2 = hn::MulAdd(p0, hn::LoadU(d, v0 + 2 * N), e2);
        e3 = hn::MulAdd(p0, hn::LoadU(d, v0 + 3 * N), e3);
      }
      hn::Store(hn::Add(e0, f0), d, o + c * N);
      hn::Store(hn::Add(e1, f1), d, o + c * N + N);
      hn::Store(hn::Add(e2, f2), d, o + c * N + 2 * N);
      hn::Store(hn::Add(e3, f3), d, o + c * N + 3 * N);
    }
    for (; c < full + (rem ? 1 : 0); ++c) {
      VF e = hn::Load(d, o + c * N);
      for (size_t jj = 0; jj < nk; ++jj) {
        const float* v = vt + jj * vs + c * N;
        const VF vv = c < full ? hn::LoadU(d, v) : LoadTail(d, v, rem, 0.0f);
        e = hn::MulAdd(hn::Set(d, s[jj]), vv, e);
      }
      hn::Store(e, d, o + c * N);
    }
  }
  float* orow = a.out + b * a.outBatchStride + h * a.outHeadStride + i * a.outRowStride;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (size_t dd = 0; dd < D; ++dd) orow[dd] = o[dd] * inv;
}

// One fused task: queries [i0, i0 + M) of head (b, h).
HWY_NOINLINE void AttentionTask(const AttentionArgs& a, size_t b, size_t h, size_t i0) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const size_t M = 2 * N;
  const size_t D = a.headDim;
  const size_t nq = std::min(M, a.seqQ - i0);
  if (nq <= M / 4) {  // few queries: one row at a time, D in the lanes
    for (size_t r = 0; r < nq; ++r) AttentionRow(a, b, h, i0 + r);
    return;
  }
  constexpr size_t kMaxM = 2 * hn::MaxLanes(DF());
  HWY_ALIGN float qt[kAttnMaxDim * kMaxM];
  HWY_ALIGN float ot[kAttnMaxDim * kMaxM];  // the Oᵀ tile, [D][M]
  // Score tile; a last partial 8-key block may write up to 7 rows past nk.
  HWY_ALIGN float s[(kAttnKeyTile + kAttnKeyBlock) * kMaxM];
  HWY_ALIGN float lanebuf[kMaxM];
  const float kNegInf = -std::numeric_limits<float>::infinity();

  // Qᵀ, pre-scaled by scale·log2 e (scores in log2 units, for Exp2Fast);
  // padding queries are 0. N × N blocks of N whole queries are transposed
  // in registers, the rest element by element.
  const float* qb = a.q.data + b * a.q.batchStride + h * a.q.headStride + i0 * a.q.rowStride;
  constexpr float kLog2e = 1.44269504088896341f;
  const float qscale = a.scale * kLog2e;
  const size_t fullD = D / N * N;
  for (size_t r0 = 0; r0 < M; r0 += N) {
    const size_t dBlocked = r0 + N <= nq ? fullD : 0;
    for (size_t dd = 0; dd < dBlocked; dd += N)
      TransposeBlock(d, qb + r0 * a.q.rowStride + dd, a.q.rowStride, hn::Set(d, qscale),
                     qt + dd * M + r0, M);
    for (size_t r = r0; r < r0 + N; ++r)
      for (size_t dd = dBlocked; dd < D; ++dd)
        qt[dd * M + r] = r < nq ? qb[r * a.q.rowStride + dd] * qscale : 0.0f;
  }
  for (size_t i = 0; i < D * M; i += N) hn::Store(hn::Zero(d), d, ot + i);
  VF m0 = hn::Set(d, kNegInf), m1 = m0, l0 = hn::Zero(d), l1 = l0;

  const float* kb = a.k.data + b * a.k.batchStride + a.kvHead(h) * a.k.headStride;
  const float* vb = a.v.data + b * a.v.batchStride + a.kvHead(h) * a.v.headStride;
  const size_t kEnd = AttnKeyEnd(a, b, i0, nq);
  const ptrdiff_t off = static_cast<ptrdiff_t>(a.seqK) - static_cast<ptrdiff_t>(a.seqQ);
  const VF qidx0 = hn::Add(hn::Iota(d, 0.0f), hn::Set(d, static_cast<float>(i0)));
  const VF qidx1 = hn::Add(qidx0, hn::Set(d, static_cast<float>(N)));
  const uint8_t* kmask = a.keyMask ? a.keyMask + b * a.seqK : nullptr;

  for (size_t j0 = 0; j0 < kEnd; j0 += kAttnKeyTile) {
    const size_t nk = std::min(kAttnKeyTile, kEnd - j0);
    if (kmask) {
      bool any = false;
      for (size_t j = 0; j < nk; ++j) any |= kmask[j0 + j] != 0;
      if (!any) continue;
    }
    // S = Qᵀ-tile against 8 keys at a time; a partial block repeats its last key.
    VF t0 = hn::Set(d, kNegInf), t1 = t0;  // the tile's maximum per query
    QKTile(d, qt, M, D, kb, a.k.rowStride, j0, nk, s, t0, t1);
    // Masks.
    const bool causalPartial =
        a.causal && static_cast<ptrdiff_t>(j0 + nk - 1) > static_cast<ptrdiff_t>(i0) + off;
    const bool anyMask = causalPartial || kmask || a.additive;
    if (anyMask) {
      const VF ninf = hn::Set(d, kNegInf);
      t0 = t1 = ninf;  // recomputed over the masked scores
      for (size_t j = 0; j < nk; ++j) {
        float* sj = s + j * M;
        VF s0 = hn::Load(d, sj), s1 = hn::Load(d, sj + N);
        if (a.additive) {
          const float* ab = a.additive + b * a.additiveBatchStride + h * a.additiveHeadStride +
                            (j0 + j);
          if (a.additiveRowStride == 0) {
            const VF add = hn::Set(d, ab[0] * kLog2e);
            s0 = hn::Add(s0, add);
            s1 = hn::Add(s1, add);
          } else {
            for (size_t r = 0; r < M; ++r)
              lanebuf[r] = r < nq ? ab[(i0 + r) * a.additiveRowStride] : 0.0f;
            const VF l2e = hn::Set(d, kLog2e);
            s0 = hn::MulAdd(hn::Load(d, lanebuf), l2e, s0);
            s1 = hn::MulAdd(hn::Load(d, lanebuf + N), l2e, s1);
          }
        }
        if (causalPartial) {
          // Key j0 + j is masked for queries i < j0 + j - off.
          const VF lim = hn::Set(d, static_cast<float>(static_cast<ptrdiff_t>(j0 + j) - off));
          s0 = hn::IfThenElse(hn::Lt(qidx0, lim), ninf, s0);
          s1 = hn::IfThenElse(hn::Lt(qidx1, lim), ninf, s1);
        }
        if (kmask && kmask[j0 + j] == 0) s0 = s1 = ninf;
        t0 = hn::Max(t0, s0);
        t1 = hn::Max(t1, s1);
        hn::Store(s0, d, sj);
        hn::Store(s1, d, sj + N);
      }
    }
    // Online softmax, per query lane, with a lazy reference maximum m: it is
    // raised (and O, l rescaled by α = 2^(m - m')) only when a score exceeds
    // m + 12, so P = 2^(S - m) <= 2^12 and the rescale runs a few times per
    // row instead of at every tile whose maximum grew. O / l is unchanged by
    // the choice of m.
    const VF ninf = hn::Set(d, kNegInf);
    const VF kLazy = hn::Set(d, 12.0f);
    const auto grow0 = hn::Gt(t0, hn::Add(m0, kLazy));
    const auto grow1 = hn::Gt(t1, hn::Add(m1, kLazy));
    if (!hn::AllFalse(d, hn::Or(grow0, grow1))) {
      // m' = ceil(max(m, tile max)): an integer, for Exp2Shifted.
      const VF mn0 = hn::Ceil(hn::Max(m0, t0)), mn1 = hn::Ceil(hn::Max(m1, t1));
      const VF al0 = Exp2Fast(d, hn::Sub(m0, hn::IfThenZeroElse(hn::Eq(mn0, ninf), mn0)));
      const VF al1 = Exp2Fast(d, hn::Sub(m1, hn::IfThenZeroElse(hn::Eq(mn1, ninf), mn1)));
      l0 = hn::Mul(l0, al0);
      l1 = hn::Mul(l1, al1);
      for (size_t dd = 0; dd < D; ++dd) {
        float* row = ot + dd * M;
        hn::Store(hn::Mul(hn::Load(d, row), al0), d, row);
        hn::Store(hn::Mul(hn::Load(d, row + N), al1), d, row + N);
      }
      m0 = mn0;
      m1 = mn1;
    }
    // c = shift - m (m = 0 for lanes with nothing seen yet: their scores are
    // all -inf, which Exp2Shifted maps to 0).
    const VF kShift = hn::Set(d, 12582912.0f + 127.0f);
    const VF ms0 = hn::IfThenZeroElse(hn::Eq(m0, ninf), m0);
    const VF ms1 = hn::IfThenZeroElse(hn::Eq(m1, ninf), m1);
    const VF c0 = hn::Sub(kShift, ms0);
    const VF c1 = hn::Sub(kShift, ms1);
    // The shifter needs |m| < 2^22 (scores below ~1.45e6 in natural units);
    // larger ones (garbage inputs) take the plain 2^(s - m).
    const VF kBig = hn::Set(d, 2097152.0f);
    const bool shifted =
        hn::AllTrue(d, hn::And(hn::Lt(hn::Abs(ms0), kBig), hn::Lt(hn::Abs(ms1), kBig)));
    VF sum0 = hn::Zero(d), sum1 = sum0;
    for (size_t j = 0; j < nk; ++j) {
      VF p0, p1;
      if (HWY_LIKELY(shifted)) {
        p0 = Exp2Shifted(d, hn::Load(d, s + j * M), c0);
        p1 = Exp2Shifted(d, hn::Load(d, s + j * M + N), c1);
      } else {
        p0 = Exp2Fast(d, hn::Sub(hn::Load(d, s + j * M), ms0));
        p1 = Exp2Fast(d, hn::Sub(hn::Load(d, s + j * M + N), ms1));
      }
      hn::Store(p0, d, s + j * M);
      hn::Store(p1, d, s + j * M + N);
      sum0 = hn::Add(sum0, p0);
      sum1 = hn::Add(sum1, p1);
    }
    l0 = hn::Add(l0, sum0);
    l1 = hn::Add(l1, sum1);
    // O-tile += P · V-tile.
    PVTile(d, s, nk, M, vb + j0 * a.v.rowStride, a.v.rowStride, D, ot);
  }

  // O = (Oᵀ-tile / l)ᵀ; fully masked queries (l == 0) get 0. Transposed
  // back like Qᵀ: blocks of N whole queries in registers, the rest by element.
  const VF one = hn::Set(d, 1.0f);
  hn::Store(hn::IfThenElseZero(hn::Gt(l0, hn::Zero(d)), hn::Div(one, l0)), d, lanebuf);
  hn::Store(hn::IfThenElseZero(hn::Gt(l1, hn::Zero(d)), hn::Div(one, l1)), d, lanebuf + N);
  float* obase = a.out + b * a.outBatchStride + h * a.outHeadStride + i0 * a.outRowStride;
  for (size_t r0 = 0; r0 < nq; r0 += N) {
    const size_t dBlocked = r0 + N <= nq ? fullD : 0;
    for (size_t dd = 0; dd < dBlocked; dd += N)
      TransposeBlock(d, ot + dd * M + r0, M, hn::Load(d, lanebuf + r0),
                     obase + r0 * a.outRowStride + dd, a.outRowStride);
    for (size_t r = r0; r < std::min(r0 + N, nq); ++r)
      for (size_t dd = dBlocked; dd < D; ++dd)
        obase[r * a.outRowStride + dd] = ot[dd * M + r] * lanebuf[r];
  }
}

// Unfused path, step 2: S (rows [r0, r1) of Sq × Sk, row stride Sk) holds
// Q·Kᵀ; scale it and apply the masks (masked entries become -inf).
HWY_NOINLINE void ScaleAndMaskRows(const AttentionArgs& a, size_t b, size_t h, float* S,
                                   size_t r0, size_t r1) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const size_t Sk = a.seqK;
  const float kNegInf = -std::numeric_limits<float>::infinity();
  const VF sc = hn::Set(d, a.scale);
  size_t keyEnd = Sk;
  if (a.keyLengths)
    keyEnd = std::min(keyEnd, static_cast<size_t>(std::max<int32_t>(0, a.keyLengths[b])));
  const ptrdiff_t off = static_cast<ptrdiff_t>(Sk) - static_cast<ptrdiff_t>(a.seqQ);
  for (size_t i = r0; i < r1; ++i) {
    float* row = S + i * Sk;
    const float* add = a.additive ? a.additive + b * a.additiveBatchStride +
                                        h * a.additiveHeadStride + i * a.additiveRowStride
                                  : nullptr;
    size_t j = 0;
    for (; j + N <= Sk; j += N) {
      VF v = hn::Mul(hn::LoadU(d, row + j), sc);
      if (add) v = hn::Add(v, hn::LoadU(d, add + j));
      hn::StoreU(v, d, row + j);
    }
    for (; j < Sk; ++j) row[j] = row[j] * a.scale + (add ? add[j] : 0.0f);
    size_t end = keyEnd;
    if (a.causal)
      end = std::min(end, static_cast<size_t>(std::max<ptrdiff_t>(
                              0, static_cast<ptrdiff_t>(i) + off + 1)));
    for (j = end; j < Sk; ++j) row[j] = kNegInf;
    if (a.keyMask)
      for (j = 0; j < end; ++j)
        if (a.keyMask[b * Sk + j] == 0) row[j] = kNegInf;
  }
}

HWY_NOINLINE size_t AttentionQueryTile() { return 2 * hn::Lanes(DF()); }

// The fused kernel over all of `a` (strides resolved, no dropout): tasks
// (b, h, query tile) on the pool. Tasks run head by head, so one head's K
// and V (Sk·D·8 bytes: 256 KiB at Sk = 512, D = 64) stay in L2 across its
// query tiles; within a head the last (for causal, heaviest) query tile goes
// first, and threads take one task at a time, so the uneven causal tiles
// balance.
HWY_NOINLINE void AttentionRun(const AttentionArgs& a, rt::ThreadPool* pool) {
  const size_t tile = AttentionQueryTile();
  const size_t tiles = (a.seqQ + tile - 1) / tile;
  parallelTasks(pool, a.batch * a.heads * tiles, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      const size_t bh = t / tiles;
      const size_t qt = tiles - 1 - t % tiles;
      AttentionTask(a, bh / a.heads, bh % a.heads, qt * tile);
    }
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace transfuse::kernels
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
