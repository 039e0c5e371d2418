// Generic tensor ops for generated code (see Ops.h): NumPy-broadcast binary
// and select, unary maps, transpose / concat / slice over any element size,
// reductions, softmax along any axis, batched matmul on the GEMM kernel,
// gather with id checks, masks and sinusoidal positions.
//
// Strided loops run over a Layout: the iteration space's dimensions with each
// operand's element strides (0 along a broadcast dimension), size-1
// dimensions dropped and neighbours merged where every operand is contiguous
// across them. So equal shapes become one flat loop, [B,S,D] + [D] becomes
// B·S rows of D against one row, x · [1] one flat loop against a scalar, and
// the inner loop always has unit or zero strides (auto-vectorized). Loops over
// more than 2^16 elements are split across the thread pool when one is given.
#include "runtime/exec/Ops.h"

#include "runtime/ThreadPool.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/ElementwiseMath.h"
#include "runtime/kernels/Bf16Gemm.h"
#include "runtime/kernels/Gemm.h"
#include "runtime/kernels/Norm.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace transfuse::exec {
namespace {

namespace math = kernels::math;

constexpr int64_t kParallelMin = int64_t{1} << 16;
constexpr float kInf = std::numeric_limits<float>::infinity();

// fn(begin, end) over [0, n): split across the pool when the loop touches more
// than kParallelMin elements (`elemsPerIndex` each), else inline.
template <class Fn>
void forRange(int64_t n, int64_t elemsPerIndex, rt::ThreadPool* pool, Fn&& fn) {
  if (pool && pool->numThreads() > 1 && n > 1 && n * elemsPerIndex > kParallelMin)
    pool->parallelFor(n, [&](int64_t b, int64_t e, int) { fn(b, e); });
  else if (n > 0)
    fn(0, n);
}

// An iteration space (dims, row-major) with up to 3 operands' element strides.
struct Layout {
  int rank = 0;
  int nOps = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[3][kMaxRank] = {};

