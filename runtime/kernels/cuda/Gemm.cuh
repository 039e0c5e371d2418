// CUDA GEMM (fp32, or bf16 storage with fp32 accumulation) with the epilogue
// of the CPU kernel (runtime/kernels/Gemm.h):
//
//   C[M,N] = act(A[M,K] · B[K,N] + bias[N]) + residual[M,N]
//
// row-major with leading dimensions: A(i,k) = A[i·lda + k], or with transA
// A[k·lda + i] (a weight gradient's xᵀ); B(k,j) = B[k·ldb + j], or with
// transB B[j·ldb + k] (a weight in PyTorch's [N,K] layout); C(i,j) =
// C[i·ldc + j]; residual(i,j) = residual[i·ldr + j] (ldr 0: N). bias and
// residual may be null; act is an Activation (runtime/kernels/Activation.h,
// the CPU kernels' enum), evaluated by ElementwiseMath.h's formulas. The backward's
// epilogue, as on the CPU: with `derivative` set (and no bias, activation
// or residual; one product), C = (scale·A·B)·f'(pre(i,j)), pre(i,j) =
// pre[i·ldp + j] (ldp 0: N), f' ElementwiseMath.h's derivative.
// Column pairs (kernels::GemmPairs, GemmPairs.h) as on the CPU: rotary
// rotates pairs (i, i + headDim/2) of each head of the first `columns`
// columns at row i's position positionOffset + i % seqLen (invFreq
// [headDim/2] on the device); gated gives C[i, j] = act(gate_j)·up_j of B's
// two halves (C has n/2 columns). The CUDA-core kernel computes them, a
// tile's columns chosen so that each thread holds both columns of its
// pairs (one product; no residual or derivative).
// Device pointers; C must not overlap the other operands. `batch` products
// at once (an unfused attention's Q·Kᵀ per head): product z reads A, B and
// the residual at z times their batch strides and writes C at z·strideC (a
// stride 0 repeats an operand).
//
// CUDA cores (the fallback and the reference for the tensor-core and
// cuBLASLt paths): a block of 256 threads computes a 64×64 tile of C, 4×4
// per thread, over K in steps of 16 staged in shared memory (A transposed
// there, so a thread reads its 4 rows as one float4). Each C element is one
// FMA chain in k order: the result does not depend on the grid.
#ifndef TRANSFUSE_RUNTIME_KERNELS_CUDA_GEMM_CUH
#define TRANSFUSE_RUNTIME_KERNELS_CUDA_GEMM_CUH

#include "runtime/kernels/Activation.h"
#include "runtime/kernels/ElementwiseMath.h"
#include "runtime/kernels/GemmPairs.h"
#include "runtime/kernels/cuda/Storage.cuh"

#include <cuda_runtime.h>

#include <cstddef>

namespace transfuse::cuda {

using kernels::Activation;

// T: the storage type of every operand (float, or bf16 with fp32
// accumulation and epilogue: Storage.cuh).
template <class T>
struct GemmArgsOf {
  size_t m = 0, n = 0, k = 0;
  const T* a = nullptr;
  size_t lda = 0;
  bool transA = false;
  const T* b = nullptr;
  size_t ldb = 0;
  bool transB = false;
  T* c = nullptr;
  size_t ldc = 0;
  const T* bias = nullptr;
  Activation activation = Activation::kNone;
  const T* residual = nullptr;
  size_t ldr = 0;
  size_t batch = 1, strideA = 0, strideB = 0, strideC = 0, strideResidual = 0;
  Activation derivative = Activation::kNone;
  const T* pre = nullptr;
  size_t ldp = 0;
  float scale = 1.0f;
  kernels::GemmPairs pairs;
  const float* invFreq = nullptr;
  size_t seqLen = 1, positionOffset = 0;
};
using GemmArgs = GemmArgsOf<float>;

namespace gemm_detail {
// The epilogue's activation by ElementwiseMath.h's formulas (the GEMM
// kernels' shared piece).
__device__ inline float activate(Activation act, float x) {
  namespace tm = transfuse::kernels::math;
  switch (act) {
    case Activation::kRelu: return tm::relu(x);
    case Activation::kGelu: return tm::gelu(x);
    case Activation::kGeluTanh: return tm::geluTanh(x);
    case Activation::kSilu: return tm::silu(x);
    default: return x;
  }
}
}  // namespace gemm_detail

// Asynchronous on `stream`; cudaErrorInvalidValue for a missing operand or
// leading dimensions below the row lengths, else the launch's error. Runs
// on cuBLASLt where it is found and can express `args` (CublasLt.cuh),
// else on gemmCudaCores.
cudaError_t gemm(const GemmArgsOf<float>& args, cudaStream_t stream = nullptr);
cudaError_t gemm(const GemmArgsOf<bf16>& args, cudaStream_t stream = nullptr);

// bf16 on tensor cores (GemmBf16.cu: 64×64 tiles of WMMA 16×16×16 MMAs,
// fp32 accumulation, the epilogue in fp32 before one rounding): what the
// bf16 gemm() runs where cuBLASLt is absent or refuses; cudaErrorNotSupported
// for the derivative epilogue (training stays fp32).
cudaError_t gemmTensorCores(const GemmArgsOf<bf16>& args, cudaStream_t stream = nullptr);

// The CUDA-core kernel described above, whatever cuBLASLt can do.
cudaError_t gemmCudaCores(const GemmArgsOf<float>& args, cudaStream_t stream = nullptr);
cudaError_t gemmCudaCores(const GemmArgsOf<bf16>& args, cudaStream_t stream = nullptr);

}  // namespace transfuse::cuda

#endif  // TRANSFUSE_RUNTIME_KERNELS_CUDA_GEMM_CUH
