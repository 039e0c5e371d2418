// CUDA fused attention forward on tensor cores: bf16 Q, K, V and
// O, fp32 accumulation and softmax, with the contract of attention()
// (Attention.cuh):
//
//   O[b,h,i,:] = Σ_j softmax_j(scale · Q[b,h,i,:]·K[b,h,j,:] + mask(b,i,j)) · V[b,h,j,:]
//
// Q, K, V and O [B, H, S, D] with (batch, head, row) element strides (all
// zero: dense), D = 64 or 128; masks: causal (bottom-right aligned) and key
// lengths [B]; a query whose keys are all masked yields 0.
//
// FlashAttention style with WMMA (mma.sync, sm_80 and later): a block of 4
// warps takes 64 queries, each warp 16; K and V tiles of 64 keys are staged
// in shared memory; per tile a warp computes its 16×64 scores with bf16
// MMAs into fp32, runs the online softmax on them (2 lanes per query row),
// writes the weights P as bf16 and adds P·V into its fp32 O rows (kept in
// shared memory, rescaled by the running maximum's change). The S×S scores
// are never stored beyond one tile. Accuracy: P is rounded to bf16, as in
// FlashAttention; tests/gpu holds it to the FlashAttention rule (at most 2×
// the error of the unfused computation in bf16 against an fp32 reference).
// Shared memory: 66 KB (D = 64) and 107 KB (D = 128), within sm_80's and
// sm_90's limits but over sm_86's and sm_89's 99 KB for D = 128 (the call
// fails there); keeping O in registers would lift that and is the next step,
// with the bank conflicts of the softmax's row access.
#ifndef TRANSFUSE_RUNTIME_KERNELS_CUDA_ATTENTIONBF16_CUH
#define TRANSFUSE_RUNTIME_KERNELS_CUDA_ATTENTIONBF16_CUH

#include "runtime/kernels/cuda/Attention.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace transfuse::cuda {

using Bf16Tensor = AttentionTensorOf<bf16>;
using AttentionBf16Args = AttentionArgsOf<bf16>;

// Whether attentionBf16 takes `args`: head dim 64 or 128, strides that are
// multiples of 8 elements, no key mask, no dropout (attention() runs the
// rest on the CUDA cores).
bool attentionBf16Takes(const AttentionBf16Args& args);

// Asynchronous on `stream`; cudaErrorInvalidValue for a call it does not
// take (attentionBf16Takes) or a missing tensor; else the launch's error.
cudaError_t attentionBf16(const AttentionBf16Args& args, cudaStream_t stream = nullptr);

}  // namespace transfuse::cuda

#endif  // TRANSFUSE_RUNTIME_KERNELS_CUDA_ATTENTIONBF16_CUH
