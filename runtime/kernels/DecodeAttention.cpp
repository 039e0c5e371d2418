// DecodeAttention.h: dispatch, strides and threading. Per-target code:
// decode_attention-inl.h.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/DecodeAttention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "runtime/kernels/decode_attention-inl.h"

#if HWY_ONCE
#include "runtime/kernels/DecodeAttention.h"

#include <string>

namespace transfuse::kernels {

HWY_EXPORT(DecodeAttentionRun);

rt::Status decodeAttention(const DecodeAttentionArgs& args, rt::ThreadPool* pool) {
  DecodeAttentionArgs a = args;
  if (a.headDim == 0 || a.headDim > 256)
    return rt::Status::error("decode attention: head_dim " + std::to_string(a.headDim) +
                             " is outside 1..256");
  if (a.kvHeads != 0 && a.heads % a.kvHeads != 0)
    return rt::Status::error("decode attention: " + std::to_string(a.kvHeads) +
                             " key/value heads do not divide " + std::to_string(a.heads) +
                             " query heads");
  if (a.batch * a.heads * a.seqQ == 0) return rt::Status::ok();
  if (!a.q.data || !a.out || (a.seqK > 0 && (!a.k.data || !a.v.data)))
    return rt::Status::error("decode attention: Q, K, V and the output must be given");
  const size_t D = a.headDim;
  auto dense = [&](AttentionTensor& t, size_t S, size_t heads) {
    if (t.batchStride == 0 && t.headStride == 0 && t.rowStride == 0) {
      t.rowStride = D;
      t.headStride = S * D;
      t.batchStride = heads * S * D;
    }
  };
  dense(a.q, a.seqQ, a.heads);
  dense(a.v, a.seqK, a.kvHeadCount());
  if (a.k.batchStride == 0 && a.k.headStride == 0 && a.k.dimStride == 0) {
    a.k.dimStride = a.seqK;
    a.k.headStride = D * a.seqK;
    a.k.batchStride = a.kvHeadCount() * D * a.seqK;
  }
  if (a.outBatchStride == 0 && a.outHeadStride == 0 && a.outRowStride == 0) {
    a.outRowStride = D;
    a.outHeadStride = a.seqQ * D;
    a.outBatchStride = a.heads * a.seqQ * D;
  }
  HWY_DYNAMIC_DISPATCH(DecodeAttentionRun)(a, pool);
  return rt::Status::ok();
}

}  // namespace transfuse::kernels
#endif  // HWY_ONCE
