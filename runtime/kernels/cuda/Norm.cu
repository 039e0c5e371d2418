// CUDA add+layer_norm, softmax, pooling and L2 normalization (Norm.cuh).

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
                                   float eps, bool rms) {
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
  float mean = blockReduce<kThreads, false>(total, scratch) / static_cast<float>(width);
  if (rms) mean = 0.0f;  // RMSNorm: no centering
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
                            T* sum, size_t rows, size_t width, float eps, bool rms,
                            cudaStream_t stream) {
  if (rows == 0 || width == 0) return cudaSuccess;
  if (width <= kMaxStaged)
    addLayerNormKernel<true, T><<<rows, kThreads, width * sizeof(float), stream>>>(
        x, residual, gamma, beta, y, sum, width, eps, rms);
  else
    addLayerNormKernel<false, T><<<rows, kThreads, 0, stream>>>(x, residual, gamma, beta, y, sum,
                                                                 width, eps, rms);
  return cudaGetLastError();
}

template <class T>
cudaError_t runSoftmax(const T* x, T* y, size_t rows, size_t width, cudaStream_t stream) {
  if (rows == 0 || width == 0) return cudaSuccess;
  softmaxKernel<T><<<rows, kThreads, 0, stream>>>(x, y, width);
  return cudaGetLastError();
}

// One thread per (b, d): y[b, d] over the positions in order.
__global__ void poolKernel(const float* __restrict__ x, const uint8_t* __restrict__ keep,
                           float* __restrict__ y, size_t batch, size_t seq, size_t width,
                           int32_t mode) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= batch * width) return;
  const size_t b = i / width, d = i % width;
  const float* xb = x + b * seq * width + d;
  if (mode == 0) {
    y[i] = seq ? xb[0] : 0.0f;
    return;
  }
  double acc = 0.0;
  size_t kept = 0;
  for (size_t s = 0; s < seq; ++s) {
    if (!keep[b * seq + s]) continue;
    const double v = xb[s * width];
    acc = mode == 1 ? acc + v : (kept == 0 ? v : fmax(acc, v));
    ++kept;
  }
  y[i] = static_cast<float>(mode == 1 && kept ? acc / static_cast<double>(kept) : acc);
}

// One thread per (b, d): the column d of dx[b] over every position.
__global__ void poolGradKernel(const float* __restrict__ x, const uint8_t* __restrict__ keep,
                               const float* __restrict__ dy, float* __restrict__ dx, size_t batch,
                               size_t seq, size_t width, int32_t mode) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= batch * width) return;
  const size_t b = i / width, d = i % width;
  const float* xb = x + b * seq * width + d;
  float* db = dx + b * seq * width + d;
  const uint8_t* kb = keep + b * seq;
  size_t kept = 0, best = seq;
  for (size_t s = 0; s < seq; ++s) {
    db[s * width] = 0.0f;
    if (!kb[s]) continue;
    ++kept;
    if (best == seq || xb[s * width] > xb[best * width]) best = s;
  }
  if (mode == 0) {
    if (seq) db[0] = dy[i];
  } else if (mode == 1) {
    const float share = kept ? dy[i] * static_cast<float>(1.0 / static_cast<double>(kept)) : 0.0f;
    for (size_t s = 0; s < seq; ++s)
      if (kb[s]) db[s * width] = share;
  } else if (best < seq) {
    db[best * width] = dy[i];
  }
}

