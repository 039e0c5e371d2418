// Row normalizations of the Transformer: layer_norm, add+layer_norm (the
// residual stream's x + sublayer(x) followed by LN, as in the post-LN paper
// layout, optionally returning the sum for the pre-LN residual stream) and a
// plain row softmax and its log-sum-exp. fp32, Highway-vectorized (dynamic dispatch per call),
// rows split across the runtime thread pool when one is given.
//
// Shapes: every tensor is rows × width, row-major and contiguous (row r starts
// at r·width); gamma and beta have `width` elements. Pointers need no
// alignment. Outputs may alias inputs element for element (y == x is fine).
//
// Numerics: mean and variance in fp32 with a two-pass variance (Σ(x-μ)², not
// E[x²]-μ², so a large mean does not cancel); the row stays in L1 between
// passes, so the extra pass costs no memory traffic. Against a double-precision
// reference (tests/unit/kernels/norm_test.cpp): layer norm within
// 1e-5·(1 + |y|) for widths up to 4097; softmax within 2e-6 relative (+1e-9):
// its exp is a 2^x polynomial of ~2 ulp (Common-inl.h), and weights below
// 2^-126 of the row maximum's are flushed to 0.
#ifndef TRANSFUSE_RUNTIME_KERNELS_NORM_H
#define TRANSFUSE_RUNTIME_KERNELS_NORM_H

#include "runtime/Status.h"

#include <cstddef>
#include <cstdint>

namespace transfuse::rt {
class ThreadPool;
}

