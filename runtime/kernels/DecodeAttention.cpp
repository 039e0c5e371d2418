// DecodeAttention.h: dispatch, strides and threading. Per-target code:
// decode_attention-inl.h.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/DecodeAttention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "runtime/kernels/decode_attention-inl.h"

#if HWY_ONCE
#include "runtime/ThreadPool.h"
#include "runtime/kernels/DecodeAttention.h"
#include "runtime/kernels/Parallel.h"

#include <algorithm>
#include <string>
#include <vector>

namespace transfuse::kernels {

// Shared rows per task: one pass of ScoreGroup's query group.
constexpr size_t kDecodeMaxSharedRows = 8;

HWY_EXPORT(DecodeAttentionTask);
HWY_EXPORT(DecodeScratchFloats);

rt::Status decodeAttention(const DecodeAttentionArgs& args, rt::ThreadPool* pool) {
  DecodeAttentionArgs a = args;
  if (a.headDim == 0 || a.headDim > 256)
    return rt::Status::error("decode attention: head_dim " + std::to_string(a.headDim) +
                             " is outside 1..256");
  if (a.batch * a.heads * a.seqQ == 0) return rt::Status::ok();
  if (!a.q.data || !a.out || (a.seqK > 0 && (!a.k.data || !a.v.data)))
    return rt::Status::error("decode attention: Q, K, V and the output must be given");
  const size_t D = a.headDim;
  auto dense = [&](AttentionTensor& t, size_t S) {
    if (t.batchStride == 0 && t.headStride == 0 && t.rowStride == 0) {
      t.rowStride = D;
      t.headStride = S * D;
      t.batchStride = a.heads * S * D;
    }
  };
  dense(a.q, a.seqQ);
  dense(a.v, a.seqK);
  if (a.k.batchStride == 0 && a.k.headStride == 0 && a.k.dimStride == 0) {
    a.k.dimStride = a.seqK;
    a.k.headStride = D * a.seqK;
    a.k.batchStride = a.heads * D * a.seqK;
  }
  if (a.outBatchStride == 0 && a.outHeadStride == 0 && a.outRowStride == 0) {
    a.outRowStride = D;
    a.outHeadStride = a.seqQ * D;
    a.outBatchStride = a.heads * a.seqQ * D;
  }
  // Tasks: (first row, rows) × heads; rows > 1 only for shared rows.
  std::vector<std::pair<size_t, size_t>> groups;
  const bool share = a.seqQ == 1 && a.keyRowIds && a.valueRowIds;
  for (size_t b = 0; b < a.batch; ++b) {
    if (share && !groups.empty()) {
      auto& [b0, rows] = groups.back();
      const bool same = rows < kDecodeMaxSharedRows && a.keyRowIds[b] == a.keyRowIds[b0] &&
                        a.valueRowIds[b] == a.valueRowIds[b0] &&
                        (!a.keyLengths || a.keyLengths[b] == a.keyLengths[b0]) &&
                        (!a.keyMask || std::equal(a.keyMask + b * a.seqK, a.keyMask + (b + 1) * a.seqK,
                                                  a.keyMask + b0 * a.seqK));
      if (same) {
        ++rows;
        continue;
      }
    }
    groups.push_back({b, 1});
  }
  const size_t queries = std::max(a.seqQ, share ? kDecodeMaxSharedRows : size_t{1});
  const size_t scratch = HWY_DYNAMIC_DISPATCH(DecodeScratchFloats)(queries, a.seqK, D);
  auto* task = HWY_DYNAMIC_DISPATCH(DecodeAttentionTask);
  auto run = [&](size_t t0, size_t t1) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < scratch) buffer.resize(scratch);
    for (size_t t = t0; t < t1; ++t) {
      const auto [b, rows] = groups[t / a.heads];
      task(a, b, rows, t % a.heads, buffer.data());
    }
  };
  parallelTasks(pool, groups.size() * a.heads, run);
  return rt::Status::ok();
}

}  // namespace transfuse::kernels
#endif  // HWY_ONCE