// One block per row; dy null: the forward.
__global__ void l2NormalizeKernel(const float* x, const float* dy, float* out, size_t width,
                                  float eps) {
  __shared__ double scratch[kThreads / 32];
  const size_t r = blockIdx.x;
  const float* xr = x + r * width;
  double squares = 0.0, dot = 0.0;
  for (size_t j = threadIdx.x; j < width; j += kThreads) {
    squares += double(xr[j]) * xr[j];
    if (dy) dot += double(xr[j]) * dy[r * width + j];
  }
  const double norm = sqrt(blockReduce<kThreads, false>(squares, scratch));
  if (dy) dot = blockReduce<kThreads, false>(dot, scratch);
  float* o = out + r * width;
  if (!dy) {
    const float inv = static_cast<float>(1.0 / fmax(norm, double(eps)));
    for (size_t j = threadIdx.x; j < width; j += kThreads) o[j] = xr[j] * inv;
  } else if (!(norm > eps)) {
    for (size_t j = threadIdx.x; j < width; j += kThreads) o[j] = dy[r * width + j] / eps;
  } else {
    const float inv = static_cast<float>(1.0 / norm), c = static_cast<float>(dot / (norm * norm));
    for (size_t j = threadIdx.x; j < width; j += kThreads)
      o[j] = (dy[r * width + j] - xr[j] * c) * inv;
  }
}

size_t blocksFor(size_t n) { return (n + kThreads - 1) / kThreads; }

}  // namespace

cudaError_t pool(const float* x, const uint8_t* keep, float* y, size_t batch, size_t seq,
                 size_t width, int32_t mode, cudaStream_t stream) {
  if (batch * width == 0) return cudaSuccess;
  poolKernel<<<blocksFor(batch * width), kThreads, 0, stream>>>(x, keep, y, batch, seq, width, mode);
  return cudaGetLastError();
}
cudaError_t poolGrad(const float* x, const uint8_t* keep, const float* dy, float* dx, size_t batch,
                     size_t seq, size_t width, int32_t mode, cudaStream_t stream) {
  if (batch * width == 0) return cudaSuccess;
  poolGradKernel<<<blocksFor(batch * width), kThreads, 0, stream>>>(x, keep, dy, dx, batch, seq,
                                                                    width, mode);
  return cudaGetLastError();
}
cudaError_t l2Normalize(const float* x, float* y, size_t rows, size_t width, float eps,
                        cudaStream_t stream) {
  if (rows == 0 || width == 0) return cudaSuccess;
  l2NormalizeKernel<<<rows, kThreads, 0, stream>>>(x, nullptr, y, width, eps);
  return cudaGetLastError();
}
cudaError_t l2NormalizeGrad(const float* x, const float* dy, float* dx, size_t rows, size_t width,
                            float eps, cudaStream_t stream) {
  if (rows == 0 || width == 0) return cudaSuccess;
  l2NormalizeKernel<<<rows, kThreads, 0, stream>>>(x, dy, dx, width, eps);
  return cudaGetLastError();
}

cudaError_t addLayerNorm(const float* x, const float* residual, const float* gamma,
                         const float* beta, float* y, float* sum, size_t rows, size_t width,
                         float eps, cudaStream_t stream) {
  return runAddLayerNorm(x, residual, gamma, beta, y, sum, rows, width, eps, false, stream);
}
cudaError_t addLayerNorm(const bf16* x, const bf16* residual, const bf16* gamma, const bf16* beta,
                         bf16* y, bf16* sum, size_t rows, size_t width, float eps,
                         cudaStream_t stream) {
  return runAddLayerNorm(x, residual, gamma, beta, y, sum, rows, width, eps, false, stream);
}
cudaError_t addRmsNorm(const float* x, const float* residual, const float* gamma,
                       const float* beta, float* y, float* sum, size_t rows, size_t width,
                       float eps, cudaStream_t stream) {
  return runAddLayerNorm(x, residual, gamma, beta, y, sum, rows, width, eps, true, stream);
}
cudaError_t addRmsNorm(const bf16* x, const bf16* residual, const bf16* gamma, const bf16* beta,
                       bf16* y, bf16* sum, size_t rows, size_t width, float eps,
                       cudaStream_t stream) {
  return runAddLayerNorm(x, residual, gamma, beta, y, sum, rows, width, eps, true, stream);
}
cudaError_t softmax(const float* x, float* y, size_t rows, size_t width, cudaStream_t stream) {
  return runSoftmax(x, y, rows, width, stream);
}
cudaError_t softmax(const bf16* x, bf16* y, size_t rows, size_t width, cudaStream_t stream) {
  return runSoftmax(x, y, rows, width, stream);
}

}  // namespace transfuse::cuda
