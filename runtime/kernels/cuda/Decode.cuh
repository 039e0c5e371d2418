// CUDA kernels of a decode step over a KV cache held in device memory, with
// the contracts of their CPU counterparts (runtime/kernels/DecodeAttention.h,
// runtime/exec/Ops.h's stateWrite and stateRead):
//
// A state tensor holds, per row b and head h, `positions` (T, its capacity)
// cached positions of D floats: keys transposed [R, H, D, T] (`keys`: the
// positions of one dimension contiguous), values [R, H, T, D].
//
//   stateWrite: in (b, h, s, d) [B, H, n, D] (strided; zero strides: dense)
//               -> state position `position + s` of row b
//   stateRead:  positions [0, n) of rows [0, B) -> a dense [B, H, n, D]
//   decodeAttention:
//     O[b,h,i,:] = Σ_j softmax_j(scale · Q[b,h,i,:]·K[b,h,:,j] + mask(b,i,j)) · V[b,h,j,:]
//     for Sq queries (a few) against Sk cached keys; masks: causal (bottom-
//     right aligned: query i sees keys j <= i + Sk - Sq) and keyMask [B, Sk]
//     (0 masks); a query whose keys are all masked yields 0.
//
// decodeAttention runs one block of 128 threads per (b, h, query): the
// threads score the keys (a coalesced read of K's contiguous positions per
// dimension), the Sk scores live in shared memory, a block reduction gives
// their maximum and sum, and each thread accumulates O for its share of D
// (V rows read along D, coalesced). The scores take (D + Sk) floats of
// shared memory: Sk up to about 40 000 on sm_80 and 57 000 on sm_90 (past
// that the launch fails; a flash-decoding split over Sk is the next step).
// Device pointers, asynchronous on
// `stream`; the return value is the launch's error (cudaErrorInvalidValue
// for a head dimension outside 1..256 or missing tensors).
#ifndef TRANSFUSE_RUNTIME_KERNELS_CUDA_DECODE_CUH
#define TRANSFUSE_RUNTIME_KERNELS_CUDA_DECODE_CUH

#include "runtime/kernels/cuda/Attention.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace transfuse::cuda {

// T: the storage type of the cache and the tensors (float, or bf16 read
// into fp32: Storage.cuh).
template <class T>
struct StateTensorOf {
  T* data = nullptr;
  size_t heads = 0, positions = 0, headDim = 0;
  bool keys = false;  // [R, H, D, T] (else [R, H, T, D])
};
using StateTensor = StateTensorOf<float>;

cudaError_t stateWrite(const AttentionTensorOf<float>& in, size_t batch, size_t n,
                       StateTensorOf<float> state, size_t position, cudaStream_t stream = nullptr);
cudaError_t stateWrite(const AttentionTensorOf<bf16>& in, size_t batch, size_t n,
                       StateTensorOf<bf16> state, size_t position, cudaStream_t stream = nullptr);

cudaError_t stateRead(StateTensorOf<float> state, size_t batch, size_t n, float* out,
                      cudaStream_t stream = nullptr);
cudaError_t stateRead(StateTensorOf<bf16> state, size_t batch, size_t n, bf16* out,
                      cudaStream_t stream = nullptr);

// The transposed key cache: element (b, h, d, j) at data[b·batchStride +
// h·headStride + d·dimStride + j].
template <class T>
struct DecodeKeysOf {
  const T* data = nullptr;
  size_t batchStride = 0, headStride = 0, dimStride = 0;
};
using DecodeKeys = DecodeKeysOf<float>;

template <class T>
struct DecodeAttentionArgsOf {
  size_t batch = 1, heads = 1, seqQ = 1, seqK = 0, headDim = 0;
  size_t kvHeads = 0;  // grouped-query attention, as AttentionArgsOf's (0: heads)
  AttentionTensorOf<T> q;  // [B, H, Sq, D], zero strides: dense
  DecodeKeysOf<T> k;       // [B, H, D, T]
  AttentionTensorOf<T> v;  // [B, H, T, D]
  T* out = nullptr;
  size_t outBatchStride = 0, outHeadStride = 0, outRowStride = 0;  // all 0: dense
  float scale = 1.0f;
  bool causal = false;
  const uint8_t* keyMask = nullptr;  // [B, Sk] or null
};
using DecodeAttentionArgs = DecodeAttentionArgsOf<float>;

cudaError_t decodeAttention(const DecodeAttentionArgsOf<float>& args, cudaStream_t stream = nullptr);
cudaError_t decodeAttention(const DecodeAttentionArgsOf<bf16>& args, cudaStream_t stream = nullptr);

}  // namespace transfuse::cuda

#endif  // TRANSFUSE_RUNTIME_KERNELS_CUDA_DECODE_CUH
