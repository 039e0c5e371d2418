// CUDA kernels of a train step (Train.cuh).

#include "runtime/kernels/cuda/Train.cuh"

#include "runtime/Philox.h"
#include "runtime/kernels/Optimizer.h"
#include "runtime/kernels/cuda/Reduce.cuh"

#include <algorithm>
#include <cmath>

namespace transfuse::cuda {
namespace {

constexpr int kThreads = 256;       // per block of the row and elementwise kernels
constexpr int kCheckThreads = 1024;  // the one block that checks ids
constexpr unsigned int kNoBad = 0xffffffffu;

// Blocks for a grid-stride loop over n items.
unsigned int gridFor(size_t n) {
  return static_cast<unsigned int>(std::min<size_t>((n + kThreads - 1) / kThreads, 8192));
}

__device__ size_t globalThread() { return size_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ size_t gridThreads() { return size_t(gridDim.x) * blockDim.x; }

// The CPU kernel's operations in its order (runtime/kernels/Optimizer.cpp),
// rounding as it rounds: __fmul_rn and explicit fmaf keep nvcc from
// contracting differently.
__global__ void adamKernel(float* p, const float* __restrict__ g, float* m, float* v, size_t n,
                           float b1, float c1, float b2, float c2, float scale, bool hasDecay,
                           float decay, float size, float inv, float eps) {
  for (size_t i = globalThread(); i < n; i += gridThreads()) {
    const float gi = __fmul_rn(g[i], scale);
    float pi = p[i];
    if (hasDecay) pi = __fmul_rn(pi, decay);
    const float mi = fmaf(b1, m[i], __fmul_rn(c1, gi));
    const float vi = fmaf(b2, v[i], __fmul_rn(c2, __fmul_rn(gi, gi)));
    const float denom = fmaf(__fsqrt_rn(vi), inv, eps);
    p[i] = fmaf(-size, __fdiv_rn(mi, denom), pi);
    m[i] = mi;
    v[i] = vi;
  }
}

__global__ void scaleAddKernel(float* y, const float* __restrict__ x, float w, size_t n) {
  for (size_t i = globalThread(); i < n; i += gridThreads())
    y[i] = x ? __fadd_rn(y[i], __fmul_rn(w, x[i])) : __fmul_rn(w, y[i]);  // the CPU's roundings
}

// Pass 1 of sumOfSquares: block b's share into work[b] (kSumOfSquaresWork
// blocks, whatever n).
__global__ void sumOfSquaresKernel(const float* __restrict__ x, size_t n, double* work) {
  __shared__ double scratch[kThreads / 32];
  double acc = 0.0;
  for (size_t i = globalThread(); i < n; i += gridThreads()) acc += double(x[i]) * x[i];
  acc = blockReduce<kThreads, false>(acc, scratch);
  if (threadIdx.x == 0) work[blockIdx.x] = acc;
}

// Pass 2: the blocks' shares in one fixed tree.
__global__ void sumOfSharesKernel(const double* work, double* out) {
  __shared__ double scratch[kThreads / 32];
  double acc = 0.0;
  for (size_t i = threadIdx.x; i < kSumOfSquaresWork; i += kThreads) acc += work[i];
  acc = blockReduce<kThreads, false>(acc, scratch);
  if (threadIdx.x == 0) *out = acc;
}

// One Philox block (four consecutive indices) per thread iteration.
__global__ void dropoutKernel(const float* x, float* y, size_t n, uint32_t threshold, float keep,
                              uint64_t seed, uint64_t step, uint64_t streamId, uint64_t first) {
  const uint64_t b0 = first / 4, blocks = (first + n + 3) / 4 - b0;
  for (uint64_t t = globalThread(); t < blocks; t += gridThreads()) {
    uint32_t w[4];
    rt::philoxBlockWords(seed, step, streamId, b0 + t, w);
    for (int k = 0; k < 4; ++k) {
      const uint64_t index = (b0 + t) * 4 + k;
      if (index < first || index >= first + n) continue;
      const size_t i = index - first;
      y[i] = rt::dropoutKept(w[k], threshold) ? __fmul_rn(x[i], keep) : 0.0f;
    }
  }
}

// One thread per column: a double sum over the rows in row order.
__global__ void columnSumsKernel(const float* __restrict__ x, size_t rows, size_t cols,
                                 double divisor, float* __restrict__ out) {
  const size_t j = globalThread();
  if (j >= cols) return;
  double acc = 0.0;
  for (size_t r = 0; r < rows; ++r) acc += x[r * cols + j];
  out[j] = static_cast<float>(acc / divisor);
}

// x's shape with each dimension's stride in x and whether it is reduced.
struct ReduceShape {
  int rank;
  int64_t dims[kMaxReduceRank];
  int64_t strides[kMaxReduceRank];
  uint32_t mask;
};

// One thread per output: its reduced elements in x's element order.
__global__ void reduceKernel(ReduceKind kind, const float* __restrict__ x, ReduceShape s,
                             size_t outputs, size_t count, float* __restrict__ y) {
  const size_t o = globalThread();
  if (o >= outputs) return;
  // The output's base offset in x: its index over the kept dimensions.
  int64_t base = 0, rem = static_cast<int64_t>(o);
  for (int d = s.rank - 1; d >= 0; --d)
    if (!((s.mask >> d) & 1u)) {
      base += (rem % s.dims[d]) * s.strides[d];
      rem /= s.dims[d];
    }
  double acc = 0.0;
  float best = -INFINITY;
  for (size_t i = 0; i < count; ++i) {
    int64_t offset = base, r = static_cast<int64_t>(i);
    for (int d = s.rank - 1; d >= 0; --d)
      if ((s.mask >> d) & 1u) {
        offset += (r % s.dims[d]) * s.strides[d];
        r /= s.dims[d];
      }
    if (kind == ReduceKind::kMax)
      best = fmaxf(best, x[offset]);
    else
      acc += x[offset];
  }
  y[o] = kind == ReduceKind::kMax  ? best
         : kind == ReduceKind::kSum ? static_cast<float>(acc)
                                    : static_cast<float>(acc / static_cast<double>(count));
}

// Pass 1 of layerNormGrad: each row's mean and rstd, as addLayerNorm forms
// them (Norm.cu: fp32 block sums, the two-pass variance).
__global__ void layerNormStatsKernel(const float* __restrict__ x, size_t width, float eps,
                                     bool rms, float* __restrict__ stats) {
  __shared__ float scratch[kThreads / 32];
  const float* xr = x + blockIdx.x * width;
  float total = 0.0f;
  for (size_t j = threadIdx.x; j < width; j += kThreads) total += xr[j];
  float mean = blockReduce<kThreads, false>(total, scratch) / static_cast<float>(width);
  if (rms) mean = 0.0f;  // RMSNorm: no centering
  float dev = 0.0f;
  for (size_t j = threadIdx.x; j < width; j += kThreads) {
    const float d = xr[j] - mean;
    dev += d * d;
  }
  const float var = blockReduce<kThreads, false>(dev, scratch) / static_cast<float>(width);
  if (threadIdx.x == 0) {
    stats[2 * blockIdx.x] = mean;
    stats[2 * blockIdx.x + 1] = 1.0f / sqrtf(var + eps);
  }
}

// Pass 2: dgamma[j] = Σ_r dy·x̂ and dbeta[j] = Σ_r dy, double, row order.
__global__ void layerNormParamGradKernel(const float* __restrict__ x, const float* __restrict__ dy,
                                         const float* __restrict__ stats, size_t rows, size_t width,
                                         float* __restrict__ dgamma, float* __restrict__ dbeta) {
  const size_t j = globalThread();
  if (j >= width) return;
  double dg = 0.0, db = 0.0;
  for (size_t r = 0; r < rows; ++r) {
    const float g = dy[r * width + j];
    const float xhat = (x[r * width + j] - stats[2 * r]) * stats[2 * r + 1];
    dg += static_cast<double>(g) * xhat;
    db += g;
  }
  if (dgamma) dgamma[j] = static_cast<float>(dg);
  if (dbeta) dbeta[j] = static_cast<float>(db);
}

// Pass 3, one block per row: dx = rstd·(d - mean(d) - x̂·mean(d⊙x̂)) (RMSNorm:
// without mean(d)). Each thread reads its own elements before writing them
// (dx may alias x or dy).
__global__ void layerNormInputGradKernel(const float* x, const float* __restrict__ gamma,
                                         const float* dy, const float* __restrict__ stats,
                                         size_t width, bool rms, float* dx) {
  __shared__ float scratch[kThreads / 32];
  const size_t r = blockIdx.x;
  const float mean = stats[2 * r], rstd = stats[2 * r + 1];
  const float* xr = x + r * width;
  const float* gr = dy + r * width;
  float sd = 0.0f, sdx = 0.0f;
  for (size_t j = threadIdx.x; j < width; j += kThreads) {
    const float d = gr[j] * (gamma ? gamma[j] : 1.0f);
    sd += d;
    sdx += d * ((xr[j] - mean) * rstd);
  }
  const float w = static_cast<float>(width);
  const float meanD = rms ? 0.0f : blockReduce<kThreads, false>(sd, scratch) / w;
  const float meanDx = blockReduce<kThreads, false>(sdx, scratch) / w;
  for (size_t j = threadIdx.x; j < width; j += kThreads) {
    const float d = gr[j] * (gamma ? gamma[j] : 1.0f);
    const float xhat = (xr[j] - mean) * rstd;
    dx[r * width + j] = rstd * (d - meanD - xhat * meanDx);
  }
}

// One block: lowers *firstBad to the first index whose id is outside [0,
// limit) (other than `ignore` when hasIgnore) and, when count is given,
// writes the number of ids that are not `ignore`.
__global__ void checkIdsKernel(const int32_t* __restrict__ ids, size_t n, int32_t limit,
                               bool hasIgnore, int32_t ignore, unsigned int* firstBad,
                               unsigned int* count) {
  __shared__ unsigned int counted;
  if (threadIdx.x == 0) counted = 0;
  __syncthreads();
  unsigned int mine = 0;
  for (size_t i = threadIdx.x; i < n; i += kCheckThreads) {
    const int32_t id = ids[i];
    if (hasIgnore && id == ignore) continue;
    if (id < 0 || id >= limit) atomicMin(firstBad, static_cast<unsigned int>(i));
    ++mine;
  }
  atomicAdd(&counted, mine);  // integers: the order does not matter
  __syncthreads();
  if (threadIdx.x == 0 && count) *count = counted;
}

// One block per row: the loss (when `loss` is given) and the gradient
// scaled by *g / count (when `grad` is). Nothing is written when a label
// was bad.
__global__ void crossEntropyRowsKernel(const float* x, const int32_t* __restrict__ labels,
                                       size_t width, float smoothing, int32_t ignore, float* loss,
                                       float* grad, const float* __restrict__ g,
                                       const unsigned int* count, const unsigned int* firstBad) {
  __shared__ float scratch[kThreads / 32];
  if (*firstBad != kNoBad) return;
  const size_t r = blockIdx.x;
  const int32_t y = labels[r];
  const float* xr = x + r * width;
  float* gr = grad ? grad + r * width : nullptr;
  if (y == ignore) {
    if (loss && threadIdx.x == 0) loss[r] = 0.0f;
    if (gr)
      for (size_t j = threadIdx.x; j < width; j += kThreads) gr[j] = 0.0f;
    return;
  }
  const float xy = xr[y];  // read before any thread writes the gradient (grad may alias x)
  float mx = -INFINITY, total = 0.0f;
  for (size_t j = threadIdx.x; j < width; j += kThreads) {
    mx = fmaxf(mx, xr[j]);
    total += xr[j];
  }
  mx = blockReduce<kThreads, true>(mx, scratch);
  total = blockReduce<kThreads, false>(total, scratch);
  float sum = 0.0f;
  for (size_t j = threadIdx.x; j < width; j += kThreads) sum += expf(xr[j] - mx);
  sum = blockReduce<kThreads, false>(sum, scratch);
  const float spread = smoothing / static_cast<float>(width);
  if (loss && threadIdx.x == 0) {
    const double lse = static_cast<double>(mx) + log(static_cast<double>(sum));
    loss[r] = static_cast<float>(lse - (1.0 - smoothing) * xy - double(spread) * total);
  }
  if (!gr) return;
  const float scale = *count ? *g / static_cast<float>(*count) : 0.0f;
  const float inv = scale / sum, off = scale * spread;
  for (size_t j = threadIdx.x; j < width; j += kThreads) gr[j] = fmaf(expf(xr[j] - mx), inv, -off);
  __syncthreads();
  if (threadIdx.x == 0) gr[y] -= scale * (1.0f - smoothing);
}

// One block: *mean = Σ loss_r / count over the counted rows, each thread's
// rows in order in double and the threads' sums in a fixed tree.
__global__ void crossEntropyMeanKernel(const float* __restrict__ loss,
                                       const int32_t* __restrict__ labels, size_t rows,
                                       int32_t ignore, const unsigned int* count,
                                       const unsigned int* firstBad, float* mean) {
  __shared__ double sums[kCheckThreads];
  if (*firstBad != kNoBad) return;
  double s = 0.0;
  for (size_t r = threadIdx.x; r < rows; r += kCheckThreads)
    if (labels[r] != ignore) s += loss[r];
  sums[threadIdx.x] = s;
  __syncthreads();
  for (int half = kCheckThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *mean = *count ? static_cast<float>(sums[0] / *count) : 0.0f;
}

// One thread per column: the column zeroed, then the rows of g added at
// their ids in token order. Nothing is written when an id was bad.
__global__ void embeddingGradKernel(const int32_t* __restrict__ ids, size_t count,
                                    const float* __restrict__ g, size_t vocab, size_t dim,
                                    float* __restrict__ out, const unsigned int* firstBad) {
  const size_t c = globalThread();
  if (c >= dim || *firstBad != kNoBad) return;
  for (size_t v = 0; v < vocab; ++v) out[v * dim + c] = 0.0f;
  for (size_t t = 0; t < count; ++t) out[size_t(ids[t]) * dim + c] += g[t * dim + c];
}

unsigned int columnBlocks(size_t cols) {
  return static_cast<unsigned int>((cols + kThreads - 1) / kThreads);
}

}  // namespace

cudaError_t adamUpdate(float* param, const float* grad, float* m, float* v, size_t n,
                       const kernels::AdamStep& s, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  // The constants exactly as kernels::adamUpdate forms them.
  const double t = static_cast<double>(s.step);
  const float stepSize = static_cast<float>(s.lr / (1.0 - std::pow(double(s.beta1), t)));
  const float invSqrtBc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(double(s.beta2), t)));
  adamKernel<<<gridFor(n), kThreads, 0, stream>>>(
      param, grad, m, v, n, s.beta1, 1.0f - s.beta1, s.beta2, 1.0f - s.beta2, s.gradScale,
      s.weightDecay != 0.0f, 1.0f - s.lr * s.weightDecay, stepSize, invSqrtBc2, s.eps);
  return cudaGetLastError();
}

cudaError_t dropout(const float* x, float* y, size_t n, double rate, uint64_t seed, uint64_t step,
                    uint64_t streamId, uint64_t first, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  dropoutKernel<<<gridFor((n + 3) / 4 + 1), kThreads, 0, stream>>>(
      x, y, n, rt::dropoutThreshold(rate), rt::dropoutKeepScale(rate), seed, step, streamId,
      first);
  return cudaGetLastError();
}

cudaError_t scaleAdd(float* y, const float* x, float w, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  scaleAddKernel<<<gridFor(n), kThreads, 0, stream>>>(y, x, w, n);
  return cudaGetLastError();
}

cudaError_t sumOfSquares(const float* x, size_t n, double* out, double* work,
                         cudaStream_t stream) {
  sumOfSquaresKernel<<<kSumOfSquaresWork, kThreads, 0, stream>>>(x, n, work);
  sumOfSharesKernel<<<1, kThreads, 0, stream>>>(work, out);
  return cudaGetLastError();
}

cudaError_t columnSums(const float* x, size_t rows, size_t cols, double divisor, float* out,
                       cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  columnSumsKernel<<<columnBlocks(cols), kThreads, 0, stream>>>(x, rows, cols, divisor, out);
  return cudaGetLastError();
}

cudaError_t reduce(ReduceKind kind, const float* x, const int64_t* dims, int rank,
                   uint32_t axesMask, float* y, cudaStream_t stream) {
  if (rank < 0 || rank > kMaxReduceRank) return cudaErrorInvalidValue;
  ReduceShape s{rank, {}, {}, axesMask};
  size_t outputs = 1, count = 1;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (dims[d] < 0) return cudaErrorInvalidValue;
    s.dims[d] = dims[d];
    s.strides[d] = stride;
    stride *= dims[d];
    ((axesMask >> d) & 1u ? count : outputs) *= static_cast<size_t>(dims[d]);
  }
  if (outputs == 0) return cudaSuccess;
  int leading = 0;  // reduced axes [0, leading), none after: column sums
  while (leading < rank && ((axesMask >> leading) & 1u)) ++leading;
  if (kind != ReduceKind::kMax && leading > 0 && leading < rank && (axesMask >> leading) == 0 &&
      count > 0)
    return columnSums(x, count, outputs, kind == ReduceKind::kMean ? double(count) : 1.0, y,
                      stream);
  reduceKernel<<<static_cast<unsigned int>((outputs + kThreads - 1) / kThreads), kThreads, 0,
                 stream>>>(kind, x, s, outputs, count, y);
  return cudaGetLastError();
}

