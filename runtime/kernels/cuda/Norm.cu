// CUDA add+layer_norm and softmax (Norm.cuh).

#include "runtime/kernels/cuda/Norm.cuh"

#include "runtime/kernels/cuda/Reduce.cuh"

#include <cmath>

namespace transfuse::cuda {
namespace {

constexpr int kThreads = 256;  // per block; one block per row
// Floats of a row staged in shared memory: 44 KiB, under the 48 KiB a
// block gets without opting in (with the reductions' static scratch).
constexpr size_t kMaxStaged = 11264;

// One row per block. kStaged: the summed row lives in shared memory.
template <bool kStaged>
// x, y and sum may alias each other (element for element): no __restrict__.
__global__ void addLayerNormKernel(const float* x, const float* residual,
                                   const float* __restrict__ gamma, const float* __restrict__ beta,
                                   float* y, float* sum, size_t width, float eps) {
  extern __shared__ float row[];
  __shared__ float scratch[kThreads / 32];
  const size_t r = blockIdx.x;
  const float* xr = x + r * width;
  const float* rr = residual ? residual + r * width : nullptr;
  // The summed row for passes 2 and 3: staged, else the written sum (sum may
  // alias x), else recomputed.
  auto value = [&](size_t j) {
    if (kStaged) return row[j];
    if (sum) return sum[r * width + j];
    return rr ? xr[j] + rr[j] : xr[j];
  };
  float total = 0.0f;
  for (size_t j = threadIdx.x; j < width; j += kThreads) {
    const float s = rr ? xr[j] + rr[j] : xr[j];
    if (kStaged) row[j] = s;
    if (sum) sum[r * width + j] = s;
    total += s;
  }
  const float mean = blockReduce<kThreads, false>(total, scratch) / static_cast<float>(width);
  float dev = 0.0f;
  for (size_t j = threadIdx.x; j < width; j += kThreads) {
    const float d = value(j) - mean;
    dev += d * d;
  }
  const float var = blockReduce<kThreads, false>(dev, scratch) / static_cast<float>(width);
  const float rstd = 1.0f / sqrtf(var + eps);
  for (size_t j = threadIdx.x; j < width; j += kThreads) {
    const float n = (value(j) - mean) * rstd;
    y[r * width + j] = n * (gamma ? gamma[j] : 1.0f) + (beta ? beta[j] : 0.0f);
  }
}

// y may alias x: no __restrict__.
__global__ void softmaxKernel(const float* x, float* y, size_t width) {
  __shared__ float scratch[kThreads / 32];
  const size_t r = blockIdx.x;
  const float* xr = x + r * width;
  float* yr = y + r * width;
  float mx = -INFINITY;
  for (size_t j = threadIdx.x; j < width; j += kThreads) mx = fmaxf(mx, xr[j]);
  mx = blockReduce<kThreads, true>(mx, scratch);
  if (mx == -INFINITY) {  // fully masked (or empty) row
    for (size_t j = threadIdx.x; j < width; j += kThreads) yr[j] = 0.0f;
    return;
  }
  float total = 0.0f;
  for (size_t j = threadIdx.x; j < width; j += kThreads) total += expf(xr[j] - mx);
  const float inv = 1.0f / blockReduce<kThreads, false>(total, scratch);
  for (size_t j = threadIdx.x; j < width; j += kThreads) yr[j] = expf(xr[j] - mx) * inv;
}

}  // namespace

cudaError_t addLayerNorm(const float* x, const float* residual, const float* gamma,
                         const float* beta, float* y, float* sum, size_t rows, size_t width,
                         float eps, cudaStream_t stream) {
  if (rows == 0 || width == 0) return cudaSuccess;
  if (width <= kMaxStaged)
    addLayerNormKernel<true><<<rows, kThreads, width * sizeof(float), stream>>>(
        x, residual, gamma, beta, y, sum, width, eps);
  else
    addLayerNormKernel<false><<<rows, kThreads, 0, stream>>>(x, residual, gamma, beta, y, sum,
                                                              width, eps);
  return cudaGetLastError();
}

cudaError_t softmax(const float* x, float* y, size_t rows, size_t width, cudaStream_t stream) {
  if (rows == 0 || width == 0) return cudaSuccess;
  softmaxKernel<<<rows, kThreads, 0, stream>>>(x, y, width);
  return cudaGetLastError();
}

}  // namespace transfuse::cuda