  // Appends a dimension; size-1 dimensions are dropped, and one that every
  // operand walks contiguously from the previous one is merged into it.
  void push(int64_t size, const int64_t* st) {
    if (size == 1) return;
    if (rank > 0) {
      bool merge = true;
      for (int k = 0; k < nOps; ++k) merge &= strides[k][rank - 1] == st[k] * size;
      if (merge) {
        dims[rank - 1] *= size;
        for (int k = 0; k < nOps; ++k) strides[k][rank - 1] = st[k];
        return;
      }
    }
    dims[rank] = size;
    for (int k = 0; k < nOps; ++k) strides[k][rank] = st[k];
    ++rank;
  }
  // Call once after the pushes: a space of one element becomes [1].
  void finish() {
    if (rank == 0) {
      dims[0] = 1;
      for (int k = 0; k < nOps; ++k) strides[k][0] = 0;
      rank = 1;
    }
  }
  int64_t len() const { return dims[rank - 1]; }  // the inner run
  int64_t rows() const {
    int64_t r = 1;
    for (int d = 0; d + 1 < rank; ++d) r *= dims[d];
    return r;
  }
};

// fn(off, r) for rows r in [r0, r1) of L (a row: every dimension but the
// last); off[k] is operand k's element offset at the row's start.
template <class Fn>
void forRows(const Layout& L, int64_t r0, int64_t r1, Fn&& fn) {
  int64_t idx[kMaxRank] = {};
  int64_t off[3] = {};
  int64_t rem = r0;
  for (int d = L.rank - 2; d >= 0; --d) {
    idx[d] = rem % L.dims[d];
    rem /= L.dims[d];
    for (int k = 0; k < L.nOps; ++k) off[k] += idx[d] * L.strides[k][d];
  }
  for (int64_t r = r0; r < r1; ++r) {
    fn(static_cast<const int64_t*>(off), r);
    for (int d = L.rank - 2; d >= 0; --d) {
      for (int k = 0; k < L.nOps; ++k) off[k] += L.strides[k][d];
      if (++idx[d] < L.dims[d]) break;
      for (int k = 0; k < L.nOps; ++k) off[k] -= L.strides[k][d] * L.dims[d];
      idx[d] = 0;
    }
  }
}

// Element strides of an operand with dims sd[0..sr) broadcast to od[0..orank)
// (right-aligned; 0 along a missing or size-1 dimension), in units of `unit`.
void broadcastStrides(const int64_t* sd, int sr, const int64_t* od, int orank, int64_t unit,
                      int64_t* out) {
  (void)od;  // checked in debug builds only
  int64_t stride = unit;
  for (int d = orank - 1; d >= 0; --d) {
    const int s = d - (orank - sr);
    if (s < 0 || sd[s] == 1) {
      out[d] = 0;
    } else {
      assert(sd[s] == od[d] && "operand does not broadcast to the output shape");
      out[d] = stride;
    }
    if (s >= 0) stride *= sd[s];
  }
}

// The broadcast layout of output `os` over the given operand shapes.
Layout broadcastLayout(const Shape& os, std::initializer_list<const Shape*> ins) {
  Layout L;
  int64_t st[3][kMaxRank];
  for (const Shape* s : ins) {
    assert(s->rank <= os.rank && "operand has a higher rank than the output");
    broadcastStrides(s->dims, s->rank, os.dims, os.rank, 1, st[L.nOps++]);
  }
  for (int d = 0; d < os.rank; ++d) {
    int64_t col[3] = {st[0][d], L.nOps > 1 ? st[1][d] : 0, L.nOps > 2 ? st[2][d] : 0};
    L.push(os.dims[d], col);
  }
  L.finish();
  return L;
}

// o[i] = f(a[i·sa], b[i·sb]) for strides sa, sb in {0, 1}: one loop per case so
// each vectorizes.
template <class F>
void mapBinary(F f, const float* a, int64_t sa, const float* b, int64_t sb, float* o,
               int64_t n) {
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (sa) {
    const float bv = *b;
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
  } else if (sb) {
    const float av = *a;
    for (int64_t i = 0; i < n; ++i) o[i] = f(av, b[i]);
  } else {
    std::fill(o, o + n, f(*a, *b));
  }
}

void binaryRun(ElementwiseKind op, const float* a, int64_t sa, const float* b, int64_t sb, float* o,
               int64_t n) {
  switch (op) {
    case ElementwiseKind::kAdd:
      return mapBinary([](float x, float y) { return math::add(x, y); }, a, sa, b, sb, o, n);
    case ElementwiseKind::kSub:
      return mapBinary([](float x, float y) { return math::sub(x, y); }, a, sa, b, sb, o, n);
    case ElementwiseKind::kMul:
      return mapBinary([](float x, float y) { return math::mul(x, y); }, a, sa, b, sb, o, n);
    case ElementwiseKind::kDiv:
      return mapBinary([](float x, float y) { return math::div(x, y); }, a, sa, b, sb, o, n);
    default:  // any other binary kind: the table's scalar template
      return mapBinary([op](float x, float y) { return math::apply(op, x, y); }, a, sa, b, sb,
                       o, n);
  }
}

int64_t product(const int64_t* d, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; ++i) p *= d[i];
  return p;
}

// Copies n elements of `size` bytes from x (element stride `stride`) to y;
// the fixed-size memcpys compile to plain loads and stores.
void gatherElems(const char* x, int64_t stride, char* y, int64_t n, size_t size) {
  switch (size) {
    case 1:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i * stride];
      return;
    case 4:
      for (int64_t i = 0; i < n; ++i) std::memcpy(y + i * 4, x + i * stride * 4, 4);
      return;
    case 8:
      for (int64_t i = 0; i < n; ++i) std::memcpy(y + i * 8, x + i * stride * 8, 8);
      return;
    default: {
      const int64_t es = static_cast<int64_t>(size);
      for (int64_t i = 0; i < n; ++i) std::memcpy(y + i * es, x + i * stride * es, size);
    }
  }
}

}  // namespace

void binary(ElementwiseKind op, const float* a, const Shape& as, const float* b, const Shape& bs,
            float* out, const Shape& os, rt::ThreadPool* pool) {
  if (os.numel() == 0) return;
  const Layout L = broadcastLayout(os, {&as, &bs});
  const int64_t len = L.len(), sa = L.strides[0][L.rank - 1], sb = L.strides[1][L.rank - 1];
  if (L.rank == 1) {  // one flat run (equal shapes, or against a scalar)
    forRange(len, 1, pool, [&](int64_t i0, int64_t i1) {
      binaryRun(op, a + i0 * sa, sa, b + i0 * sb, sb, out + i0, i1 - i0);
    });
    return;
  }
  forRange(L.rows(), len, pool, [&](int64_t r0, int64_t r1) {
    forRows(L, r0, r1, [&](const int64_t* off, int64_t r) {
      binaryRun(op, a + off[0], sa, b + off[1], sb, out + r * len, len);
    });
  });
}