static cudaError_t normGrad(const float* x, const float* gamma, const float* dy, float* dx,
                     float* dgamma, float* dbeta, size_t rows, size_t width, float eps, bool rms,
                     float* work, cudaStream_t stream) {
  if (width == 0) return cudaSuccess;
  if (rows > 0) layerNormStatsKernel<<<rows, kThreads, 0, stream>>>(x, width, eps, rms, work);
  if (dgamma || dbeta)
    layerNormParamGradKernel<<<columnBlocks(width), kThreads, 0, stream>>>(x, dy, work, rows,
                                                                          width, dgamma, dbeta);
  if (rows > 0)
    layerNormInputGradKernel<<<rows, kThreads, 0, stream>>>(x, gamma, dy, work, width, rms, dx);
  return cudaGetLastError();
}

cudaError_t layerNormGrad(const float* x, const float* gamma, const float* dy, float* dx,
                          float* dgamma, float* dbeta, size_t rows, size_t width, float eps,
                          float* work, cudaStream_t stream) {
  return normGrad(x, gamma, dy, dx, dgamma, dbeta, rows, width, eps, false, work, stream);
}

cudaError_t rmsNormGrad(const float* x, const float* gamma, const float* dy, float* dx,
                        float* dgamma, float* dbeta, size_t rows, size_t width, float eps,
                        float* work, cudaStream_t stream) {
  return normGrad(x, gamma, dy, dx, dgamma, dbeta, rows, width, eps, true, work, stream);
}

