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
template <bool kStaged, class T>
// x, y and sum may alias each other (element for element): no __restrict__.
__global__ void addLayerNormKernel(const T* x, const T* residual, const T* __restrict__ gamma,
                                   const T* __restrict__ beta, T* y, T* sum, size_t width,
                                   float eps) {
  extern __shared__ float row[];
  __shared__ float scratch[kThreads / 32];
  const size_t r = blockIdx.x;
  const T* xr = x + r * width;
  const T* rr = residual ? residual + r * width : nullptr;
  // The summed row for passes 2 and 3: staged, else the written sum (sum may
  // alias x), else recomputed.
  auto value = [&](size_t j) {
    if (kStaged) return row[j];
    if (sum) return toFloat(sum[r * width + j]);
    return rr ? toFloat(xr[j]) + toFloat(rr[j]) : toFloat(xr[j]);
  };
  float total = 0.0f;
  for (size_t j = threadIdx.x; j < width; j += kThreads) {
    // A written sum is normalized as written (bf16: rounded), so that the
    // staged and unstaged paths see the same values.
    float s = rr ? toFloat(xr[j]) + toFloat(rr[j]) : toFloat(xr[j]);
    if (sum) {
      const T stored = fromFloat<T>(s);
      sum[r * width + j] = stored;
      s = toFloat(stored);
    }
    if (kStaged) row[j] = s;
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
    y[r * width + j] =
        fromFloat<T>(n * (gamma ? toFloat(gamma[j]) : 1.0f) + (beta ? toFloat(beta[j]) : 0.0f));
  }
}

// y may alias x: no __restrict__.
template <class T>
__global__ void softmaxKernel(const T* x, T* y, size_t width) {
  __shared__ float scratch[kThreads / 32];
  const size_t r = blockIdx.x;
  const T* xr = x + r * width;
  T* yr = y + r * width;
  float mx = -INFINITY;
  for (size_t j = threadIdx.x; j < width; j += kThreads) mx = fmaxf(mx, toFloat(xr[j]));
  mx = blockReduce<kThreads, true>(mx, scratch);
  if (mx == -INFINITY) {  // fully masked (or empty) row
    for (size_t j = threadIdx.x; j < width; j += kThreads) yr[j] = fromFloat<T>(0.0f);
    return;
  }
  float total = 0.0f;
  for (size_t j = threadIdx.x; j < width; j += kThreads) total += expf(toFloat(xr[j]) - mx);
  const float inv = 1.0f / blockReduce<kThreads, false>(total, scratch);
  for (size_t j = threadIdx.x; j < width; j += kThreads)
    yr[j] = fromFloat<T>(expf(toFloat(xr[j]) - mx) * inv);
}

template <class T>
cudaError_t runAddLayerNorm(const T* x, const T* residual, const T* gamma, const T* beta, T* y,
                            T* sum, size_t rows, size_t width, float eps, cudaStream_t stream) {
  if (rows == 0 || width == 0) return cudaSuccess;
  if (width <= kMaxStaged)
    addLayerNormKernel<true, T><<<rows, kThreads, width * sizeof(float), stream>>>(
        x, residual, gamma, beta, y, sum, width, eps);
  else
    addLayerNormKernel<false, T><<<rows, kThreads, 0, stream>>>(x, residual, gamma, beta, y, sum,
                                                                 width, eps);
  return cudaGetLastError();
}

template <class T>
cudaError_t runSoftmax(const T* x, T* y, size_t rows, size_t width, cudaStream_t stream) {
  if (rows == 0 || width == 0) return cudaSuccess;
  softmaxKernel<T><<<rows, kThreads, 0, stream>>>(x, y, width);
  return cudaGetLastError();
}

}  // namespace

cudaError_t addLayerNorm(const float* x, const float* residual, const float* gamma,
                         const float* beta, float* y, float* sum, size_t rows, size_t width,
                         float eps, cudaStream_t stream) {
  return runAddLayerNorm(x, residual, gamma, beta, y, sum, rows, width, eps, stream);
}
cudaError_t addLayerNorm(const bf16* x, const bf16* residual, const bf16* gamma, const bf16* beta,
                         bf16* y, bf16* sum, size_t rows, size_t width, float eps,
                         cudaStream_t stream) {
  return runAddLayerNorm(x, residual, gamma, beta, y, sum, rows, width, eps, stream);
}
cudaError_t softmax(const float* x, float* y, size_t rows, size_t width, cudaStream_t stream) {
  return runSoftmax(x, y, rows, width, stream);
}
cudaError_t softmax(const bf16* x, bf16* y, size_t rows, size_t width, cudaStream_t stream) {
  return runSoftmax(x, y, rows, width, stream);
}

}  // namespace transfuse::cuda
