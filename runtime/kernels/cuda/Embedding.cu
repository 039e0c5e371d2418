// CUDA embedding-stage kernels (Embedding.cuh).

#include "runtime/kernels/cuda/Embedding.cuh"

#include <cmath>

namespace transfuse::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocksFor(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? b : 65535 * 16);  // grid-stride beyond
}

// One block per id; its threads copy the row.
template <class T>
__global__ void gatherKernel(const T* table, size_t vocab, size_t dim, const int32_t* ids, T* out,
                             unsigned int* firstBad) {
  const size_t i = blockIdx.x;
  const int32_t id = ids[i];
  T* o = out + i * dim;
  if (id < 0 || static_cast<size_t>(id) >= vocab) {
    if (threadIdx.x == 0 && firstBad) atomicMin(firstBad, static_cast<unsigned int>(i));
    for (size_t j = threadIdx.x; j < dim; j += blockDim.x) o[j] = fromFloat<T>(0.0f);
    return;
  }
  const T* row = table + static_cast<size_t>(id) * dim;
  for (size_t j = threadIdx.x; j < dim; j += blockDim.x) o[j] = row[j];
}

template <class T>
__global__ void positionalKernel(size_t length, size_t offset, size_t dim, bool halves, T* out) {
  for (size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; e < length * dim;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t p = e / dim, j = e % dim;
    const size_t i = halves ? j % (dim / 2) : j / 2;
    const bool sine = halves ? j < dim / 2 : j % 2 == 0;
    const double f = pow(10000.0, -static_cast<double>(2 * i) / static_cast<double>(dim));
    const double angle = static_cast<double>(p + offset) * f;
    out[e] = fromFloat<T>(static_cast<float>(sine ? sin(angle) : cos(angle)));
  }
}

__global__ void paddingKernel(const int32_t* tokens, size_t n, int32_t padId, uint8_t* out) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = tokens[i] != padId ? 1 : 0;
}

template <class T>
cudaError_t runGather(const T* table, size_t vocab, size_t dim, const int32_t* ids, size_t n,
                      T* out, unsigned int* firstBad, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;  // dim 0 still checks the ids
  if ((dim > 0 && !table) || !ids || !out || n > 0x7fffffffu) return cudaErrorInvalidValue;
  const unsigned threads = dim >= 256 ? 256 : 64;
  gatherKernel<T><<<static_cast<unsigned>(n), threads, 0, stream>>>(table, vocab, dim, ids, out,
                                                                      firstBad);
  return cudaGetLastError();
}

template <class T>
cudaError_t runPositional(size_t length, size_t offset, size_t dim, bool halves, T* out,
                          cudaStream_t stream) {
  if (length == 0 || dim == 0) return cudaSuccess;
  if (!out || (halves && dim % 2 != 0)) return cudaErrorInvalidValue;
  positionalKernel<T><<<blocksFor(length * dim), kThreads, 0, stream>>>(length, offset, dim,
                                                                        halves, out);
  return cudaGetLastError();
}

}  // namespace

cudaError_t gather(const float* table, size_t vocab, size_t dim, const int32_t* ids, size_t n,
                   float* out, unsigned int* firstBad, cudaStream_t stream) {
  return runGather(table, vocab, dim, ids, n, out, firstBad, stream);
}
cudaError_t gather(const bf16* table, size_t vocab, size_t dim, const int32_t* ids, size_t n,
                   bf16* out, unsigned int* firstBad, cudaStream_t stream) {
  return runGather(table, vocab, dim, ids, n, out, firstBad, stream);
}
cudaError_t positionalEncoding(size_t length, size_t offset, size_t dim, bool halves, float* out,
                               cudaStream_t stream) {
  return runPositional(length, offset, dim, halves, out, stream);
}
cudaError_t positionalEncoding(size_t length, size_t offset, size_t dim, bool halves, bf16* out,
                               cudaStream_t stream) {
  return runPositional(length, offset, dim, halves, out, stream);
}

cudaError_t keyPaddingMask(const int32_t* tokens, size_t n, int32_t padId, uint8_t* out,
                           cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (!tokens || !out) return cudaErrorInvalidValue;
  paddingKernel<<<blocksFor(n), kThreads, 0, stream>>>(tokens, n, padId, out);
  return cudaGetLastError();
}

}  // namespace transfuse::cuda
