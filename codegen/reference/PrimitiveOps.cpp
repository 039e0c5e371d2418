//===- PrimitiveOps.cpp - the reference backend's primitive ops -----------===//
//
// The ops of TransfuseOps.td that take more than a line of the dispatch in
// Interpreter.cpp: broadcasting, batched matmul, reductions, reshape,
// transpose, concat, split, slice, gather and constants; and the per-row
// math (softmax, layer norm, dropout) the fused and gradient ops reuse.
//
//===----------------------------------------------------------------------===//

#include "codegen/reference/InterpreterOps.h"

#include "codegen/lowering/OpMath.h"
#include "runtime/Philox.h"

#include <cmath>
#include <limits>

namespace mlir::transfuse::reference::detail {

LogicalResult Interpreter::broadcast(Operation *op, ArrayRef<int64_t> a,
                                     ArrayRef<int64_t> b, Shape &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return fail(op, "shapes " + str(a) + " and " + str(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return success();
}

LogicalResult Interpreter::matmul(Operation *op, const Buf &a, const Buf &b, bool ta,
                                  bool tb, Buf &r) {
  size_t ra = a.shape.size(), rb = b.shape.size();
  int64_t m = ta ? a.shape[ra - 1] : a.shape[ra - 2];
  int64_t k = ta ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t kb = tb ? b.shape[rb - 1] : b.shape[rb - 2];
  int64_t n = tb ? b.shape[rb - 2] : b.shape[rb - 1];
  if (k != kb)
    return fail(op, "contraction sizes differ at run time: " + str(a.shape) + " vs " + str(b.shape));
  ArrayRef<int64_t> batchA = ArrayRef<int64_t>(a.shape).drop_back(2);
  ArrayRef<int64_t> batchB = ArrayRef<int64_t>(b.shape).drop_back(2);
  if (failed(broadcast(op, batchA, batchB, r.shape)))
    return failure();
  Shape batch = r.shape;
  r.shape.push_back(m);
  r.shape.push_back(n);
  r.data.assign(numel(r.shape), 0.0);
  // Per-matrix strides of A and B (element (i, j) of op(A) is A[i*sa0 + j*sa1]).
  int64_t sa0 = ta ? 1 : k, sa1 = ta ? m : 1;
  int64_t sb0 = tb ? 1 : n, sb1 = tb ? k : 1;
  Shape stA = broadcastStrides(batchA, batch), stB = broadcastStrides(batchB, batch);
  for (int64_t &s : stA) s *= m * k;
  for (int64_t &s : stB) s *= k * n;
  std::array<Shape, 2> strides = {stA, stB};
  forEachBroadcast<2>(batch, strides, [&](int64_t bi, const std::array<int64_t, 2> &o) {
    const double *pa = a.data.data() + o[0], *pb = b.data.data() + o[1];
    double *pc = r.data.data() + bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t p = 0; p < k; ++p)
          acc += pa[i * sa0 + p * sa1] * pb[p * sb0 + j * sb1];
        pc[i * n + j] = acc;
      }
  });
  return success();
}

void softmaxInPlace(Buf &r, int64_t axis) {
  forEachRow(r.shape, axis, [&](int64_t base, int64_t stride, int64_t len) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < len; ++i)
      mx = std::max(mx, r.data[base + i * stride]);
    if (mx == -std::numeric_limits<double>::infinity()) { // every entry masked
      for (int64_t i = 0; i < len; ++i)
        r.data[base + i * stride] = 0.0;
      return;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < len; ++i)
      sum += r.data[base + i * stride] = std::exp(r.data[base + i * stride] - mx);
    for (int64_t i = 0; i < len; ++i)
      r.data[base + i * stride] /= sum;
  });
}

std::pair<double, double> meanAndRstd(const double *x, int64_t n, double eps, bool rms) {
  double mean = 0.0, var = 0.0;
  for (int64_t i = 0; i < n && !rms; ++i)
    mean += x[i];
  mean /= n;
  for (int64_t i = 0; i < n; ++i)
    var += (x[i] - mean) * (x[i] - mean);
  var /= n;
  return {mean, 1.0 / std::sqrt(var + eps)};
}

void layerNormInPlace(Buf &r, const Buf &g, const Buf *b, int64_t n, double eps, bool rms) {
  for (int64_t base = 0; base < (int64_t)r.data.size(); base += n) {
    auto [mean, inv] = meanAndRstd(r.data.data() + base, n, eps, rms);
    for (int64_t i = 0; i < n; ++i)
      r.data[base + i] = (r.data[base + i] - mean) * inv * g.data[i] + (b ? b->data[i] : 0.0);
  }
}