void unary(ElementwiseKind op, const float* x, float* y, int64_t n, rt::ThreadPool* pool) {
  if (n <= 0) return;
  const size_t un = static_cast<size_t>(n);
  switch (op) {
    case ElementwiseKind::kRelu: return kernels::relu(x, y, un, pool);
    case ElementwiseKind::kGelu: return kernels::gelu(x, y, un, pool);
    case ElementwiseKind::kGeluTanh: return kernels::geluTanh(x, y, un, pool);
    default:  // exp, tanh, any other unary kind: the table's scalar template
      return forRange(n, 1, pool, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) y[i] = math::apply(op, x[i]);
      });
  }
}

void scale(const float* x, float factor, float* y, int64_t n, rt::ThreadPool* pool) {
  forRange(n, 1, pool, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = x[i] * factor;
  });
}

void select(const uint8_t* cond, const Shape& cs, const float* a, const Shape& as,
            const float* b, const Shape& bs, float* out, const Shape& os) {
  if (os.numel() == 0) return;
  const Layout L = broadcastLayout(os, {&cs, &as, &bs});
  const int64_t len = L.len(), sc = L.strides[0][L.rank - 1], sa = L.strides[1][L.rank - 1],
                sb = L.strides[2][L.rank - 1];
  forRows(L, 0, L.rows(), [&](const int64_t* off, int64_t r) {
    const uint8_t* c = cond + off[0];
    const float* pa = a + off[1];
    const float* pb = b + off[2];
    float* o = out + r * len;
    for (int64_t i = 0; i < len; ++i) o[i] = c[i * sc] ? pa[i * sa] : pb[i * sb];
  });
}

void transpose(const void* x, const Shape& xs, const int64_t* perm, void* y, size_t elemSize) {
  if (xs.numel() == 0) return;
  int64_t xStride[kMaxRank];
  int64_t s = 1;
  for (int d = xs.rank - 1; d >= 0; --d) {
    xStride[d] = s;
    s *= xs.dims[d];
  }
  // Iterate over y in order; the operand is x, read at its permuted strides.
  Layout L;
  L.nOps = 1;
  for (int i = 0; i < xs.rank; ++i) L.push(xs.dims[perm[i]], &xStride[perm[i]]);
  L.finish();
  const char* xb = static_cast<const char*>(x);
  char* yb = static_cast<char*>(y);
  const int64_t len = L.len(), inner = L.strides[0][L.rank - 1];
  const int64_t es = static_cast<int64_t>(elemSize);
  forRows(L, 0, L.rows(), [&](const int64_t* off, int64_t r) {
    if (inner == 1)  // the last axis stays: copy the run
      std::memcpy(yb + r * len * es, xb + off[0] * es, static_cast<size_t>(len * es));
    else
      gatherElems(xb + off[0] * es, inner, yb + r * len * es, len, elemSize);
  });
}

void concat(const void* const* inputs, const Shape* shapes, int n, int axis, void* out,
            size_t elemSize) {
  if (n <= 0) return;
  const Shape& s0 = shapes[0];
  const int64_t outer = product(s0.dims, 0, axis);
  const int64_t after = product(s0.dims, axis + 1, s0.rank) * static_cast<int64_t>(elemSize);
  char* o = static_cast<char*>(out);
  for (int64_t i = 0; i < outer; ++i) {
    for (int k = 0; k < n; ++k) {
      const int64_t bytes = shapes[k].dims[axis] * after;
      if (bytes == 0) continue;
      std::memcpy(o, static_cast<const char*>(inputs[k]) + i * bytes, static_cast<size_t>(bytes));
      o += bytes;
    }
  }
}

namespace {

// Each image row segment of one patch is `pw` contiguous floats on both
// sides; `toRows` copies image -> patch rows, else back.
void movePatches(const float* from, float* to, int64_t b, int64_t c, int64_t h, int64_t w,
                 int64_t ph, int64_t pw, bool toRows) {
  const int64_t across = w / pw, rows = (h / ph) * across, cols = c * ph * pw;
  const size_t bytes = static_cast<size_t>(pw) * sizeof(float);
  for (int64_t n = 0; n < b; ++n)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t j = 0; j < across; ++j) {
          const int64_t pixel = ((n * c + ch) * h + y) * w + j * pw;
          const int64_t row = (y / ph) * across + j;
          const int64_t element = (n * rows + row) * cols + (ch * ph + y % ph) * pw;
          if (toRows)
            std::memcpy(to + element, from + pixel, bytes);
          else
            std::memcpy(to + pixel, from + element, bytes);
        }
}

}  // namespace