cudaError_t crossEntropyMean(const float* x, const int32_t* labels, size_t rows, size_t width,
                             float smoothing, int32_t ignore, float* mean, unsigned int* firstBad,
                             void* work, cudaStream_t stream) {
  float* loss = static_cast<float*>(work);
  unsigned int* count = reinterpret_cast<unsigned int*>(loss + rows);
  checkIdsKernel<<<1, kCheckThreads, 0, stream>>>(labels, rows, static_cast<int32_t>(width), true,
                                                  ignore, firstBad, count);
  if (rows > 0 && width > 0)
    crossEntropyRowsKernel<<<rows, kThreads, 0, stream>>>(x, labels, width, smoothing, ignore,
                                                          loss, nullptr, nullptr, count, firstBad);
  crossEntropyMeanKernel<<<1, kCheckThreads, 0, stream>>>(loss, labels, rows, ignore, count,
                                                          firstBad, mean);
  return cudaGetLastError();
}

cudaError_t crossEntropyGrad(const float* x, const int32_t* labels, size_t rows, size_t width,
                             float smoothing, int32_t ignore, const float* g, float* grad,
                             unsigned int* firstBad, void* work, cudaStream_t stream) {
  unsigned int* count = static_cast<unsigned int*>(work);
  checkIdsKernel<<<1, kCheckThreads, 0, stream>>>(labels, rows, static_cast<int32_t>(width), true,
                                                  ignore, firstBad, count);
  if (rows > 0 && width > 0)
    crossEntropyRowsKernel<<<rows, kThreads, 0, stream>>>(x, labels, width, smoothing, ignore,
                                                          nullptr, grad, g, count, firstBad);
  return cudaGetLastError();
}

cudaError_t embeddingGrad(const int32_t* ids, size_t count, const float* g, size_t vocab,
                          size_t dim, float* out, unsigned int* firstBad, cudaStream_t stream) {
  if (dim == 0) return cudaSuccess;
  checkIdsKernel<<<1, kCheckThreads, 0, stream>>>(ids, count, static_cast<int32_t>(vocab), false,
                                                  0, firstBad, nullptr);
  embeddingGradKernel<<<columnBlocks(dim), kThreads, 0, stream>>>(ids, count, g, vocab, dim, out,
                                                                  firstBad);
  return cudaGetLastError();
}

}  // namespace transfuse::cuda
