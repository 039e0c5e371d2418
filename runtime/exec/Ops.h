// Generic tensor ops that generated code calls for the primitives no
// hand-tuned kernel covers (an unfused graph's add, transpose, matmul, ...,
// and the @prepare step's weight reshuffling). Tensors are dense, row-major
// and contiguous; shapes are run-time values (dynamic batch and sequence
// lengths), rank <= kMaxRank. Pointers need no alignment. Outputs must not
// overlap inputs unless a function says so. fp32 unless stated; i1 tensors
// are bytes (0 or 1), token ids int32.
//
// Broadcasting is NumPy's: shapes align on the right, a size-1 dimension (or
// a missing leading one) repeats. The caller passes the output shape (the
// generated code knows it); inputs must broadcast to it.
#ifndef TRANSFUSE_RUNTIME_EXEC_OPS_H
#define TRANSFUSE_RUNTIME_EXEC_OPS_H

#include "runtime/Status.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/ElementwiseMath.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace transfuse::exec {

inline constexpr int kMaxRank = 8;

// A run-time shape: Shape{b, s, 512}.
struct Shape {
  int64_t dims[kMaxRank] = {};
  int rank = 0;
  Shape() = default;
  Shape(std::initializer_list<int64_t> d) {
    for (int64_t v : d) dims[rank++] = v;
  }
  int64_t operator[](int i) const { return dims[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
};

// Element strides of a tensor of shape `in` broadcast to `out` (0 where it
// broadcasts), for generated loops over `out`:
//   element (i_0, ..., i_{r-1}) of the broadcast input is at Σ i_d · step[d].
struct Strides {
  int64_t step[kMaxRank] = {};
  Strides(const Shape& in, const Shape& out) {
    int64_t s = 1;
    for (int d = out.rank - 1, k = in.rank - 1; d >= 0; --d, --k) {
      if (k < 0) break;
      step[d] = in[k] == 1 ? 0 : s;
      s *= in[k];
    }
  }
  // The offset of row r of `out`: its first element when the last dimension
  // is the row.
  int64_t rowOffset(const Shape& out, int64_t r) const {
    int64_t offset = 0;
    for (int d = out.rank - 2; d >= 0; --d) {
      offset += (r % out[d]) * step[d];
      r /= out[d];
    }
    return offset;
  }
};

// Elementwise ops are named by the math table (runtime/kernels/ElementwiseMath.h).
using ElementwiseKind = kernels::math::Kind;
enum class ReduceOp { kSum, kMean, kMax };

// out = a (op) b, broadcast to `os`; `op` is a binary kind (add, sub, mul, div).
void binary(ElementwiseKind op, const float* a, const Shape& as, const float* b, const Shape& bs,
            float* out, const Shape& os, rt::ThreadPool* pool);

// y = op(x) over n elements; y may alias x; `op` is a unary kind. relu and
// the gelus run the vectorized kernels of runtime/kernels/Elementwise.h,
// other kinds the table's scalar template.
void unary(ElementwiseKind op, const float* x, float* y, int64_t n, rt::ThreadPool* pool);

// y = x · factor over n elements; y may alias x.
void scale(const float* x, float factor, float* y, int64_t n, rt::ThreadPool* pool);

// out = cond ? a : b, all three broadcast to `os` (cond is bytes).
void select(const uint8_t* cond, const Shape& cs, const float* a, const Shape& as,
            const float* b, const Shape& bs, float* out, const Shape& os);

// y = x with its dimensions permuted: y.shape[i] = x.shape[perm[i]]; any
// element type of `elemSize` bytes.
void transpose(const void* x, const Shape& xs, const int64_t* perm, void* y, size_t elemSize);

// out = the n inputs joined along `axis` (all other dimensions equal).
void concat(const void* const* inputs, const Shape* shapes, int n, int axis, void* out,
            size_t elemSize);

// The patches of an image x [b, c, h, w] as rows y [b, (h/ph)·(w/pw),
// c·ph·pw]: row i·(w/pw) + j holds patch (i, j) in (channel, y, x) order
// (transfuse.unfold; h and w are multiples of the patch). unfoldGrad puts
// the rows g back in place: dx [b, c, h, w] (patches do not overlap).
void unfold(const float* x, float* y, int64_t b, int64_t c, int64_t h, int64_t w, int64_t ph,
            int64_t pw);
void unfoldGrad(const float* g, float* dx, int64_t b, int64_t c, int64_t h, int64_t w,
                int64_t ph, int64_t pw);

// y = x[..., start : start + length, ...] along `axis`.
void slice(const void* x, const Shape& xs, int axis, int64_t start, int64_t length, void* y,
           size_t elemSize);

// y = reduction of x over the axes whose bit is set in `axesMask` (bit i:
// axis i); y holds the kept dimensions in order (a reduced axis counts as
// size 1, so keep_dims does not change the layout). A max over an empty set
// is -inf, a mean divides by the number of reduced elements. Sums and means
// accumulate in double in element order; over leading axes (a bias's
// gradient) they run kernels::columnSums on the pool, with the same bits.
void reduce(ReduceOp op, const float* x, const Shape& xs, uint32_t axesMask, float* y,
            rt::ThreadPool* pool = nullptr);

// Softmax along `axis` (a row of all -inf gives zeros). The last axis runs
// the Highway kernel (runtime/kernels/Norm.h).
void softmax(const float* x, const Shape& xs, int axis, float* y, rt::ThreadPool* pool);

// Batched matmul with broadcast batch dimensions: a is [..., M, K] (or
// [..., K, M] with transA), b is [..., K, N] (or [..., N, K] with transB),
// out is [broadcast batch..., M, N] with shape `os`. Runs the GEMM kernel
// (runtime/kernels/Gemm.h) per matrix, packing b per call; with `bf16`,
// the bf16 GEMM (Bf16Gemm.h: operands rounded to bf16, fp32 sums).
void matmul(const float* a, const Shape& as, bool transA, const float* b, const Shape& bs,
            bool transB, float* out, const Shape& os, rt::ThreadPool* pool, bool bf16 = false);

// weight_grad: out [K, N] = the sum over rows r of x[r, :]ᵀ·g[r, :], x
// [..., K] and g [..., N] with the same leading dimensions: one GEMM whose
// contraction runs over all rows (kernels::gemm, A transposed; with
// `bf16`, kernels::gemmBf16).
void weightGrad(const float* x, const Shape& xs, const float* g, const Shape& gs, float* out,
                rt::ThreadPool* pool, bool bf16 = false);

// out[i, :] = table[ids[i], :] for the ids of shape `idsShape`; table is
// [vocab, dim]. An id outside [0, vocab) is an error naming `idsName` (e.g.
// "input 'src_tokens'"), the id and its index (e.g. [1, 3]); nothing is
// written then.
rt::Status gather(const float* table, int64_t vocab, int64_t dim, const int32_t* ids,
                  const Shape& idsShape, const char* idsName, float* out);

// *out = the mean cross-entropy of `rows` logit rows of `vocab` against
// labels (transfuse.cross_entropy: label smoothing, `ignore` rows not
// counted, 0 when none counts), the rows' losses summed in order (the same
// bits on any thread count). A label outside the vocabulary is an error
// naming `labelsName`, the label and its row.
rt::Status crossEntropyMean(const float* logits, const int32_t* labels, int64_t rows,
                            int64_t vocab, float smoothing, int32_t ignore, const char* labelsName,
                            float* out, rt::ThreadPool* pool);

// The backward ops of training graphs (ir/TransfuseGradOps.td), each as its
// op defines it; sums run in a fixed order, so any thread count gives the
// same bits.
// out = x broadcast to `os` (expand).
void expand(const float* x, const Shape& xs, float* out, const Shape& os);
// out[i] = g[i] · f'(x[i]) for an activation f = kind (relu, gelu, gelu_tanh, silu).
void activationGrad(ElementwiseKind kind, const float* x, const float* g, float* out, int64_t n,
                    rt::ThreadPool* pool);
// out [vocab, dim] = the rows of g scattered-added by ids (embedding_grad).
rt::Status embeddingGrad(const int32_t* ids, int64_t count, const float* g, int64_t vocab,
                         int64_t dim, const char* idsName, float* out);
// cross_entropy_grad: out rows = g / N · (p - smoothed target), 0 for ignored rows.
rt::Status crossEntropyGrad(const float* logits, const int32_t* labels, int64_t rows,
                            int64_t vocab, float smoothing, int32_t ignore, const char* labelsName,
                            const float* g, float* out, rt::ThreadPool* pool);
// slice_grad: out (shape os) zero but [start, start + gs[axis]) along axis = g.
void sliceGrad(const float* g, const Shape& gs, int axis, int64_t start, float* out, const Shape& os);

// Inverted dropout over n elements (transfuse.dropout): y[i] = x[i] / (1 -
// rate) when philoxUniform(seed, step, stream, i) >= rate, else 0; y may
// alias x (kernels::dropout).
void dropout(const float* x, float* y, int64_t n, double rate, uint64_t seed, uint64_t step,
             uint64_t stream, rt::ThreadPool* pool);

// out[i] = tokens[i] != padId, over n tokens.
void keyPaddingMask(const int32_t* tokens, int64_t n, int64_t padId, uint8_t* out);

// out[i, j] = j <= i + sk - sq, an [sq, sk] byte mask (bottom-right aligned).
void causalMask(int64_t sq, int64_t sk, uint8_t* out);

// out[p, j] for p in [0, length), j in [0, dim): sin(angle) for even j,
// cos(angle) for odd j, angle = (p + offset) · 10000^(-(j - j%2)/dim),
// formed in double (as transfuse.positional_encoding defines it).
// halves: Marian's arrangement (sines in the first dim/2 columns, cosines
// after; transfuse.positional_encoding's `halves`).
void positionalEncoding(int64_t length, int64_t offset, int64_t dim, bool halves, float* out);

// The rotary embedding (transfuse.rotary): x and out [outer, seq, width],
// width = heads · headDim; row s is at position p = offset + s, and each
// head's columns (i, i + pairs) for i < pairs are rotated by θ = fp32(p ·
// invFreq[i]) (by -θ when `inverse`), the rest copied. cos and sin in
// double, rounded once. out may alias x.
void rotary(const float* x, float* out, int64_t outer, int64_t seq, int64_t width,
            int64_t headDim, const float* invFreq, int64_t pairs, int64_t offset, bool inverse);

// Calls fn(begin, end) over [0, rows) split across the pool (inline when the
// pool is null or there are few rows); for generated row loops.
template <class Fn>
void parallelRows(rt::ThreadPool* pool, int64_t rows, const Fn& fn) {
  if (!pool || pool->numThreads() == 1 || rows < 16) {
    fn(int64_t{0}, rows);
    return;
  }
  pool->parallelFor(rows, [&](int64_t begin, int64_t end, int) { fn(begin, end); });
}

// Copies n bytes (a result that is an input, a parameter or another result).
void copyBytes(const void* x, void* y, size_t n);

// A decoding state tensor at its capacity (ir/State.h, tfk.state): rows R,
// H heads, T positions, D per head, [R, H, T, D] row-major, or with `keys`
// [R, H, D, T] (K transposed: a position's D values T apart).
struct StateTensor {
  float* data;
  int64_t heads, positions, headDim;
  bool keys;
};

// A [B, H, n, D] block: element (b, h, s, d) at data[b·batchStride +
// h·headStride + s·rowStride + d]; all-zero strides mean dense.
struct HeadsBlock {
  const float* data;
  size_t batchStride, headStride, rowStride;
};

// Positions [position, position + n) of state rows [0, b) from `in`
// [b, H, n, D]. The caller has checked position + n <= T and b <= R.
void stateWrite(HeadsBlock in, int64_t b, int64_t n, StateTensor state, int64_t position);

// Rows [0, b) of a state tensor were written: each gets a fresh id
// (Call::stateRowIds).
void freshRowIds(uint64_t* rowIds, int64_t b, uint64_t* serial);

// Positions [0, n) of state rows [0, b) into a dense [b, H, n, D] `out`.
void stateRead(StateTensor state, int64_t b, int64_t n, float* out);

}  // namespace transfuse::exec

#endif  // TRANSFUSE_RUNTIME_EXEC_OPS_H