void unfold(const float* x, float* y, int64_t b, int64_t c, int64_t h, int64_t w, int64_t ph,
            int64_t pw) {
  movePatches(x, y, b, c, h, w, ph, pw, /*toRows=*/true);
}

void unfoldGrad(const float* g, float* dx, int64_t b, int64_t c, int64_t h, int64_t w,
                int64_t ph, int64_t pw) {
  movePatches(g, dx, b, c, h, w, ph, pw, /*toRows=*/false);
}

void slice(const void* x, const Shape& xs, int axis, int64_t start, int64_t length, void* y,
           size_t elemSize) {
  const int64_t outer = product(xs.dims, 0, axis);
  const int64_t after = product(xs.dims, axis + 1, xs.rank) * static_cast<int64_t>(elemSize);
  const int64_t bytes = length * after;
  if (bytes == 0) return;
  const char* xb = static_cast<const char*>(x);
  char* yb = static_cast<char*>(y);
  for (int64_t i = 0; i < outer; ++i)
    std::memcpy(yb + i * bytes, xb + (i * xs.dims[axis] + start) * after,
                static_cast<size_t>(bytes));
}

void reduce(ReduceOp op, const float* x, const Shape& xs, uint32_t axesMask, float* y,
            rt::ThreadPool* pool) {
  // Sums over leading axes [0, k) with the kept ones contiguous after them.
  int k = 0;
  while (k < xs.rank && ((axesMask >> k) & 1u)) ++k;
  if (op != ReduceOp::kMax && k > 0 && k < xs.rank && (axesMask >> k) == 0) {
    const int64_t rows = product(xs.dims, 0, k), cols = product(xs.dims, k, xs.rank);
    if (rows > 0) {
      kernels::columnSums(x, static_cast<size_t>(rows), static_cast<size_t>(cols),
                          op == ReduceOp::kMean ? static_cast<double>(rows) : 1.0, y, pool);
      return;
    }
  }
  // y's strides over x's dimensions: 0 along a reduced axis.
  int64_t yStride[kMaxRank];
  int64_t ny = 1;
  for (int d = xs.rank - 1; d >= 0; --d) {
    const bool reduced = (axesMask >> d) & 1u;
    yStride[d] = reduced ? 0 : ny;
    if (!reduced) ny *= xs.dims[d];
  }
  if (ny == 0) return;
  const int64_t nx = xs.numel();
  const int64_t count = nx / ny;  // reduced elements per output
  if (op == ReduceOp::kMax) {
    std::fill(y, y + ny, -kInf);
  } else {
    std::fill(y, y + ny, 0.0f);
  }
  if (nx > 0) {
    Layout L;
    L.nOps = 1;
    for (int d = 0; d < xs.rank; ++d) L.push(xs.dims[d], &yStride[d]);
    L.finish();
    const int64_t len = L.len(), inner = L.strides[0][L.rank - 1];
    if (op == ReduceOp::kMax) {
      forRows(L, 0, L.rows(), [&](const int64_t* off, int64_t r) {
        const float* xr = x + r * len;
        float* yr = y + off[0];
        if (inner == 0) {
          float m = *yr;
          for (int64_t i = 0; i < len; ++i) m = std::max(m, xr[i]);
          *yr = m;
        } else {
          for (int64_t i = 0; i < len; ++i) yr[i] = std::max(yr[i], xr[i]);
        }
      });
    } else {  // sums in double
      std::vector<double> acc(static_cast<size_t>(ny), 0.0);
      forRows(L, 0, L.rows(), [&](const int64_t* off, int64_t r) {
        const float* xr = x + r * len;
        double* ar = acc.data() + off[0];
        if (inner == 0) {
          double s = 0;
          for (int64_t i = 0; i < len; ++i) s += xr[i];
          *ar += s;
        } else {
          for (int64_t i = 0; i < len; ++i) ar[i] += xr[i];
        }
      });
      const double div = op == ReduceOp::kMean ? static_cast<double>(count) : 1.0;
      for (int64_t i = 0; i < ny; ++i) y[i] = static_cast<float>(acc[i] / div);
      return;
    }
  }
  if (op == ReduceOp::kMean && count == 0)  // a mean over nothing: 0/0
    std::fill(y, y + ny, std::numeric_limits<float>::quiet_NaN());
}