void rotaryInPlace(Buf &r, const Buf &freq, int64_t headDim, int64_t columns, int64_t offset,
                   bool inverse) {
  const int64_t n = r.shape.back(), seq = r.shape[r.shape.size() - 2];
  const int64_t half = (int64_t)freq.data.size();
  for (int64_t row = 0; row < (int64_t)r.data.size() / n; ++row) {
    const float pos = (float)(offset + row % seq);
    for (int64_t h = 0; h < columns / headDim; ++h) {
      double *v = r.data.data() + row * n + h * headDim;
      for (int64_t i = 0; i < half; ++i) {
        const double angle = (float)(pos * (float)freq.data[i]); // as Hugging Face rounds it
        const double c = std::cos(angle), sn = inverse ? -std::sin(angle) : std::sin(angle);
        const double a = v[i], b = v[i + half];
        v[i] = a * c - b * sn;
        v[i + half] = b * c + a * sn;
      }
    }
  }
}

void dropoutInPlace(Buf &r, double rate, uint64_t seed, uint64_t step, uint64_t stream) {
  double keepScale = 1.0 / (1.0 - rate);
  for (size_t i = 0; i < r.data.size(); ++i)
    r.data[i] = rt::philoxUniform(seed, step, stream, i) >= rate ? r.data[i] * keepScale : 0.0;
}

LogicalResult Interpreter::evalReduce(Operation *op, Value input, ArrayRef<int64_t> axes,
                                      bool keep) {
  const Buf &in = get(input);
  int64_t rank = in.shape.size();
  SmallVector<bool> reduced(rank, false);
  for (int64_t a : axes)
    reduced[a < 0 ? a + rank : a] = true;
  Shape kept; // the result shape with reduced dims as 1
  for (int64_t d = 0; d < rank; ++d)
    kept.push_back(reduced[d] ? 1 : in.shape[d]);
  bool isMax = isa<ReduceMaxOp>(op);
  Buf r;
  r.data.assign(numel(kept), isMax ? -std::numeric_limits<double>::infinity() : 0.0);
  std::array<Shape, 1> strides = {broadcastStrides(kept, in.shape)};
  forEachBroadcast<1>(in.shape, strides, [&](int64_t i, const std::array<int64_t, 1> &o) {
    double &acc = r.data[o[0]];
    acc = isMax ? std::max(acc, in.data[i]) : acc + in.data[i];
  });
  if (isa<ReduceMeanOp>(op)) {
    int64_t count = numel(in.shape) / std::max<int64_t>(1, numel(kept));
    for (double &x : r.data)
      x /= count;
  }
  for (int64_t d = 0; d < rank; ++d)
    if (!reduced[d] || keep)
      r.shape.push_back(kept[d]);
  set(op->getResult(0), std::move(r));
  return success();
}

LogicalResult Interpreter::evalReshape(ReshapeOp op) {
  Buf r = get(op.getInput());
  auto inType = op.getInput().getType();
  SmallVector<int64_t> dynamicSizes;
  for (int64_t d = 0; d < inType.getRank(); ++d)
    if (inType.isDynamicDim(d))
      dynamicSizes.push_back(r.shape[d]);
  Shape shape;
  size_t next = 0;
  for (int64_t size : op.getType().getShape())
    shape.push_back(ShapedType::isDynamic(size) ? dynamicSizes[next++] : size);
  if (numel(shape) != (int64_t)r.data.size())
    return fail(op, "cannot reshape " + str(r.shape) + " to " + str(shape));
  r.shape = shape;
  set(op.getResult(), std::move(r));
  return success();
}

LogicalResult Interpreter::evalTranspose(TransposeOp op) {
  const Buf &in = get(op.getInput());
  ArrayRef<int64_t> perm = op.getPermutation();
  Buf r;
  Shape inStrides = stridesOf(in.shape), permuted;
  for (int64_t p : perm) {
    r.shape.push_back(in.shape[p]);
    permuted.push_back(inStrides[p]);
  }
  r.data.resize(in.data.size());
  std::array<Shape, 1> strides = {permuted};
  forEachBroadcast<1>(r.shape, strides, [&](int64_t i, const std::array<int64_t, 1> &o) {
    r.data[i] = in.data[o[0]];
  });
  set(op.getResult(), std::move(r));
  return success();
}

