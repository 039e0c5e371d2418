// Per-target code of Attention.cpp: the fused flash-attention task and the
// pieces of the unfused path. See Attention.h for the contract. Strides in
// AttentionArgs are already resolved (non-zero) when these functions run.
//
// Fused task (b, h, query tile of M = 2 vectors of queries):
//   Qᵀ tile  qt[d·M + r]  = scale · Q[i0 + r, d]          (D × M, zero-padded)
//   for key tiles [j0, j0 + 32) up to the last visible key:
//     S[j·M + r]  = Σ_d K[j0 + j, d] · qt[d·M + r]            (QK micro-kernel:
//                   8 keys × 2 vectors, 16 accumulators, K broadcast from its
//                   rows in place)
//     masks → S = -inf; m' = max(m, max_j S); α = exp(m - m');
//     P = exp(S - m'); l = α·l + Σ_j P; Oᵀ ·= α (skipped when m' == m)
//     Oᵀ[d·M + r] += Σ_j V[j0 + j, d] · P[j·M + r]             (PV micro-kernel:
//                   8 rows of d × 2 vectors, V broadcast in place)
//   O[i0 + r, d] = Oᵀ[d·M + r] / l[r]   (l == 0, a fully masked row: 0)
// Every softmax statistic is per lane (per query), so no horizontal reduction.

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

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