void softmax(const float* x, const Shape& xs, int axis, float* y, rt::ThreadPool* pool) {
  if (xs.numel() == 0) return;
  const int64_t outer = product(xs.dims, 0, axis), width = xs.dims[axis];
  const int64_t inner = product(xs.dims, axis + 1, xs.rank);
  if (inner == 1) {  // rows are contiguous: the Highway kernel
    kernels::softmax(x, y, static_cast<size_t>(outer), static_cast<size_t>(width), pool);
    return;
  }
  // Element (o, k, j) is at (o·width + k)·inner + j; the softmax runs over k,
  // vectorized over j.
  std::vector<float> mx(static_cast<size_t>(inner));
  std::vector<double> sum(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    const float* xo = x + o * width * inner;
    float* yo = y + o * width * inner;
    std::fill(mx.begin(), mx.end(), -kInf);
    for (int64_t k = 0; k < width; ++k)
      for (int64_t j = 0; j < inner; ++j) mx[j] = std::max(mx[j], xo[k * inner + j]);
    for (int64_t j = 0; j < inner; ++j)
      if (mx[j] == -kInf) mx[j] = 0.0f;  // an all -inf row: exp gives 0s, the sum 0
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t k = 0; k < width; ++k)
      for (int64_t j = 0; j < inner; ++j) {
        const float e = std::exp(xo[k * inner + j] - mx[j]);
        yo[k * inner + j] = e;
        sum[j] += e;
      }
    for (int64_t j = 0; j < inner; ++j)
      mx[j] = sum[j] > 0 ? static_cast<float>(1.0 / sum[j]) : 0.0f;  // now 1/sum
    for (int64_t k = 0; k < width; ++k)
      for (int64_t j = 0; j < inner; ++j) yo[k * inner + j] *= mx[j];
  }
}

void matmul(const float* a, const Shape& as, bool transA, const float* b, const Shape& bs,
            bool transB, float* out, const Shape& os, rt::ThreadPool* pool, bool bf16) {
  assert(as.rank >= 2 && bs.rank >= 2 && os.rank >= 2);
  const int R = os.rank;
  const int64_t M = os.dims[R - 2], N = os.dims[R - 1];
  const int64_t K = transA ? as.dims[as.rank - 2] : as.dims[as.rank - 1];
  const int64_t batch = product(os.dims, 0, R - 2);
  if (batch == 0 || M == 0 || N == 0) return;
  if (K == 0) {
    std::fill(out, out + batch * M * N, 0.0f);
    return;
  }
  const size_t lda = static_cast<size_t>(transA ? M : K);
  const size_t ldb = static_cast<size_t>(transB ? K : N);
  // The batch dimensions, with a's and b's strides in elements.
  int64_t st[2][kMaxRank];
  broadcastStrides(as.dims, as.rank - 2, os.dims, R - 2, M * K, st[0]);
  broadcastStrides(bs.dims, bs.rank - 2, os.dims, R - 2, K * N, st[1]);
  Layout L;
  L.nOps = 2;
  for (int d = 0; d < R - 2; ++d) {
    int64_t col[2] = {st[0][d], st[1][d]};
    L.push(os.dims[d], col);
  }
  L.finish();
  bool bShared = true;
  for (int d = 0; d < L.rank; ++d) bShared &= L.strides[1][d] == 0;
  const bool aFull = L.rank == 1 && (L.dims[0] == 1 || L.strides[0][0] == M * K);
  if (bf16) {  // one bf16 GEMM per matrix (each packs its b)
    forRows(L, 0, L.rows(), [&](const int64_t* off, int64_t r) {
      for (int64_t i = 0; i < L.len(); ++i)
        kernels::gemmBf16(static_cast<size_t>(M), static_cast<size_t>(N), static_cast<size_t>(K),
                          a + off[0] + i * L.strides[0][L.rank - 1], lda, transA,
                          b + off[1] + i * L.strides[1][L.rank - 1], ldb, transB,
                          out + (r * L.len() + i) * M * N, static_cast<size_t>(N), {}, pool);
    });
    return;
  }
  if (bShared && aFull && !transA) {  // [..., M, K] · [K, N]: one GEMM of batch·M rows
    kernels::gemm(static_cast<size_t>(batch * M), static_cast<size_t>(N),
                  static_cast<size_t>(K), a, lda, false, b, ldb, transB, out,
                  static_cast<size_t>(N), {}, pool);
    return;
  }
  // One GEMM per matrix; b is packed again only when its matrix changes.
  kernels::PackedB packed;
  int64_t packedOff = -1;
  const int64_t len = L.len(), sa = L.strides[0][L.rank - 1], sb = L.strides[1][L.rank - 1];
  forRows(L, 0, L.rows(), [&](const int64_t* off, int64_t r) {
    for (int64_t i = 0; i < len; ++i) {
      const int64_t bOff = off[1] + i * sb;
      if (bOff != packedOff) {
        packed = kernels::packB(b + bOff, static_cast<size_t>(K), static_cast<size_t>(N), ldb,
                                transB, pool);
        packedOff = bOff;
      }
      kernels::gemm(static_cast<size_t>(M), static_cast<size_t>(N), static_cast<size_t>(K),
                    a + off[0] + i * sa, lda, transA, packed, out + (r * len + i) * M * N,
                    static_cast<size_t>(N), {}, pool);
    }
  });
}

