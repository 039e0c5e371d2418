// CUDA fused attention forward, fp32, with the contract of the CPU kernel
// (runtime/kernels/Attention.h):
//
//   O[b,h,i,:] = Σ_j softmax_j(scale · Q[b,h,i,:]·K[b,h,j,:] + mask(b,i,j)) · V[b,h,j,:]
//
// Q and O [B,H,Sq,D], K and V [B,H,Sk,D], each with (batch, head, row)
// element strides (all zero: dense); D (head_dim) 1..256. Masks: causal
// (bottom-right aligned: query i sees keys j <= i + Sk - Sq), key
// lengths [B] (device memory; keys j >= keyLengths[b] masked) and a key
// mask [B, Sk] of bytes (the CPU kernel's keyMask: keyMask[b·Sk + j] == 0
// masks key j). A query whose keys are all masked yields 0.
//
// Flash-attention style, CUDA cores (the tensor-core bf16 path is
// AttentionBf16.cuh): a block of 128 threads per (b, h, tile of 32 queries), 4
// threads per query. The Q tile and a K and a V tile of 32 keys live in
// shared memory; each thread scores 8 keys of its query, the online softmax
// (running maximum and sum, rescaling O) is reduced over a query's 4 threads
// with warp shuffles, and each thread accumulates a quarter of the query's
// D outputs (interleaved), so the Sq×Sk scores are never stored. Key tiles
// past a block's last visible key (causal, key lengths) are not loaded.
#ifndef TRANSFUSE_RUNTIME_KERNELS_CUDA_ATTENTION_CUH
#define TRANSFUSE_RUNTIME_KERNELS_CUDA_ATTENTION_CUH

#include "runtime/kernels/cuda/Storage.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace transfuse::cuda {

// T: the storage type of Q, K, V and O (float, or bf16 read into fp32:
// Storage.cuh).
template <class T>
struct AttentionTensorOf {
  const T* data = nullptr;  // device memory
  size_t batchStride = 0, headStride = 0, rowStride = 0;  // all 0: dense
};
using AttentionTensor = AttentionTensorOf<float>;

template <class T>
struct AttentionArgsOf {
  size_t batch = 1, heads = 1, seqQ = 0, seqK = 0, headDim = 0;
  // Grouped-query attention as on the CPU (kernels::AttentionArgs): K and V
  // have kvHeads heads (0: heads); query head h reads K/V head h·kvHeads/heads.
  size_t kvHeads = 0;
  size_t kvHeadCount() const { return kvHeads ? kvHeads : heads; }
  AttentionTensorOf<T> q, k, v;
  T* out = nullptr;
  size_t outBatchStride = 0, outHeadStride = 0, outRowStride = 0;  // all 0: dense
  float scale = 1.0f;
  bool causal = false;
  const int32_t* keyLengths = nullptr;  // [B], device memory, or null
  const uint8_t* keyMask = nullptr;     // [B, Sk], device memory, or null
  // Dropout on the probabilities (training), as on the CPU: P[b,h,i,j] is
  // kept, times 1/(1 - rate), when philoxUniform(dropoutSeed, dropoutStep,
  // dropoutStream, ((b·H + h)·Sq + i)·Sk + j) >= dropoutRate (runtime/
  // Philox.h), else 0; the softmax's sum is of the kept and dropped alike.
  double dropoutRate = 0.0;
  uint64_t dropoutSeed = 0, dropoutStep = 0, dropoutStream = 0;
};
using AttentionArgs = AttentionArgsOf<float>;

// Asynchronous on `stream`; cudaErrorInvalidValue for a head_dim outside
// 1..256 or a missing tensor, else the launch's error.
// The bf16 form runs on tensor cores (attentionBf16, AttentionBf16.cuh)
// where that kernel takes the call (head dim 64 or 128, no key mask or
// dropout), else on this kernel in fp32 from bf16 loads.
cudaError_t attention(const AttentionArgsOf<float>& args, cudaStream_t stream = nullptr);
cudaError_t attention(const AttentionArgsOf<bf16>& args, cudaStream_t stream = nullptr);

// The backward (attention_grad), with the CPU kernel's contract
// (kernels::attentionBackward, runtime/kernels/Attention.h): from Q, K, V,
// the masks and dO, with P = softmax(scale·QKᵀ + masks), Pd = dropout(P),
//   dV = Pdᵀ·dO,  dP = dropout(dO·Vᵀ),  dS = P ⊙ (dP - rowsum(dP ⊙ P))·scale,
//   dQ = dS·K,  dK = dSᵀ·Q
// with the forward's dropout draws. Nothing of S×S is stored: a first
// kernel recomputes each query's log-sum-exp and rowsum(dP ⊙ P) (into
// `work`, 2·B·H·Sq floats), then one computes dQ a query per warp and one
// dK and dV a key per warp, each recomputing the scores it needs. Every output element is one
// thread's sum in key (or query) order: no atomics, the same bits on every
// run. A fully masked query gets dQ = 0; a key no query sees, dK = dV = 0.
// With grouped K/V heads, a key's warp sums over its group's query heads in
// head order.
struct AttentionGradTensor {
  float* data = nullptr;  // device memory
  size_t batchStride = 0, headStride = 0, rowStride = 0;  // all 0: dense
};
struct AttentionGradArgs {
  AttentionArgs forward;   // Q, K, V, masks, scale, dropout (`out` unused)
  AttentionTensor grad;    // dO [B,H,Sq,D]
  AttentionGradTensor dq, dk, dv;
};
cudaError_t attentionBackward(const AttentionGradArgs& args, float* work,
                              cudaStream_t stream = nullptr);

}  // namespace transfuse::cuda

#endif  // TRANSFUSE_RUNTIME_KERNELS_CUDA_ATTENTION_CUH