LogicalResult Interpreter::evalConcat(ConcatOp op) {
  const Buf &first = get(op.getInputs().front());
  int64_t axis = normalizedAxis(op.getAxis(), (int64_t)first.shape.size());
  Buf r;
  r.shape = first.shape;
  r.shape[axis] = 0;
  for (Value v : op.getInputs()) {
    const Buf &b = get(v);
    for (size_t d = 0; d < b.shape.size(); ++d)
      if ((int64_t)d != axis && b.shape[d] != first.shape[d])
        return fail(op, "inputs " + str(first.shape) + " and " + str(b.shape) +
                            " differ outside the concat axis");
    r.shape[axis] += b.shape[axis];
  }
  int64_t outer = numel(ArrayRef<int64_t>(r.shape).take_front(axis));
  int64_t inner = numel(ArrayRef<int64_t>(r.shape).drop_front(axis + 1));
  r.data.reserve(numel(r.shape));
  for (int64_t o = 0; o < outer; ++o)
    for (Value v : op.getInputs()) {
      const Buf &b = get(v);
      int64_t chunk = b.shape[axis] * inner;
      r.data.insert(r.data.end(), b.data.begin() + o * chunk, b.data.begin() + (o + 1) * chunk);
    }
  set(op.getResult(), std::move(r));
  return success();
}

/// Copies [start, start + size) of `axis` of `in`.
static Buf sliceAxis(const Buf &in, int64_t axis, int64_t start, int64_t size) {
  Buf r;
  r.shape = in.shape;
  r.shape[axis] = size;
  int64_t outer = numel(ArrayRef<int64_t>(in.shape).take_front(axis));
  int64_t inner = numel(ArrayRef<int64_t>(in.shape).drop_front(axis + 1));
  r.data.reserve(numel(r.shape));
  for (int64_t o = 0; o < outer; ++o) {
    auto begin = in.data.begin() + (o * in.shape[axis] + start) * inner;
    r.data.insert(r.data.end(), begin, begin + size * inner);
  }
  return r;
}

LogicalResult Interpreter::evalSplit(SplitOp op) {
  const Buf &in = get(op.getInput());
  int64_t axis = normalizedAxis(op.getAxis(), (int64_t)in.shape.size());
  int64_t start = 0;
  for (auto [result, size] : llvm::zip(op.getResults(), op.getSizes())) {
    set(result, sliceAxis(in, axis, start, size));
    start += size;
  }
  return success();
}

LogicalResult Interpreter::evalSlice(SliceOp op) {
  const Buf &in = get(op.getInput());
  int64_t axis = normalizedAxis(op.getAxis(), (int64_t)in.shape.size());
  int64_t start = op.getStart() + (op.getOffset() ? indices[op.getOffset()] : 0);
  int64_t size = op.getLength() ? indices[op.getLength()] : *op.getSize();
  if (size < 0 || start < 0 || start + size > in.shape[axis])
    return fail(op, "slice [" + std::to_string(start) + ", " + std::to_string(start + size) +
                        ") is outside axis " + std::to_string(axis) + " of size " +
                        std::to_string(in.shape[axis]));
  set(op.getResult(), sliceAxis(in, axis, start, size));
  return success();
}

LogicalResult Interpreter::evalGather(GatherOp op) {
  const Buf &table = get(op.getTable()), &ids = get(op.getIds());
  int64_t vocab = table.shape[0], d = table.shape[1];
  Buf r;
  r.shape = ids.shape;
  r.shape.push_back(d);
  r.data.reserve(numel(r.shape));
  for (double id : ids.data) {
    if (id < 0 || id >= vocab)
      return fail(op, "token id " + std::to_string((int64_t)id) + " in " + nameOf(op.getIds()) +
                          " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    auto row = table.data.begin() + (int64_t)id * d;
    r.data.insert(r.data.end(), row, row + d);
  }
  set(op.getResult(), std::move(r));
  return success();
}

LogicalResult Interpreter::evalConstant(ConstantOp op) {
  auto attr = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!attr)
    return fail(op, "only dense constants are supported");
  Buf r;
  r.shape.assign(op.getType().getShape().begin(), op.getType().getShape().end());
  if (isa<FloatType>(attr.getElementType())) {
    for (const APFloat &v : attr.getValues<APFloat>())
      r.data.push_back(v.convertToDouble());
  } else {
    bool isBool = attr.getElementType().isInteger(1);
    for (const APInt &v : attr.getValues<APInt>())
      r.data.push_back(isBool ? (double)v.getBoolValue() : (double)v.getSExtValue());
  }
  set(op.getResult(), std::move(r));
  return success();
}

} // namespace mlir::transfuse::reference::detail