void weightGrad(const float* x, const Shape& xs, const float* g, const Shape& gs, float* out,
                rt::ThreadPool* pool, bool bf16) {
  const int64_t K = xs.dims[xs.rank - 1], N = gs.dims[gs.rank - 1];
  const int64_t rows = K > 0 ? xs.numel() / K : 0;
  assert(N == 0 || rows == gs.numel() / N);
  if (K == 0 || N == 0) return;
  if (rows == 0) {
    std::fill(out, out + K * N, 0.0f);
    return;
  }
  if (bf16) {
    kernels::gemmBf16(static_cast<size_t>(K), static_cast<size_t>(N), static_cast<size_t>(rows),
                      x, static_cast<size_t>(K), /*transA=*/true, g, static_cast<size_t>(N),
                      /*transB=*/false, out, static_cast<size_t>(N), {}, pool);
    return;
  }
  kernels::gemm(static_cast<size_t>(K), static_cast<size_t>(N), static_cast<size_t>(rows), x,
                static_cast<size_t>(K), /*transA=*/true, g, static_cast<size_t>(N),
                /*transB=*/false, out, static_cast<size_t>(N), {}, pool);
}

rt::Status gather(const float* table, int64_t vocab, int64_t dim, const int32_t* ids,
                  const Shape& idsShape, const char* idsName, float* out) {
  const int64_t n = idsShape.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] >= 0 && ids[i] < vocab) continue;
    int64_t idx[kMaxRank] = {};
    int64_t rem = i;
    for (int d = idsShape.rank - 1; d >= 0; --d) {
      idx[d] = rem % idsShape.dims[d];
      rem /= idsShape.dims[d];
    }
    std::string at = "[";
    for (int d = 0; d < idsShape.rank; ++d) at += (d ? ", " : "") + std::to_string(idx[d]);
    return rt::Status::error("token id " + std::to_string(ids[i]) + " in " + idsName + " at " +
                             at + "] is outside the vocabulary [0, " + std::to_string(vocab) +
                             ")");
  }
  const size_t rowBytes = static_cast<size_t>(dim) * sizeof(float);
  if (rowBytes == 0) return rt::Status::ok();
  for (int64_t i = 0; i < n; ++i) std::memcpy(out + i * dim, table + ids[i] * dim, rowBytes);
  return rt::Status::ok();
}

namespace {
// A label outside [0, vocab) other than `ignore`, as an error naming it;
// the number of rows that count.
rt::Status checkLabels(const int32_t* labels, int64_t rows, int64_t vocab, int32_t ignore,
                       const char* labelsName, int64_t* count) {
  *count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] == ignore) continue;
    if (labels[r] < 0 || labels[r] >= vocab)
      return rt::Status::error("label " + std::to_string(labels[r]) + " in " + labelsName +
                               " at row " + std::to_string(r) + " is outside the vocabulary [0, " +
                               std::to_string(vocab) + ")");
    ++*count;
  }
  return rt::Status::ok();
}
}  // namespace

