// What the CUDA attention kernels share (Attention.cu, AttentionBf16.cu):
// tensor strides and which keys a query sees. Internal to the kernels.
#ifndef TRANSFUSE_RUNTIME_KERNELS_CUDA_ATTENTIONCOMMON_CUH
#define TRANSFUSE_RUNTIME_KERNELS_CUDA_ATTENTIONCOMMON_CUH

#include <cuda_runtime.h>

#include "runtime/Philox.h"

#include <cstddef>
#include <cstdint>

namespace transfuse::cuda::attention_detail {

// Element strides of a [B, H, S, D] tensor.
struct Strides {
  size_t batch, head, row;
};

// The given strides, or a dense tensor's when all are 0.
inline Strides resolve(size_t batch, size_t head, size_t row, size_t H, size_t S, size_t D) {
  if (batch == 0 && head == 0 && row == 0) return {H * S * D, S * D, D};
  return {batch, head, row};
}

// Keys [0, end) that query i of batch row b sees (0 for a query past Sq):
// key lengths, and causal aligned bottom-right (query i sees keys up to
// i + Sk - Sq). Params has Sq, Sk, causal and keyLengths.
template <class Params>
__device__ int visibleKeys(const Params& p, int b, int i) {
  if (i >= p.Sq) return 0;
  int end = p.Sk;
  if (p.keyLengths) end = min(end, max(p.keyLengths[b], 0));
  if (p.causal) end = min(end, i + p.Sk - p.Sq + 1);
  return max(end, 0);
}

// Dropout on attention probabilities, the CPU's draws (runtime/Philox.h):
// (b, h, i, j) is kept when philoxUniform(seed, step, stream, ((b·H + h)·Sq
// + i)·Sk + j) >= rate; a kept value is scaled by `keep`.
struct Dropout {
  bool on = false;
  uint32_t threshold = 0;
  float keep = 1.0f;
  uint64_t seed = 0, step = 0, stream = 0;

  template <class Args>
  static Dropout of(const Args& a) {
    return {a.dropoutRate > 0.0, rt::dropoutThreshold(a.dropoutRate),
            rt::dropoutKeepScale(a.dropoutRate), a.dropoutSeed, a.dropoutStep, a.dropoutStream};
  }
  __device__ bool kept(int H, int Sq, int Sk, int b, int h, int i, int j) const {
    const uint64_t index = ((uint64_t(b) * H + h) * Sq + i) * Sk + j;
    uint32_t w[4];
    rt::philoxBlockWords(seed, step, stream, index >> 2, w);
    return rt::dropoutKept(w[index & 3], threshold);
  }
};

// The kernel parameters both kernels take, from their Args: sizes, the
// tensors with their strides resolved, scale and masks.
template <class Params, class Args>
void setCommon(Params& p, const Args& a) {
  const size_t H = a.heads, D = a.headDim, Hkv = a.kvHeadCount();
  p.H = static_cast<int>(H);
  p.G = static_cast<int>(H / Hkv);  // query heads per K/V head
  p.Sq = static_cast<int>(a.seqQ);
  p.Sk = static_cast<int>(a.seqK);
  p.q = a.q.data;
  p.k = a.k.data;
  p.v = a.v.data;
  p.out = a.out;
  p.qs = resolve(a.q.batchStride, a.q.headStride, a.q.rowStride, H, a.seqQ, D);
  p.ks = resolve(a.k.batchStride, a.k.headStride, a.k.rowStride, Hkv, a.seqK, D);
  p.vs = resolve(a.v.batchStride, a.v.headStride, a.v.rowStride, Hkv, a.seqK, D);
  p.os = resolve(a.outBatchStride, a.outHeadStride, a.outRowStride, H, a.seqQ, D);
  p.scale = a.scale;
  p.causal = a.causal;
  p.keyLengths = a.keyLengths;
}

}  // namespace transfuse::cuda::attention_detail

#endif  // TRANSFUSE_RUNTIME_KERNELS_CUDA_ATTENTIONCOMMON_CUH