HWY_BEFORE_NAMESPACE();
namespace transfuse::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kAttnKeyTile = 32;   // keys per tile
constexpr size_t kAttnMaxDim = 256;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// S rows [0, 8) of the tile: S[r·M + c·N + lane] = Σ_d k_r[d] · qt[d·M + c·N + lane].
HWY_INLINE void QKMicro8(DF d, const float* HWY_RESTRICT qt, size_t M, size_t D,
                         const float* const* krow, float* HWY_RESTRICT s) {
  const size_t N = hn::Lanes(d);
  const float *k0 = krow[0], *k1 = krow[1], *k2 = krow[2], *k3 = krow[3];
  const float *k4 = krow[4], *k5 = krow[5], *k6 = krow[6], *k7 = krow[7];
  VF a00 = hn::Zero(d), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00,
     a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00, a60 = a00, a61 = a00,
     a70 = a00, a71 = a00;
  for (size_t dd = 0; dd < D; ++dd) {
    const VF q0 = hn::Load(d, qt + dd * M);
    const VF q1 = hn::Load(d, qt + dd * M + N);
#define TF_QK_ROW(r)                      \
  {                                       \
    const VF kv = hn::Set(d, k##r[dd]);   \
    a##r##0 = hn::MulAdd(kv, q0, a##r##0); \
    a##r##1 = hn::MulAdd(kv, q1, a##r##1); \
  }
    TF_QK_ROW(0) TF_QK_ROW(1) TF_QK_ROW(2) TF_QK_ROW(3)
    TF_QK_ROW(4) TF_QK_ROW(5) TF_QK_ROW(6) TF_QK_ROW(7)
#undef TF_QK_ROW
  }
#define TF_QK_STORE(r)                      \
  hn::Store(a##r##0, d, s + (r) * M);       \
  hn::Store(a##r##1, d, s + (r) * M + N);
  TF_QK_STORE(0) TF_QK_STORE(1) TF_QK_STORE(2) TF_QK_STORE(3)
  TF_QK_STORE(4) TF_QK_STORE(5) TF_QK_STORE(6) TF_QK_STORE(7)
#undef TF_QK_STORE
}

// Oᵀ rows [d0, d0 + KD): ot[(d0+r)·M + c·N + lane] += Σ_j v_j[d0 + r] · p[j·M + c·N + lane].
template <size_t KD>
HWY_INLINE void PVMicro(DF d, const float* HWY_RESTRICT p, size_t nk, const float* vbase,
                        size_t vstride, size_t d0, float* HWY_RESTRICT ot, size_t M) {
  const size_t N = hn::Lanes(d);
  VF acc0[KD], acc1[KD];
#pragma GCC unroll 8
  for (size_t r = 0; r < KD; ++r) {
    acc0[r] = hn::Load(d, ot + (d0 + r) * M);
    acc1[r] = hn::Load(d, ot + (d0 + r) * M + N);
  }
  const float* vrow = vbase + d0;
  for (size_t j = 0; j < nk; ++j, vrow += vstride) {
    const VF p0 = hn::Load(d, p + j * M);
    const VF p1 = hn::Load(d, p + j * M + N);
#pragma GCC unroll 8
    for (size_t r = 0; r < KD; ++r) {
      const VF vv = hn::Set(d, vrow[r]);
      acc0[r] = hn::MulAdd(vv, p0, acc0[r]);
      acc1[r] = hn::MulAdd(vv, p1, acc1[r]);
    }
  }
#pragma GCC unroll 8
  for (size_t r = 0; r < KD; ++r) {
    hn::Store(acc0[r], d, ot + (d0 + r) * M);
    hn::Store(acc1[r], d, ot + (d0 + r) * M + N);
  }
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

// One fused task: queries [i0, i0 + M) of head (b, h).
HWY_NOINLINE void AttentionTask(const AttentionArgs& a, size_t b, size_t h, size_t i0) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const size_t M = 2 * N;
  const size_t D = a.headDim;
  const size_t nq = std::min(M, a.seqQ - i0);
  constexpr size_t kMaxM = 2 * hn::MaxLanes(DF());
  HWY_ALIGN float qt[kAttnMaxDim * kMaxM];
  HWY_ALIGN float ot[kAttnMaxDim * kMaxM];
  HWY_ALIGN float s[kAttnKeyTile * kMaxM];
  HWY_ALIGN float lanebuf[kMaxM];
  const float kNegInf = -std::numeric_limits<float>::infinity();

  // Qᵀ, pre-scaled; padding queries are 0.
  const float* qb = a.q.data + b * a.q.batchStride + h * a.q.headStride;
  for (size_t r = 0; r < M; ++r) {
    if (r < nq) {
      const float* qrow = qb + (i0 + r) * a.q.rowStride;
      for (size_t dd = 0; dd < D; ++dd) qt[dd * M + r] = qrow[dd] * a.scale;
    } else {
      for (size_t dd = 0; dd < D; ++dd) qt[dd * M + r] = 0.0f;
    }
  }
  for (size_t i = 0; i < D * M; i += N) hn::Store(hn::Zero(d), d, ot + i);
  VF m0 = hn::Set(d, kNegInf), m1 = m0, l0 = hn::Zero(d), l1 = l0;

  const float* kb = a.k.data + b * a.k.batchStride + h * a.k.headStride;
  const float* vb = a.v.data + b * a.v.batchStride + h * a.v.headStride;
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
    for (size_t jb = 0; jb < nk; jb += 8) {
      const float* krow[8];
      for (size_t r = 0; r < 8; ++r)
        krow[r] = kb + (j0 + std::min(jb + r, nk - 1)) * a.k.rowStride;
      QKMicro8(d, qt, M, D, krow, s + jb * M);
    }
    // Masks.
    const bool causalPartial =
        a.causal && static_cast<ptrdiff_t>(j0 + nk - 1) > static_cast<ptrdiff_t>(i0) + off;
    const bool anyMask = causalPartial || kmask || a.additive;
    if (anyMask) {
      const VF ninf = hn::Set(d, kNegInf);
      for (size_t j = 0; j < nk; ++j) {
        float* sj = s + j * M;
        VF s0 = hn::Load(d, sj), s1 = hn::Load(d, sj + N);
        if (a.additive) {
          const float* ab = a.additive + b * a.additiveBatchStride + h * a.additiveHeadStride +
                            (j0 + j);
          if (a.additiveRowStride == 0) {
            const VF add = hn::Set(d, ab[0]);
            s0 = hn::Add(s0, add);
            s1 = hn::Add(s1, add);
          } else {
            for (size_t r = 0; r < M; ++r)
              lanebuf[r] = r < nq ? ab[(i0 + r) * a.additiveRowStride] : 0.0f;
            s0 = hn::Add(s0, hn::Load(d, lanebuf));
            s1 = hn::Add(s1, hn::Load(d, lanebuf + N));
          }
        }
        if (causalPartial) {
          // Key j0 + j is masked for queries i < j0 + j - off.
          const VF lim = hn::Set(d, static_cast<float>(static_cast<ptrdiff_t>(j0 + j) - off));
          s0 = hn::IfThenElse(hn::Lt(qidx0, lim), ninf, s0);
          s1 = hn::IfThenElse(hn::Lt(qidx1, lim), ninf, s1);
        }
        if (kmask && kmask[j0 + j] == 0) s0 = s1 = ninf;
        hn::Store(s0, d, sj);
        hn::Store(s1, d, sj + N);
      }
    }
    // Online softmax, per query lane.
    VF t0 = hn::Set(d, kNegInf), t1 = t0;
    for (size_t j = 0; j < nk; ++j) {
      t0 = hn::Max(t0, hn::Load(d, s + j * M));
      t1 = hn::Max(t1, hn::Load(d, s + j * M + N));
    }
    const VF mn0 = hn::Max(m0, t0), mn1 = hn::Max(m1, t1);
    const VF ninf = hn::Set(d, kNegInf);
    const VF ms0 = hn::IfThenZeroElse(hn::Eq(mn0, ninf), mn0);
    const VF ms1 = hn::IfThenZeroElse(hn::Eq(mn1, ninf), mn1);
    if (!hn::AllTrue(d, hn::And(hn::Eq(mn0, m0), hn::Eq(mn1, m1)))) {
      const VF al0 = hn::Exp(d, hn::Sub(m0, ms0));
      const VF al1 = hn::Exp(d, hn::Sub(m1, ms1));
      l0 = hn::Mul(l0, al0);
      l1 = hn::Mul(l1, al1);
      for (size_t dd = 0; dd < D; ++dd) {
        hn::Store(hn::Mul(hn::Load(d, ot + dd * M), al0), d, ot + dd * M);
        hn::Store(hn::Mul(hn::Load(d, ot + dd * M + N), al1), d, ot + dd * M + N);
      }
      m0 = mn0;
      m1 = mn1;
    }
    VF sum0 = hn::Zero(d), sum1 = sum0;
    for (size_t j = 0; j < nk; ++j) {
      const VF p0 = hn::Exp(d, hn::Sub(hn::Load(d, s + j * M), ms0));
      const VF p1 = hn::Exp(d, hn::Sub(hn::Load(d, s + j * M + N), ms1));
      hn::Store(p0, d, s + j * M);
      hn::Store(p1, d, s + j * M + N);
      sum0 = hn::Add(sum0, p0);
      sum1 = hn::Add(sum1, p1);
    }
    l0 = hn::Add(l0, sum0);
    l1 = hn::Add(l1, sum1);
    // Oᵀ += Vᵀ-tile · P.
    const float* vt = vb + j0 * a.v.rowStride;
    size_t d0 = 0;
    for (; d0 + 8 <= D; d0 += 8) PVMicro<8>(d, s, nk, vt, a.v.rowStride, d0, ot, M);
    if (d0 + 4 <= D) {
      PVMicro<4>(d, s, nk, vt, a.v.rowStride, d0, ot, M);
      d0 += 4;
    }
    if (d0 + 2 <= D) {
      PVMicro<2>(d, s, nk, vt, a.v.rowStride, d0, ot, M);
      d0 += 2;
    }
    if (d0 < D) PVMicro<1>(d, s, nk, vt, a.v.rowStride, d0, ot, M);
  }

  // O = Oᵀ / l, transposed back; fully masked queries (l == 0) get 0.
  const VF one = hn::Set(d, 1.0f);
  const VF inv0 = hn::IfThenElseZero(hn::Gt(l0, hn::Zero(d)), hn::Div(one, l0));
  const VF inv1 = hn::IfThenElseZero(hn::Gt(l1, hn::Zero(d)), hn::Div(one, l1));
  float* obase = a.out + b * a.outBatchStride + h * a.outHeadStride + i0 * a.outRowStride;
  for (size_t dd = 0; dd < D; ++dd) {
    hn::Store(hn::Mul(hn::Load(d, ot + dd * M), inv0), d, lanebuf);
    hn::Store(hn::Mul(hn::Load(d, ot + dd * M + N), inv1), d, lanebuf + N);
    for (size_t r = 0; r < nq; ++r) obase[r * a.outRowStride + dd] = lanebuf[r];
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

}  // namespace HWY_NAMESPACE
}  // namespace transfuse::kernels
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