rt::Status crossEntropyMean(const float* logits, const int32_t* labels, int64_t rows,
                            int64_t vocab, float smoothing, int32_t ignore, const char* labelsName,
                            float* out, rt::ThreadPool* pool) {
  int64_t count = 0;
  if (rt::Status s = checkLabels(labels, rows, vocab, ignore, labelsName, &count); !s.isOk())
    return s;
  thread_local std::vector<float> losses;
  losses.resize(static_cast<size_t>(rows));
  if (rt::Status s = kernels::crossEntropy(logits, labels, static_cast<size_t>(rows),
                                           static_cast<size_t>(vocab), smoothing, ignore,
                                           losses.data(), nullptr, 0.0f, pool);
      !s.isOk())
    return s;
  double sum = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    if (labels[r] != ignore) sum += losses[static_cast<size_t>(r)];
  *out = count ? static_cast<float>(sum / static_cast<double>(count)) : 0.0f;
  return rt::Status::ok();
}

rt::Status crossEntropyGrad(const float* logits, const int32_t* labels, int64_t rows,
                            int64_t vocab, float smoothing, int32_t ignore, const char* labelsName,
                            const float* g, float* out, rt::ThreadPool* pool) {
  int64_t count = 0;
  if (rt::Status s = checkLabels(labels, rows, vocab, ignore, labelsName, &count); !s.isOk())
    return s;
  thread_local std::vector<float> losses;
  losses.resize(static_cast<size_t>(rows));
  const float scale = count ? *g / static_cast<float>(count) : 0.0f;
  return kernels::crossEntropy(logits, labels, static_cast<size_t>(rows), static_cast<size_t>(vocab),
                               smoothing, ignore, losses.data(), out, scale, pool);
}

void expand(const float* x, const Shape& xs, float* out, const Shape& os) {
  if (os.numel() == 0) return;
  const Layout L = broadcastLayout(os, {&xs});
  const int64_t len = L.len(), sx = L.strides[0][L.rank - 1];
  forRows(L, 0, L.rows(), [&](const int64_t* off, int64_t r) {
    for (int64_t i = 0; i < len; ++i) out[r * len + i] = x[off[0] + i * sx];
  });
}

void activationGrad(ElementwiseKind kind, const float* x, const float* g, float* out, int64_t n,
                    rt::ThreadPool* pool) {
  kernels::activationGrad(kind, x, g, out, static_cast<size_t>(n), pool);
}