namespace transfuse::kernels {

// y[r,:] = (x[r,:] - μ_r) / sqrt(σ²_r + eps) · gamma + beta, with μ_r and σ²_r
// the mean and (biased) variance of row r. gamma/beta may be null (1 and 0).
void layerNorm(const float* x, const float* gamma, const float* beta, float* y,
               size_t rows, size_t width, float eps, rt::ThreadPool* pool = nullptr);

// s = x + residual; y = layerNorm(s). When `sum` is non-null it receives s
// (the residual stream of a pre-LN block). residual may be null (then this is
// layerNorm, and `sum`, if given, receives a copy of x).
void addLayerNorm(const float* x, const float* residual, const float* gamma,
                  const float* beta, float* y, float* sum, size_t rows, size_t width,
                  float eps, rt::ThreadPool* pool = nullptr);

// RMSNorm (Llama's): y[r,:] = x[r,:] / sqrt(mean_j(x[r,j]²) + eps) · gamma
// (+ beta, usually null): layerNorm without centering, and its residual
// form; the same passes, the mean taken as 0.
void rmsNorm(const float* x, const float* gamma, const float* beta, float* y, size_t rows,
             size_t width, float eps, rt::ThreadPool* pool = nullptr);
void addRmsNorm(const float* x, const float* residual, const float* gamma, const float* beta,
                float* y, float* sum, size_t rows, size_t width, float eps,
                rt::ThreadPool* pool = nullptr);

// y[r,j] = exp(x[r,j] - max_r) / Σ_k exp(x[r,k] - max_r). A row whose entries
// are all -inf (fully masked) yields zeros, never NaN.
void softmax(const float* x, float* y, size_t rows, size_t width,
             rt::ThreadPool* pool = nullptr);
// out[r] = log Σ_j exp(x[r,j]), so x[r,j] - out[r] is a log-probability (a
// search's log-softmax without writing V values per row); -inf for a row
// that is all -inf. Within 1e-6 (+ the row maximum's rounding) of the exact
// value: the sum of softmax's exp terms.
void logSumExp(const float* x, float* out, size_t rows, size_t width,
               rt::ThreadPool* pool = nullptr);

// The cross-entropy of logit rows against labels, fused with the log-softmax
// (the logits are read once for the loss and once more for the gradient;
// nothing of V per row is written but the gradient itself). Per row r with
// label y = labels[r] and ε = smoothing (PyTorch's label smoothing):
//   loss[r] = lse_r - (1 - ε)·x[r,y] - ε/V · Σ_c x[r,c]
//           = (1 - ε)·(-log p_y) + ε/V · Σ_c (-log p_c)
//   grad[r,c] = gradScale · (p_c - ε/V - (1 - ε)·[c = y])     (grad may be null)
// and a row whose label is `ignore` gets loss 0 and a zero gradient. The
// caller forms the mean (Σ loss / tokens; gradScale = g / tokens). A label
// outside [0, width) other than `ignore` is an error naming the row, before
// anything is written. grad may alias x.
rt::Status crossEntropy(const float* x, const int32_t* labels, size_t rows, size_t width,
                        float smoothing, int32_t ignore, float* loss, float* grad,
                        float gradScale, rt::ThreadPool* pool = nullptr);

// The backward of layerNorm (layer_norm_grad): with x̂ = (x - μ_r)·rstd_r
// (μ and rstd in fp32 as layerNorm computes them) and d = dy·gamma,
//   dx[r,:]  = rstd_r · (d - mean(d) - x̂ · mean(d ⊙ x̂))   (means in fp32)
//   dgamma[j] = Σ_r dy[r,j]·x̂[r,j],  dbeta[j] = Σ_r dy[r,j]
// the column sums in double over the rows in row order, rounded once. Three
// passes (row stats, column sums, dx), rows or column blocks split over the
// pool; no sum's order depends on it, so the bits are the same on every
// thread count. dx may alias x or dy (it is written last).
void layerNormGrad(const float* x, const float* gamma, const float* dy, float* dx,
                   float* dgamma, float* dbeta, size_t rows, size_t width, float eps,
                   rt::ThreadPool* pool = nullptr);
// The backward of rmsNorm: x̂ = x·rstd_r, rstd_r = 1/sqrt(mean(x²) + eps),
//   dx[r,:] = rstd_r · (d - x̂ · mean(d ⊙ x̂)),  dgamma and dbeta as above.
void rmsNormGrad(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                 float* dbeta, size_t rows, size_t width, float eps,
                 rt::ThreadPool* pool = nullptr);

// out[j] = (Σ_r x[r·cols + j]) / divisor, the sum over rows in row order in
// double, rounded to float once: the column sums of a row-major [rows, cols]
// block (a bias's gradient: the reduce_sum over every axis but the last).
// Column blocks split over the pool; no column's order depends on it, so the
// bits are those of a serial double loop on every target and thread count.
void columnSums(const float* x, size_t rows, size_t cols, double divisor, float* out,
                rt::ThreadPool* pool = nullptr);

// Sentence pooling (transfuse.pool): x [batch, seq, width], keep [batch, seq]
// (bytes, non-zero: a token) -> y [batch, width]. mode is TF_Pooling's
// number (ir/TransfuseAttrs.td): 0 cls (x[b, 0]), 1 mean over the kept
// positions, 2 max over them; a sequence with no kept position gives zeros
// (mean, max). Sums in double in position order, rounded once, so the bits
// do not depend on the pool. Batches split over the pool.
enum PoolingMode : int32_t { kPoolCls = 0, kPoolMean = 1, kPoolMax = 2 };
void pool(const float* x, const uint8_t* keep, float* y, size_t batch, size_t seq, size_t width,
          int32_t mode, rt::ThreadPool* pool = nullptr);
// Its gradient dx [batch, seq, width] from dy [batch, width]: cls: dy at
// position 0; mean: keep·dy / kept; max: dy at the first kept position of
// each column's maximum; 0 elsewhere.
void poolGrad(const float* x, const uint8_t* keep, const float* dy, float* dx, size_t batch,
              size_t seq, size_t width, int32_t mode, rt::ThreadPool* pool = nullptr);

// y[r,:] = x[r,:] / max(||x[r,:]||₂, eps) (PyTorch's F.normalize); the
// squares summed in double. y may alias x.
void l2Normalize(const float* x, float* y, size_t rows, size_t width, float eps,
                 rt::ThreadPool* pool = nullptr);
// Its gradient: with n = ||x[r,:]|| and y = x/n, dx = (dy - y·(y·dy)) / n
// when n > eps, else dy / eps (y·dy in double). dx may alias dy.
void l2NormalizeGrad(const float* x, const float* dy, float* dx, size_t rows, size_t width,
                     float eps, rt::ThreadPool* pool = nullptr);

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_NORM_H
