// CUDA row kernels: add+layer_norm and softmax, fp32, with the contracts of
// their CPU counterparts (runtime/kernels/Norm.h):
//
//   s = x + residual;  y[r,:] = (s[r,:] - mean_r) / sqrt(var_r + eps) * gamma + beta
//   y[r,j] = exp(x[r,j] - max_r) / sum_k exp(x[r,k] - max_r)   (all -inf: zeros)
//
// rows × width, row-major and contiguous, device pointers; residual, gamma,
// beta and sum may be null (no residual, 1, 0, not written). One block of
// 256 threads per row; the summed row is staged in shared memory when it
// fits (width <= 11264), so global memory is read once and written once per
// row; the variance is two-pass (Σ(s - mean)², as on the CPU). Calls are
// asynchronous on `stream`; the return value is the launch's error.
// This is the first piece of the CUDA backend (issue 15): tests/gpu checks
// it against double-precision references on a device, and every build
// compiles it for sm_80 and sm_90.
#ifndef TRANSFUSE_RUNTIME_KERNELS_CUDA_NORM_CUH
#define TRANSFUSE_RUNTIME_KERNELS_CUDA_NORM_CUH

#include "runtime/kernels/cuda/Storage.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace transfuse::cuda {

cudaError_t addLayerNorm(const float* x, const float* residual, const float* gamma,
                         const float* beta, float* y, float* sum, size_t rows, size_t width,
                         float eps, cudaStream_t stream = nullptr);

// RMSNorm (Norm.h's addRmsNorm): the same with the mean taken as 0.
cudaError_t addRmsNorm(const float* x, const float* residual, const float* gamma,
                       const float* beta, float* y, float* sum, size_t rows, size_t width,
                       float eps, cudaStream_t stream = nullptr);

cudaError_t softmax(const float* x, float* y, size_t rows, size_t width,
                    cudaStream_t stream = nullptr);

// Sentence pooling and L2 normalization with the contracts of their CPU
// counterparts (runtime/kernels/Norm.h: pool, poolGrad, l2Normalize,
// l2NormalizeGrad; mode 0 cls, 1 mean, 2 max), fp32: pooling one thread per
// (batch, column), sums in double in position order; the norms one block
// per row.
cudaError_t pool(const float* x, const uint8_t* keep, float* y, size_t batch, size_t seq,
                 size_t width, int32_t mode, cudaStream_t stream = nullptr);
cudaError_t poolGrad(const float* x, const uint8_t* keep, const float* dy, float* dx, size_t batch,
                     size_t seq, size_t width, int32_t mode, cudaStream_t stream = nullptr);
cudaError_t l2Normalize(const float* x, float* y, size_t rows, size_t width, float eps,
                        cudaStream_t stream = nullptr);
cudaError_t l2NormalizeGrad(const float* x, const float* dy, float* dx, size_t rows, size_t width,
                            float eps, cudaStream_t stream = nullptr);

// bf16 storage (Storage.cuh): read into fp32, the statistics in fp32, each
// result rounded once.
cudaError_t addLayerNorm(const bf16* x, const bf16* residual, const bf16* gamma, const bf16* beta,
                         bf16* y, bf16* sum, size_t rows, size_t width, float eps,
                         cudaStream_t stream = nullptr);
cudaError_t addRmsNorm(const bf16* x, const bf16* residual, const bf16* gamma, const bf16* beta,
                       bf16* y, bf16* sum, size_t rows, size_t width, float eps,
                       cudaStream_t stream = nullptr);
cudaError_t softmax(const bf16* x, bf16* y, size_t rows, size_t width,
                    cudaStream_t stream = nullptr);

}  // namespace transfuse::cuda

#endif  // TRANSFUSE_RUNTIME_KERNELS_CUDA_NORM_CUH