rt::Status embeddingGrad(const int32_t* ids, int64_t count, const float* g, int64_t vocab,
                         int64_t dim, const char* idsName, float* out) {
  for (int64_t i = 0; i < count; ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      return rt::Status::error("token id " + std::to_string(ids[i]) + " in " + idsName +
                               " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  std::fill(out, out + vocab * dim, 0.0f);
  for (int64_t i = 0; i < count; ++i)
    for (int64_t c = 0; c < dim; ++c) out[ids[i] * dim + c] += g[i * dim + c];
  return rt::Status::ok();
}

void sliceGrad(const float* g, const Shape& gs, int axis, int64_t start, float* out, const Shape& os) {
  std::fill(out, out + os.numel(), 0.0f);
  const int64_t outer = product(os.dims, 0, axis), inner = product(os.dims, axis + 1, os.rank);
  const int64_t n = gs.dims[axis];
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(g + o * n * inner, n * inner, out + (o * os.dims[axis] + start) * inner);
}

void dropout(const float* x, float* y, int64_t n, double rate, uint64_t seed, uint64_t step,
             uint64_t stream, rt::ThreadPool* pool) {
  kernels::dropout(x, y, static_cast<size_t>(n), rate, seed, step, stream, 0, pool);
}

void keyPaddingMask(const int32_t* tokens, int64_t n, int64_t padId, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = tokens[i] != padId ? 1 : 0;
}

void causalMask(int64_t sq, int64_t sk, uint8_t* out) {
  for (int64_t i = 0; i < sq; ++i) {
    const int64_t last = i + sk - sq;  // the last visible key of query i
    for (int64_t j = 0; j < sk; ++j) out[i * sk + j] = j <= last ? 1 : 0;
  }
}

void positionalEncoding(int64_t length, int64_t offset, int64_t dim, bool halves, float* out) {
  if (length <= 0 || dim <= 0) return;
  // Column j: frequency index i, sine or cosine.
  std::vector<double> freq(static_cast<size_t>(dim));
  std::vector<char> sine(static_cast<size_t>(dim));
  for (int64_t j = 0; j < dim; ++j) {
    const int64_t i = halves ? j % (dim / 2) : j / 2;
    freq[j] = std::pow(10000.0, -static_cast<double>(2 * i) / static_cast<double>(dim));
    sine[j] = halves ? j < dim / 2 : j % 2 == 0;
  }
  for (int64_t p = 0; p < length; ++p) {
    const double q = static_cast<double>(p + offset);
    float* row = out + p * dim;
    for (int64_t j = 0; j < dim; ++j) {
      const double angle = q * freq[j];
      row[j] = static_cast<float>(sine[j] ? std::sin(angle) : std::cos(angle));
    }
  }
}

void rotary(const float* x, float* out, int64_t outer, int64_t seq, int64_t width,
            int64_t headDim, const float* invFreq, int64_t pairs, int64_t offset, bool inverse) {
  std::vector<float> cosT(static_cast<size_t>(pairs)), sinT(static_cast<size_t>(pairs));
  for (int64_t s = 0; s < seq; ++s) {
    const float p = static_cast<float>(offset + s);
    for (int64_t i = 0; i < pairs; ++i) {
      kernels::math::rotaryCosSin(p, invFreq[i], &cosT[i], &sinT[i]);
      if (inverse) sinT[i] = -sinT[i];
    }
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t h = 0; h < width; h += headDim) {
        const float* xr = x + (o * seq + s) * width + h;
        float* yr = out + (o * seq + s) * width + h;
        for (int64_t i = 0; i < pairs; ++i) {
          // Each product rounded, then the sum (never contracted to an
          // FMA): the bits of the GEMM's rotary epilogue (kernels::gemm).
          const float a = xr[i], b = xr[i + pairs];
          const float ac = a * cosT[i], bs = b * sinT[i], bc = b * cosT[i], as = a * sinT[i];
          yr[i] = ac - bs;
          yr[i + pairs] = bc + as;
        }
        if (yr != xr)
          for (int64_t i = 2 * pairs; i < headDim; ++i) yr[i] = xr[i];
      }
  }
}

void copyBytes(const void* x, void* y, size_t n) {
  if (n > 0 && x != y) std::memmove(y, x, n);
}

namespace {
// The offset of (r, h, p, 0) in a state and the step between its D values.
int64_t stateOffset(const StateTensor& s, int64_t r, int64_t h, int64_t p) {
  int64_t plane = (r * s.heads + h) * s.positions * s.headDim;
  return s.keys ? plane + p : plane + p * s.headDim;
}
}  // namespace

void stateWrite(HeadsBlock in, int64_t b, int64_t n, StateTensor state, int64_t position) {
  const int64_t h = state.heads, d = state.headDim;
  const size_t rowStride = in.rowStride ? in.rowStride : size_t(d);
  const size_t headStride = in.headStride ? in.headStride : n * rowStride;
  const size_t batchStride = in.batchStride ? in.batchStride : h * headStride;
  const int64_t step = state.keys ? state.positions : 1;
  for (int64_t r = 0; r < b; ++r)
    for (int64_t hh = 0; hh < h; ++hh)
      for (int64_t p = 0; p < n; ++p) {
        const float* src = in.data + r * batchStride + hh * headStride + p * rowStride;
        float* dst = state.data + stateOffset(state, r, hh, position + p);
        for (int64_t j = 0; j < d; ++j) dst[j * step] = src[j];
      }
}

void freshRowIds(uint64_t* rowIds, int64_t b, uint64_t* serial) {
  for (int64_t r = 0; r < b; ++r) rowIds[r] = ++*serial;
}

void stateRead(StateTensor state, int64_t b, int64_t n, float* out) {
  const int64_t h = state.heads, d = state.headDim;
  const int64_t step = state.keys ? state.positions : 1;
  for (int64_t r = 0; r < b; ++r)
    for (int64_t hh = 0; hh < h; ++hh)
      for (int64_t p = 0; p < n; ++p) {
        const float* src = state.data + stateOffset(state, r, hh, p);
        float* dst = out + ((r * h + hh) * n + p) * d;
        for (int64_t j = 0; j < d; ++j) dst[j] = src[j * step];
      }
}

}  // namespace transfuse::exec
