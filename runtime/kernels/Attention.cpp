// Attention.h: dispatch, threading, the unfused composition and the
// driver-facing benchmark. Per-target code: attention-inl.h.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/Attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "runtime/kernels/attention-inl.h"

#if HWY_ONCE
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Attention.h"
#include "runtime/kernels/Bf16Gemm.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/Gemm.h"
#include "runtime/kernels/Norm.h"
#include "runtime/kernels/Parallel.h"
#include "runtime/kernels/Targets.h"

#include <hwy/aligned_allocator.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

namespace transfuse::kernels {

HWY_EXPORT(AttentionRun);
HWY_EXPORT(ScaleAndMaskRows);

namespace {

// Dense [B,H,S,D] strides for a zero stride triple (H: `heads`).
template <class T>
void dense(const AttentionArgs& a, HeadsTensor<T>& t, size_t S, size_t heads) {
  if (t.batchStride == 0 && t.headStride == 0 && t.rowStride == 0) {
    t.rowStride = a.headDim;
    t.headStride = S * a.headDim;
    t.batchStride = heads * S * a.headDim;
  }
}

// Fills rows [0, S) of every (b, h < heads) of t with zeros.
void zeroHeads(const AttentionArgs& a, const HeadsTensor<float>& t, size_t S, size_t heads) {
  for (size_t b = 0; b < a.batch; ++b)
    for (size_t h = 0; h < heads; ++h)
      for (size_t s = 0; s < S; ++s)
        std::fill_n(t.data + b * t.batchStride + h * t.headStride + s * t.rowStride, a.headDim,
                    0.0f);
}

// Validates and fills in dense strides for zero stride triples.
rt::Status resolve(const AttentionArgs& in, AttentionArgs& a) {
  a = in;
  if (a.headDim == 0 || a.headDim > 256)
    return rt::Status::error("attention: head_dim " + std::to_string(a.headDim) +
                             " is outside 1..256");
  if (!(a.dropoutRate >= 0.0 && a.dropoutRate < 1.0))
    return rt::Status::error("attention: dropout rate " + std::to_string(a.dropoutRate) +
                             " is outside [0, 1)");
  if (a.kvHeads != 0 && a.heads % a.kvHeads != 0)
    return rt::Status::error("attention: " + std::to_string(a.kvHeads) +
                             " key/value heads do not divide " + std::to_string(a.heads) +
                             " query heads");
  if (a.batch * a.heads * a.seqQ == 0) return rt::Status::ok();
  if (!a.q.data || !a.out || (a.seqK > 0 && (!a.k.data || !a.v.data)))
    return rt::Status::error("attention: Q, K, V and the output must be given");
  dense(a, a.q, a.seqQ, a.heads);
  dense(a, a.k, a.seqK, a.kvHeadCount());
  dense(a, a.v, a.seqK, a.kvHeadCount());
  if (a.outBatchStride == 0 && a.outHeadStride == 0 && a.outRowStride == 0) {
    a.outRowStride = a.headDim;
    a.outHeadStride = a.seqQ * a.headDim;
    a.outBatchStride = a.heads * a.seqQ * a.headDim;
  }
  return rt::Status::ok();
}

}  // namespace

// Dropout of one head's [Sq, Sk] block (probabilities, or their gradient
// through the same mask): AttentionArgs' draw at that head's indices.
static void dropoutHead(const AttentionArgs& a, size_t b, size_t h, float* P) {
  const size_t n = a.seqQ * a.seqK;
  dropout(P, P, n, a.dropoutRate, a.dropoutSeed, a.dropoutStep, a.dropoutStream,
          (b * a.heads + h) * n);
}

// One of attention's products: fp32 (Gemm.h), or on bf16 operands
// (Bf16Gemm.h) under AttentionArgs::bf16.
static void product(const AttentionArgs& a, size_t M, size_t N, size_t K, const float* A,
                    size_t lda, bool transA, const float* B, size_t ldb, bool transB, float* C,
                    size_t ldc, rt::ThreadPool* pool = nullptr) {
  if (a.bf16)
    gemmBf16(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, {}, pool);
  else
    gemm(M, N, K, A, lda, transA, B, ldb, transB, C, ldc, {}, pool);
}

// One head of the unfused composition into `s` [Sq, Sk] (Sk > 0): S = Q·Kᵀ,
// scale and masks, row softmax, dropout, O = P·V, each step on `pool`.
static void unfusedHead(const AttentionArgs& a, size_t b, size_t h, float* s,
                        rt::ThreadPool* pool) {
  const size_t Sq = a.seqQ, Sk = a.seqK, D = a.headDim;
  const float* qb = a.q.data + b * a.q.batchStride + h * a.q.headStride;
  const float* kb = a.k.data + b * a.k.batchStride + a.kvHead(h) * a.k.headStride;
  const float* vb = a.v.data + b * a.v.batchStride + a.kvHead(h) * a.v.headStride;
  float* ob = a.out + b * a.outBatchStride + h * a.outHeadStride;
  auto* mask = HWY_DYNAMIC_DISPATCH(ScaleAndMaskRows);
  product(a, Sq, Sk, D, qb, a.q.rowStride, /*transA=*/false, kb, a.k.rowStride, /*transB=*/true, s,
          Sk, pool);
  parallelFor(pool, Sq, std::max<size_t>(1, 4096 / Sk),
              [&](size_t r0, size_t r1) { mask(a, b, h, s, r0, r1); });
  softmax(s, s, Sq, Sk, pool);
  if (a.dropoutRate > 0.0) dropoutHead(a, b, h, s);
  product(a, Sq, D, Sk, s, Sk, false, vb, a.v.rowStride, false, ob, a.outRowStride, pool);
}

// Attention with dropout (the mask needs P) or in bf16: the unfused
// composition, one task per (b, h) so that small heads do not pay a pool
// call per step.
static rt::Status attentionPerHead(const AttentionArgs& args, rt::ThreadPool* pool) {
  AttentionArgs a;
  if (rt::Status st = resolve(args, a); !st) return st;
  if (a.batch * a.heads * a.seqQ == 0 || a.seqK == 0) return attentionUnfused(args, pool);
  parallelTasks(pool, a.batch * a.heads, [&](size_t t0, size_t t1) {
    std::vector<float> s(a.seqQ * a.seqK);
    for (size_t t = t0; t < t1; ++t) unfusedHead(a, t / a.heads, t % a.heads, s.data(), nullptr);
  });
  return rt::Status::ok();
}

rt::Status attention(const AttentionArgs& args, rt::ThreadPool* pool) {
  if (args.dropoutRate > 0.0 || args.bf16) return attentionPerHead(args, pool);
  AttentionArgs a;
  if (rt::Status st = resolve(args, a); !st) return st;
  if (a.batch * a.heads * a.seqQ == 0) return rt::Status::ok();
  HWY_DYNAMIC_DISPATCH(AttentionRun)(a, pool);
  return rt::Status::ok();
}

rt::Status attentionUnfused(const AttentionArgs& args, rt::ThreadPool* pool) {
  AttentionArgs a;
  if (rt::Status st = resolve(args, a); !st) return st;
  if (a.batch * a.heads * a.seqQ == 0) return rt::Status::ok();
  const size_t Sq = a.seqQ, Sk = a.seqK;
  if (Sk == 0) {  // no keys: every row is fully masked
    zeroHeads(a, {a.out, a.outBatchStride, a.outHeadStride, a.outRowStride}, Sq, a.heads);
    return rt::Status::ok();
  }
  // Per (b, h): S = Q·Kᵀ (GEMM, Kᵀ packed per call), scale + masks, row
  // softmax, O = P·V (GEMM, V packed per call); each step uses the pool.
  auto S = hwy::AllocateAligned<float>(Sq * Sk);
  for (size_t b = 0; b < a.batch; ++b)
    for (size_t h = 0; h < a.heads; ++h) unfusedHead(a, b, h, S.get(), pool);
  return rt::Status::ok();
}

rt::Status attentionBackward(const AttentionGradArgs& args, rt::ThreadPool* pool) {
  AttentionArgs a;
  AttentionArgs in = args.forward;
  in.out = args.dq.data;  // resolve() wants an output (unused)
  if (rt::Status st = resolve(in, a); !st) return st;
  const size_t B = a.batch, H = a.heads, Hkv = a.kvHeadCount(), G = H / Hkv;
  const size_t Sq = a.seqQ, Sk = a.seqK, D = a.headDim;
  if ((B * H * Sq * D > 0 && (!args.grad.data || !args.dq.data)) ||
      (B * H * Sk * D > 0 && (!args.dk.data || !args.dv.data)))
    return rt::Status::error("attention backward: dO, dQ, dK and dV must be given");
  AttentionTensor grad = args.grad;
  HeadsTensor<float> dQ = args.dq, dK = args.dk, dV = args.dv;
  dense(a, grad, Sq, H);
  dense(a, dQ, Sq, H);
  dense(a, dK, Sk, Hkv);
  dense(a, dV, Sk, Hkv);
  if (B * H * Sq * Sk == 0) {  // no queries or no keys: every gradient is 0
    zeroHeads(a, dQ, Sq, H);
    zeroHeads(a, dK, Sk, Hkv);
    zeroHeads(a, dV, Sk, Hkv);
    return rt::Status::ok();
  }
  auto* mask = HWY_DYNAMIC_DISPATCH(ScaleAndMaskRows);
  const bool drop = a.dropoutRate > 0.0;
  auto task = [&](size_t t0, size_t t1) {
    // One head's P, dP (and dropout's Pd) at a time per task range; a
    // group's later heads' dK and dV in `part`, added in head order.
    std::vector<float> P(Sq * Sk), dP(Sq * Sk), Pd(drop ? Sq * Sk : 0);
    std::vector<float> part(G > 1 ? 2 * Sk * D : 0);
    for (size_t t = t0; t < t1; ++t) {
      const size_t b = t / Hkv, kh = t % Hkv;
      const float* k = a.k.data + b * a.k.batchStride + kh * a.k.headStride;
      const float* v = a.v.data + b * a.v.batchStride + kh * a.v.headStride;
      float* dk = dK.data + b * dK.batchStride + kh * dK.headStride;
      float* dv = dV.data + b * dV.batchStride + kh * dV.headStride;
      for (size_t h = kh * G; h < (kh + 1) * G; ++h) {
        const float* q = a.q.data + b * a.q.batchStride + h * a.q.headStride;
        const float* g = grad.data + b * grad.batchStride + h * grad.headStride;
        float* dq = dQ.data + b * dQ.batchStride + h * dQ.headStride;
        const bool first = h == kh * G;
        // The first head writes dK and dV; the others write `part` [2, Sk, D].
        float* dkh = first ? dk : part.data();
        float* dvh = first ? dv : part.data() + Sk * D;
        const size_t ldk = first ? dK.rowStride : D, ldv = first ? dV.rowStride : D;
        product(a, Sq, Sk, D, q, a.q.rowStride, false, k, a.k.rowStride, /*transB=*/true,
                P.data(), Sk);
        mask(a, b, h, P.data(), 0, Sq);
        softmax(P.data(), P.data(), Sq, Sk);
        const float* pd = P.data();
        if (drop) {  // the forward's mask, regenerated
          std::copy(P.begin(), P.end(), Pd.begin());
          dropoutHead(a, b, h, Pd.data());
          pd = Pd.data();
        }
        product(a, Sk, D, Sq, pd, Sk, /*transA=*/true, g, grad.rowStride, false, dvh, ldv);
        product(a, Sq, Sk, D, g, grad.rowStride, false, v, a.v.rowStride, /*transB=*/true,
                dP.data(), Sk);
        if (drop) dropoutHead(a, b, h, dP.data());  // dP through the same mask
        for (size_t i = 0; i < Sq; ++i) {  // dS = P ⊙ (dP - Σ_j dP ⊙ P) · scale
          float* dpRow = dP.data() + i * Sk;
          const float* pRow = P.data() + i * Sk;
          double dot = 0.0;
          for (size_t j = 0; j < Sk; ++j) dot += static_cast<double>(dpRow[j]) * pRow[j];
          const float rowDot = static_cast<float>(dot);
          for (size_t j = 0; j < Sk; ++j) dpRow[j] = pRow[j] * (dpRow[j] - rowDot) * a.scale;
        }
        product(a, Sq, D, Sk, dP.data(), Sk, false, k, a.k.rowStride, false, dq, dQ.rowStride);
        product(a, Sk, D, Sq, dP.data(), Sk, /*transA=*/true, q, a.q.rowStride, false, dkh, ldk);
        if (first) continue;
        for (size_t j = 0; j < Sk; ++j)
          for (size_t e = 0; e < D; ++e) {
            dk[j * dK.rowStride + e] += dkh[j * D + e];
            dv[j * dV.rowStride + e] += dvh[j * D + e];
          }
      }
    }
  };
  parallelTasks(pool, B * Hkv, task);
  return rt::Status::ok();
}

}  // namespace transfuse::kernels
#endif  // HWY_ONCE
