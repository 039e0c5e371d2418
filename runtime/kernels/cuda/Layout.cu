// CUDA transposes and masks (Layout.cuh).

#include "runtime/kernels/cuda/Layout.cuh"

namespace transfuse::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocksFor(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? b : 65535 * 16);
}

// y's dimensions and, per y dimension, the stride of x it walks.
struct Permuted {
  int rank;
  int64_t dims[kMaxTransposeRank];
  int64_t strides[kMaxTransposeRank];
};

template <class T>
__global__ void transposeKernel(const T* x, Permuted p, T* y, size_t total) {
  for (size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    size_t rem = e, offset = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      offset += (rem % p.dims[d]) * p.strides[d];
      rem /= p.dims[d];
    }
    y[e] = x[offset];
  }
}

template <class T>
void launch(const void* x, const Permuted& p, void* y, size_t total, unsigned blocks,
            cudaStream_t stream) {
  transposeKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x), p,
                                                   static_cast<T*>(y), total);
}

__global__ void causalKernel(size_t sq, size_t sk, uint8_t* out) {
  for (size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; e < sq * sk;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t i = e / sk, j = e % sk;
    out[e] = j + sq <= i + sk ? 1 : 0;  // j <= i + sk - sq without going negative
  }
}

// One thread per image element: its place among the patch rows.
// `toRows`: image -> rows (unfold), else rows -> image (its gradient).
__global__ void patchKernel(const float* from, float* to, int64_t c, int64_t h, int64_t w,
                            int64_t ph, int64_t pw, size_t total, bool toRows) {
  const int64_t across = w / pw, rows = (h / ph) * across, cols = c * ph * pw;
  for (size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int64_t x = static_cast<int64_t>(e % w), y = static_cast<int64_t>(e / w % h);
    const int64_t ch = static_cast<int64_t>(e / (w * h) % c), n = static_cast<int64_t>(e / (w * h * c));
    const int64_t row = (y / ph) * across + x / pw;
    const int64_t element = (n * rows + row) * cols + (ch * ph + y % ph) * pw + x % pw;
    if (toRows)
      to[element] = from[e];
    else
      to[e] = from[element];
  }
}

cudaError_t movePatches(const float* from, float* to, int64_t b, int64_t c, int64_t h, int64_t w,
                        int64_t ph, int64_t pw, bool toRows, cudaStream_t stream) {
  if (b < 0 || c < 0 || h < 0 || w < 0 || ph < 1 || pw < 1 || h % ph || w % pw)
    return cudaErrorInvalidValue;
  const size_t total = static_cast<size_t>(b * c * h * w);
  if (total == 0) return cudaSuccess;
  if (!from || !to) return cudaErrorInvalidValue;
  patchKernel<<<blocksFor(total), kThreads, 0, stream>>>(from, to, c, h, w, ph, pw, total, toRows);
  return cudaGetLastError();
}

// One thread per rotated pair (and per passed-through column of a head).
__global__ void rotaryKernel(const float* x, float* out, int64_t seq, int64_t width,
                             int64_t headDim, const float* __restrict__ invFreq, int64_t pairs,
                             int64_t offset, bool inverse, size_t total) {
  const int64_t rest = headDim - pairs;  // per head: pairs rotated, the rest copied
  for (size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int64_t heads = width / headDim;
    const int64_t i = static_cast<int64_t>(e % rest), h = static_cast<int64_t>(e / rest % heads);
    const int64_t row = static_cast<int64_t>(e / (rest * heads));
    const float* xr = x + row * width + h * headDim;
    float* yr = out + row * width + h * headDim;
    if (i >= pairs) {  // columns 2·pairs.. of the head
      yr[i + pairs] = xr[i + pairs];
      continue;
    }
    const float p = static_cast<float>(offset + row % seq);
    const double angle = __fmul_rn(p, invFreq[i]);  // rounded as Hugging Face's
    double sn, cs;
    sincos(angle, &sn, &cs);
    const float c = static_cast<float>(cs), s = static_cast<float>(inverse ? -sn : sn);
    const float a = xr[i], b = xr[i + pairs];
    yr[i] = a * c - b * s;
    yr[i + pairs] = b * c + a * s;
  }
}

}  // namespace

cudaError_t rotary(const float* x, float* out, int64_t outer, int64_t seq, int64_t width,
                   int64_t headDim, const float* invFreq, int64_t pairs, int64_t offset,
                   bool inverse, cudaStream_t stream) {
  if (outer < 0 || seq < 0 || headDim < 1 || width % headDim || pairs < 0 || 2 * pairs > headDim)
    return cudaErrorInvalidValue;
  const size_t total = static_cast<size_t>(outer * seq * (width / headDim) * (headDim - pairs));
  if (total == 0) return cudaSuccess;
  rotaryKernel<<<blocksFor(total), kThreads, 0, stream>>>(x, out, seq, width, headDim, invFreq,
                                                          pairs, offset, inverse, total);
  return cudaGetLastError();
}

cudaError_t unfold(const float* x, float* y, int64_t b, int64_t c, int64_t h, int64_t w,
                   int64_t ph, int64_t pw, cudaStream_t stream) {
  return movePatches(x, y, b, c, h, w, ph, pw, /*toRows=*/true, stream);
}

cudaError_t unfoldGrad(const float* g, float* dx, int64_t b, int64_t c, int64_t h, int64_t w,
                       int64_t ph, int64_t pw, cudaStream_t stream) {
  return movePatches(g, dx, b, c, h, w, ph, pw, /*toRows=*/false, stream);
}

cudaError_t transpose(const void* x, const int64_t* dims, int rank, const int64_t* perm, void* y,
                      size_t elemSize, cudaStream_t stream) {
  if (rank < 0 || rank > kMaxTransposeRank) return cudaErrorInvalidValue;
  int64_t xStrides[kMaxTransposeRank];
  size_t total = 1;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    xStrides[d] = stride;
    stride *= dims[d];
  }
  Permuted p;
  p.rank = rank;
  unsigned seen = 0;  // perm must name each dimension once
  for (int i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= rank || (seen >> perm[i] & 1u) || dims[i] < 0)
      return cudaErrorInvalidValue;
    seen |= 1u << perm[i];
    p.dims[i] = dims[perm[i]];
    p.strides[i] = xStrides[perm[i]];
    total *= static_cast<size_t>(dims[i]);
  }
  if (total == 0) return cudaSuccess;
  if (!x || !y) return cudaErrorInvalidValue;
  const unsigned blocks = blocksFor(total);
  switch (elemSize) {
    case 1: launch<uint8_t>(x, p, y, total, blocks, stream); break;
    case 2: launch<uint16_t>(x, p, y, total, blocks, stream); break;
    case 4: launch<uint32_t>(x, p, y, total, blocks, stream); break;
    case 8: launch<uint64_t>(x, p, y, total, blocks, stream); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t causalMask(size_t sq, size_t sk, uint8_t* out, cudaStream_t stream) {
  if (sq * sk == 0) return cudaSuccess;
  if (!out) return cudaErrorInvalidValue;
  causalKernel<<<blocksFor(sq * sk), kThreads, 0, stream>>>(sq, sk, out);
  return cudaGetLastError();
}

}  // namespace transfuse::cuda
