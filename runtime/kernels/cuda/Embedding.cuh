// CUDA kernels of the embedding stage, with the contracts of their
// runtime/exec/Ops.h counterparts:
//
//   gather:              out[i,:] = table[ids[i],:]   (table [vocab, dim])
//   positionalEncoding:  out[p,j] = sin(q·f_j) (j even), cos(q·f_j) (j odd),
//                        q = p + offset, f_j = 10000^(-(j - j%2)/dim), in double;
//                        halves: sines in columns [0, dim/2), cosines after,
//                        column j at f_{2(j % (dim/2))}
//   keyPaddingMask:      out[i] = tokens[i] != padId   (uint8; 0 masks a key)
//
// Device pointers, asynchronous on `stream`; the return value is the
// launch's error. An id outside [0, vocab) writes a zero row and lowers
// *firstBad (device memory, set to 0xffffffff by the caller) to its index,
// so that the host reports the first bad position after the run.
#ifndef TRANSFUSE_RUNTIME_KERNELS_CUDA_EMBEDDING_CUH
#define TRANSFUSE_RUNTIME_KERNELS_CUDA_EMBEDDING_CUH

#include "runtime/kernels/cuda/Storage.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace transfuse::cuda {

cudaError_t gather(const float* table, size_t vocab, size_t dim, const int32_t* ids, size_t n,
                   float* out, unsigned int* firstBad, cudaStream_t stream = nullptr);

cudaError_t positionalEncoding(size_t length, size_t offset, size_t dim, bool halves, float* out,
                               cudaStream_t stream = nullptr);

// bf16 storage (Storage.cuh): the table's rows copied, the positions
// computed in double and rounded once.
cudaError_t gather(const bf16* table, size_t vocab, size_t dim, const int32_t* ids, size_t n,
                   bf16* out, unsigned int* firstBad, cudaStream_t stream = nullptr);
cudaError_t positionalEncoding(size_t length, size_t offset, size_t dim, bool halves, bf16* out,
                               cudaStream_t stream = nullptr);

cudaError_t keyPaddingMask(const int32_t* tokens, size_t n, int32_t padId, uint8_t* out,
                           cudaStream_t stream = nullptr);

}  // namespace transfuse::cuda

#endif  // TRANSFUSE_RUNTIME_KERNELS_CUDA_EMBEDDING_CUH
