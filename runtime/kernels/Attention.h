// Scaled dot-product attention, fp32:
//
//   O[b,h,i,:] = Σ_j softmax_j(scale · Q[b,h,i,:]·K[b,h,j,:] + mask(b,h,i,j)) · V[b,h,j,:]
//
// for Q [B,H,Sq,D], K and V [B,H,Sk,D], O [B,H,Sq,D]; self (Sq == Sk) or cross
// attention (Sq != Sk). With grouped-query attention K and V have fewer heads
// ([B,Hkv,Sk,D], AttentionArgs::kvHeads), each read by H/Hkv query heads. D (head_dim) is 1..256; 64 and 128 are the tuned cases.
//
// Layout: the last dimension (D) is contiguous; batch, head and row strides
// are given in elements per tensor (AttentionTensor), so both the dense
// [B,H,S,D] layout (the default: strides H·S·D, S·D, D) and the projection
// layout [B,S,H,D] (strides S·H·D, D, H·D, no transpose needed after a fused QKV
// GEMM) are accepted. Pointers need no alignment; O must not overlap Q, K, V.
//
// Masks (any combination):
//   causal       bottom-right aligned: query i sees keys j <= i + Sk - Sq (the
//                decode step of a KV cache sees everything);
//   keyLengths   [B] int32: keys j >= keyLengths[b] are masked (key padding);
//   keyMask      [B, Sk] uint8: keyMask[b·Sk + j] == 0 masks key j;
//   additive     float, added to the scaled scores: mask(b,h,i,j) =
//                additive[b·sB + h·sH + i·sQ + j] (strides 0 broadcast: [Sq,Sk]
//                is sB = sH = 0, sQ = Sk); -inf masks.
// A query row whose keys are all masked yields exactly 0 (never NaN).
//
// attention() is the fused, flash-attention-style kernel: per (b, h, tile of
// 2 vectors of queries: 32 on AVX-512) it streams K and V in tiles of 72 keys
// with an online softmax, so the Sq×Sk scores are never materialized; causal
// key tiles wholly above the diagonal are skipped. Queries live in vector
// lanes of the score tile, so the softmax needs no horizontal reductions (see
// attention-inl.h for the micro-kernels). exp is a 2^x of ~2 ulp (softmax
// weights below 2^-126 of the row maximum's are flushed to 0).
// Accuracy against a double-precision reference: |O - ref| <= 2e-5·(1 + |ref|)
// for inputs in [-1, 1] (tests/unit/kernels/attention_test.cpp).
// Tasks (b, h, query tile) run on the thread pool, heaviest (last, for causal)
// query tiles first, one task per grab; each writes disjoint rows
// of O, so threaded results equal single-threaded ones bit for bit.
//
// attentionUnfused() is the composition the fusion replaces, built from the
// GEMM of Gemm.h: per (b, h), S = Q·Kᵀ (gemm, Kᵀ packed per call), scale and
// masks (one pass), row softmax (Norm.h), O = P·V (gemm), materializing S
// [Sq,Sk]; each step uses the pool. It does not skip causal work.
#ifndef TRANSFUSE_RUNTIME_KERNELS_ATTENTION_H
#define TRANSFUSE_RUNTIME_KERNELS_ATTENTION_H

#include "runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace transfuse::rt {
class ThreadPool;
}

