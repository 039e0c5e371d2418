// CUDA kernels of a train step, fp32, with the contracts of their CPU
// counterparts (runtime/kernels/Optimizer.h, Norm.h, Elementwise.h and
// runtime/exec/Ops.h):
//
//   adamUpdate      torch.optim.Adam(W)'s step, the CPU kernel's operations
//                   in its order (explicit FMAs): the same bits
//   dropout         y[i] = x[i]·keep when philoxUniform(seed, step, stream,
//                   first + i) >= rate, else 0: the same draws (Philox.h)
//                   and bits as the CPU
//   columnSums      out[j] = (Σ_r x[r,j]) / divisor in double in row order,
//                   rounded once: the same bits as the CPU
//   reduce        a sum, mean or max over any set of axes (exec::reduce);
//                 over leading axes columnSums, with the CPU's bits; else a
//                 thread per output, double sums in element order
//   layerNormGrad   dx = rstd·(d - mean(d) - x̂·mean(d⊙x̂)), d = dy·gamma;
//                   dgamma, dbeta as double column sums in row order
//   crossEntropyMean / crossEntropyGrad   the fused log-softmax cross-entropy
//                   with label smoothing and an ignored label; the mean over
//                   the rows whose label is not `ignore`
//   scaleAdd        y = w·y (x null) or y + w·x: micro-batch gradients summed
//   sumOfSquares    Σ x[i]² in double in a fixed order (the gradient norm)
//   embeddingGrad   out [vocab, dim] = the rows of g added at their ids, in
//                   token order (float adds: the same bits as the CPU)
//
// Device pointers, asynchronous on `stream`; the return value is the
// launch's error. Every reduction has a fixed order, so a result never
// depends on scheduling. Ids and labels are checked on the device: one
// outside its range lowers *firstBad (device memory, set to 0xffffffff by
// the caller, as for gather) to its index, and then nothing is written, so
// the host reports the first bad position after the run. `work` is device
// scratch the caller provides, of the size each function states.
//
// The cuda printer (codegen/cuda) calls them from compiled train steps;
// tests/gpu/train_kernels_test.cu checks each on a device.
#ifndef TRANSFUSE_RUNTIME_KERNELS_CUDA_TRAIN_CUH
#define TRANSFUSE_RUNTIME_KERNELS_CUDA_TRAIN_CUH

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace transfuse::kernels {
struct AdamStep;
}

namespace transfuse::cuda {

cudaError_t adamUpdate(float* param, const float* grad, float* m, float* v, size_t n,
                       const kernels::AdamStep& s, cudaStream_t stream = nullptr);

// y = w·y when x is null, else y + w·x (a product and a sum, each rounded:
// the CPU's bits), over n floats.
cudaError_t scaleAdd(float* y, const float* x, float w, size_t n, cudaStream_t stream = nullptr);

// *out (device memory) = Σ x[i]² over n floats, in double: each of a fixed
// grid's threads sums a strided share, then fixed trees, so the result is the
// same on every run. work: kSumOfSquaresWork doubles.
constexpr size_t kSumOfSquaresWork = 256;
cudaError_t sumOfSquares(const float* x, size_t n, double* out, double* work,
                         cudaStream_t stream = nullptr);

// y may alias x.
cudaError_t dropout(const float* x, float* y, size_t n, double rate, uint64_t seed, uint64_t step,
                    uint64_t streamId, uint64_t first, cudaStream_t stream = nullptr);

cudaError_t columnSums(const float* x, size_t rows, size_t cols, double divisor, float* out,
                       cudaStream_t stream = nullptr);

enum class ReduceKind { kSum, kMean, kMax };  // exec::ReduceOp's order
constexpr int kMaxReduceRank = 8;

// y = the reduction of x (dims[0..rank)) over the axes whose bit is set in
// axesMask, y holding the kept dimensions in order. A max over nothing is
// -inf, a mean over nothing NaN.
cudaError_t reduce(ReduceKind kind, const float* x, const int64_t* dims, int rank,
                   uint32_t axesMask, float* y, cudaStream_t stream = nullptr);

// work: 2·rows floats (each row's mean and rstd). dx may alias x or dy.
cudaError_t layerNormGrad(const float* x, const float* gamma, const float* dy, float* dx,
                          float* dgamma, float* dbeta, size_t rows, size_t width, float eps,
                          float* work, cudaStream_t stream = nullptr);
// RMSNorm's (Norm.h's rmsNormGrad): the mean taken as 0, no mean(d) term.
cudaError_t rmsNormGrad(const float* x, const float* gamma, const float* dy, float* dx,
                        float* dgamma, float* dbeta, size_t rows, size_t width, float eps,
                        float* work, cudaStream_t stream = nullptr);

// *mean = Σ loss_r / count over the rows whose label is not `ignore` (0
// when none is). work: rows floats + 1 word.
cudaError_t crossEntropyMean(const float* x, const int32_t* labels, size_t rows, size_t width,
                             float smoothing, int32_t ignore, float* mean, unsigned int* firstBad,
                             void* work, cudaStream_t stream = nullptr);

// grad[r,:] = (*g / count)·(softmax(x_r) - ε/V - (1 - ε)·onehot(label_r)),
// 0 for ignored rows; g is the loss's gradient (a device scalar). grad may
// alias x. work: 1 word.
cudaError_t crossEntropyGrad(const float* x, const int32_t* labels, size_t rows, size_t width,
                             float smoothing, int32_t ignore, const float* g, float* grad,
                             unsigned int* firstBad, void* work, cudaStream_t stream = nullptr);

cudaError_t embeddingGrad(const int32_t* ids, size_t count, const float* g, size_t vocab,
                          size_t dim, float* out, unsigned int* firstBad,
                          cudaStream_t stream = nullptr);

}  // namespace transfuse::cuda

#endif  // TRANSFUSE_RUNTIME_KERNELS_CUDA_TRAIN_CUH
