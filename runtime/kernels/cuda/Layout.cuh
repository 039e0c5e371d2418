// CUDA kernels that move or make data (no reductions), with the
// contracts of their runtime/exec/Ops.h counterparts (the unfused graph's
// transposes, masks, patches and rotations):
//
//   transpose:  y = x with its dimensions permuted: y.dims[i] = x.dims[perm[i]]
//               (rank <= 8; elements of 1, 2, 4 or 8 bytes)
//   causalMask: out[i, j] = j <= i + sk - sq   (uint8 [sq, sk], bottom-right aligned)
//   unfold:     image [b, c, h, w] -> patch rows [b, (h/ph)(w/pw), c·ph·pw];
//               unfoldGrad the rows back (fp32; patches do not overlap)
//   rotary:     each head's pairs (i, i + pairs) of [outer, seq, width] rows
//               rotated by θ = fp32((offset + s) · invFreq[i]) (-θ: inverse);
//               one thread per pair, sincos in double
//
// Device pointers, asynchronous on `stream`; the return value is the
// launch's error.
#ifndef TRANSFUSE_RUNTIME_KERNELS_CUDA_LAYOUT_CUH
#define TRANSFUSE_RUNTIME_KERNELS_CUDA_LAYOUT_CUH

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace transfuse::cuda {

constexpr int kMaxTransposeRank = 8;

cudaError_t transpose(const void* x, const int64_t* dims, int rank, const int64_t* perm, void* y,
                      size_t elemSize, cudaStream_t stream = nullptr);

cudaError_t causalMask(size_t sq, size_t sk, uint8_t* out, cudaStream_t stream = nullptr);

cudaError_t unfold(const float* x, float* y, int64_t b, int64_t c, int64_t h, int64_t w,
                   int64_t ph, int64_t pw, cudaStream_t stream = nullptr);
cudaError_t unfoldGrad(const float* g, float* dx, int64_t b, int64_t c, int64_t h, int64_t w,
                       int64_t ph, int64_t pw, cudaStream_t stream = nullptr);

cudaError_t rotary(const float* x, float* out, int64_t outer, int64_t seq, int64_t width,
                   int64_t headDim, const float* invFreq, int64_t pairs, int64_t offset,
                   bool inverse, cudaStream_t stream = nullptr);

}  // namespace transfuse::cuda

#endif  // TRANSFUSE_RUNTIME_KERNELS_CUDA_LAYOUT_CUH