namespace transfuse::kernels {

// One of Q, K, V, O (and the backward's dO, dQ, dK, dV): element (b, h, s, d)
// at data[b·batchStride + h·headStride + s·rowStride + d]. A zero stride
// triple means dense [B,H,S,D].
template <class T>
struct HeadsTensor {
  T* data = nullptr;
  size_t batchStride = 0, headStride = 0, rowStride = 0;
};
using AttentionTensor = HeadsTensor<const float>;

struct AttentionArgs {
  size_t batch = 1, heads = 1, seqQ = 0, seqK = 0, headDim = 0;
  // Grouped-query attention: K and V have kvHeads heads (0: heads), a
  // divisor of heads; query head h reads K/V head h / (heads / kvHeads).
  // Nothing is repeated: each K/V head is read where its queries need it.
  size_t kvHeads = 0;
  size_t kvHeadCount() const { return kvHeads ? kvHeads : heads; }
  size_t kvHead(size_t h) const { return kvHeads ? h / (heads / kvHeads) : h; }
  AttentionTensor q, k, v;
  float* out = nullptr;
  size_t outBatchStride = 0, outHeadStride = 0, outRowStride = 0;  // 0: dense
  float scale = 1.0f;  // usually 1/√headDim
  bool causal = false;
  const int32_t* keyLengths = nullptr;  // [B] or null
  const uint8_t* keyMask = nullptr;     // [B, Sk] or null
  const float* additive = nullptr;      // see the file comment
  size_t additiveBatchStride = 0, additiveHeadStride = 0, additiveRowStride = 0;
  // Dropout on the probabilities (training): P(b,h,i,j) is kept, scaled by
  // 1/(1 - rate), when philoxUniform(dropoutSeed, dropoutStep, dropoutStream,
  // ((b·H + h)·Sq + i)·Sk + j) >= rate (runtime/Philox.h). With a rate > 0
  // both entry points run the unfused composition (the mask needs P);
  // attention() runs it one task per (b, h).
  double dropoutRate = 0.0;
  uint64_t dropoutSeed = 0, dropoutStep = 0, dropoutStream = 0;
  // --dtype bf16 (docs/bf16.md): the products (Q·Kᵀ and P·V, and the
  // backward's five) on bf16 operands through Bf16Gemm.h, P rounded as the
  // second product reads it; scale, masks, softmax and dropout in fp32.
  // attention() then runs the unfused composition, one task per (b, h).
  bool bf16 = false;
};

// Fused attention. Errors: headDim outside 1..256, a missing tensor.
rt::Status attention(const AttentionArgs& args, rt::ThreadPool* pool = nullptr);

// Unfused attention (S materialized), same contract.
rt::Status attentionUnfused(const AttentionArgs& args, rt::ThreadPool* pool = nullptr);

// The backward of attention (transfuse.attention_grad): with P = softmax of
// the masked scores as above (recomputed from Q and K, FlashAttention's way:
// nothing of the forward is saved), Pd = dropout(P), g = dO [B,H,Sq,D]:
//   dV = Pdᵀ·g,  dP = dropout(g·Vᵀ) (the same mask and 1/(1-rate)),
//   dS = P ⊙ (dP - Σ_j dP ⊙ P) · scale,  dQ = dS·K,  dK = dSᵀ·Q.
// Dropout keeps probability (b,h,i,j) when philoxUniform(dropoutSeed,
// dropoutStep, dropoutStream, ((b·H + h)·Sq + i)·Sk + j) >= dropoutRate, the
// forward's draw (AttentionArgs). A fully masked row has P = 0 and
// no gradient. The forward's `out` is unused. dO, dQ, dK and dV take any
// strides, like Q, K and V (a compiled train step reads dO out of the
// gradient of the [B, S, H·D] projection input and writes dQ, dK and dV into
// column ranges of the fused projection's gradient); the outputs must not
// overlap each other or the inputs. Their values do not depend on the
// strides.
// Work: one task per (b, K/V head) on the pool, five GEMMs (Gemm.h) per
// query head over one Sq×Sk tile of probabilities (transient, per thread:
// 2·Sq·Sk floats); with grouped K/V heads the group's dK and dV are summed
// over its query heads in head order. Threaded results equal
// single-threaded ones bit for bit.
struct AttentionGradArgs {
  AttentionArgs forward;  // Q, K, V, masks, scale, dropout (`out` unused)
  AttentionTensor grad;   // dO [B,H,Sq,D]
  HeadsTensor<float> dq, dk, dv;
};
rt::Status attentionBackward(const AttentionGradArgs& args, rt::ThreadPool* pool = nullptr);

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_ATTENTION_H
