// Attention of a decode step over a KV cache, fp32:
//
//   O[b,h,i,:] = Σ_j softmax_j(scale · Q[b,h,i,:]·K[b,h,j,:] + mask(b,i,j)) · V[b,h,j,:]
//
// for a few queries per sequence (Sq: 1 for a step of greedy or beam search,
// a few for a short prompt or a forced prefix) against the Sk keys cached so
// far, D (head_dim) 1..256.
//
// Layout: the cache keeps K transposed, keys contiguous: element (b,h,d,j) at
// k.data[b·batchStride + h·headStride + d·dimStride + j] (a [B, H, D, T]
// cache, T >= Sk its capacity; a step writes column Sk-1 of each of the D
// rows). So the scores of N keys are N vector lanes, Σ_d q[d]·Kᵀ[d, j..j+N),
// with no horizontal reduction: the loop that made the fused attention
// kernel slower than the unfused one at Sq <= 8. V is [B, H, T, D] rows
// (AttentionTensor, as are Q and O). Zero strides mean dense (T = Sk).
//
// Masks: causal (bottom-right aligned: query i sees keys j <= i + Sk - Sq),
// keyLengths [B] (keys j >= keyLengths[b] masked), keyMask [B, Sk] (0
// masks). A query whose keys are all masked yields exactly 0.
//
// Shared rows: with keyRowIds and valueRowIds ([B] each; a decoding state's
// row ids, exec/ModelDesc.h: rows of equal id hold equal data) and one query
// per row, up to 8 consecutive rows of equal K id, V id, key length and key
// mask row are one task that reads K and V once, from the first of them
// (the beams of one source over its cross-attention cache).
//
// Per (b, h) one task reads K and V once for all Sq queries' scores (queries
// in groups that fit the registers), then per query: the row maximum, 2^x
// weights (Exp2Fast, as attention() uses), their sum and O = P·V / sum over
// D in vector lanes. The scores of one task (Sq·Sk floats) live in a
// per-thread scratch buffer. Tasks write disjoint rows of O, so threaded
// results equal single-threaded ones bit for bit.
// Accuracy against a double-precision reference: |O - ref| <= 2e-5·(1 + |ref|)
// for inputs in [-1, 1] (tests/unit/kernels/decode_attention_test.cpp).
#ifndef TRANSFUSE_RUNTIME_KERNELS_DECODEATTENTION_H
#define TRANSFUSE_RUNTIME_KERNELS_DECODEATTENTION_H

#include "runtime/Status.h"
#include "runtime/kernels/Attention.h"

#include <cstddef>
#include <cstdint>

namespace transfuse::kernels {

// The transposed key cache: element (b, h, d, j) at data[b·batchStride +
// h·headStride + d·dimStride + j]. A zero stride triple means dense
// [B, H, D, Sk].
struct DecodeKeys {
  const float* data = nullptr;
  size_t batchStride = 0, headStride = 0, dimStride = 0;
};

struct DecodeAttentionArgs {
  size_t batch = 1, heads = 1, seqQ = 1, seqK = 0, headDim = 0;
  // Grouped-query attention as AttentionArgs::kvHeads: K and V have kvHeads
  // heads (0: heads). With one query per row, a task takes one K/V head and
  // all the query heads that read it, reading its K and V once.
  size_t kvHeads = 0;
  size_t kvHeadCount() const { return kvHeads ? kvHeads : heads; }
  size_t kvHead(size_t h) const { return kvHeads ? h / (heads / kvHeads) : h; }
  AttentionTensor q;  // [B, H, Sq, D]
  DecodeKeys k;       // [B, H, D, T]
  AttentionTensor v;  // [B, H, T, D]
  float* out = nullptr;
  size_t outBatchStride = 0, outHeadStride = 0, outRowStride = 0;  // 0: dense
  float scale = 1.0f;
  bool causal = false;
  const int32_t* keyLengths = nullptr;  // [B] or null
  const uint8_t* keyMask = nullptr;     // [B, Sk] or null
  const uint64_t* keyRowIds = nullptr;  // [B] or null: see "Shared rows"
  const uint64_t* valueRowIds = nullptr;
};

// Errors: headDim outside 1..256, a missing tensor.
rt::Status decodeAttention(const DecodeAttentionArgs& args, rt::ThreadPool* pool = nullptr);

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_DECODEATTENTION_H
