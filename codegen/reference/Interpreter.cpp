//===- Interpreter.cpp - the reference backend: fp64, plain loops ---------===//
//
// Every value is a Buf: a row-major shape and fp64 data (token ids and
// booleans are stored as exact doubles). Index values (from transfuse.dim)
// are int64. Ops are evaluated in program order.
//
//===----------------------------------------------------------------------===//

#include "codegen/reference/Interpreter.h"

#include "codegen/Interface.h"
#include "codegen/lowering/OpMath.h"
#include "ir/State.h"
#include "ir/TransfuseDialect.h"
#include "passes/Passes.h"
#include "runtime/Philox.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

using namespace mlir;
using namespace mlir::transfuse;
using mlir::transfuse::reference::DropoutKey;
using mlir::transfuse::reference::State;
using mlir::transfuse::reference::TensorMap;
namespace rt = ::transfuse::rt;

namespace {

using Shape = SmallVector<int64_t, 4>;

struct Buf {
  Shape shape;
  std::vector<double> data;
};

int64_t numel(ArrayRef<int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

Shape stridesOf(ArrayRef<int64_t> shape) {
  Shape s(shape.size(), 1);
  for (int64_t i = (int64_t)shape.size() - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

std::string str(ArrayRef<int64_t> shape) {
  return rt::shapeToString(std::vector<int64_t>(shape.begin(), shape.end()));
}

/// Strides of `in` broadcast (right-aligned) to `out`: 0 where broadcast.
Shape broadcastStrides(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
  Shape strides(out.size(), 0), own = stridesOf(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    strides[off + i] = in[i] == 1 ? 0 : own[i];
  return strides;
}

/// Calls f(outIndex, offsets...) for every element of `out`, with each
/// operand's offset advanced by its (broadcast) strides.
template <size_t N, typename F>
void forEachBroadcast(ArrayRef<int64_t> out, const std::array<Shape, N> &strides, F f) {
  int64_t total = numel(out);
  Shape idx(out.size(), 0);
  std::array<int64_t, N> offs{};
  for (int64_t linear = 0; linear < total; ++linear) {
    f(linear, offs);
    for (int64_t d = (int64_t)out.size() - 1; d >= 0; --d) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k)
        offs[k] += strides[k][d];
      if (idx[d] < out[d])
        break;
      for (size_t k = 0; k < N; ++k)
        offs[k] -= strides[k][d] * out[d];
      idx[d] = 0;
    }
  }
}

class Interpreter {
public:
  Interpreter(const TensorMap &weights, bool f64Outputs)
      : weights(weights), f64Outputs(f64Outputs) {}

  llvm::Expected<TensorMap> run(func::FuncOp func, const TensorMap &inputs,
                                const EntryPoint &ep);

  State *state = nullptr;          // a copy the caller commits on success
  DropoutKey key;                  // added to every dropout's seed and step
  std::optional<int64_t> appended; // positions this call appended

private:
  LogicalResult eval(Operation *op);
  // std::unordered_map keeps references stable while values are added.
  Buf &get(Value v) { return values.at(v.getAsOpaquePointer()); }
  void set(Value v, Buf b) { values[v.getAsOpaquePointer()] = std::move(b); }
  LogicalResult fail(Operation *op, const llvm::Twine &message) {
    std::string loc;
    llvm::raw_string_ostream os(loc);
    op->getLoc().print(os);
    error = loc + ": '" + op->getName().getStringRef().str() + "': " + message.str();
    return failure();
  }
  /// The user-facing name of a value: an input's name, or "the operand".
  std::string nameOf(Value v) {
    auto it = argNames.find(v);
    return it != argNames.end() ? "input '" + it->second + "'" : std::string("an operand");
  }
  LogicalResult broadcast(Operation *op, ArrayRef<int64_t> a, ArrayRef<int64_t> b, Shape &out);
  template <typename F>
  LogicalResult binary(Operation *op, const Buf &a, const Buf &b, F f, Buf &r);
  template <typename F>
  LogicalResult binary(Operation *op, Value lhs, Value rhs, F f);
  LogicalResult matmul(Operation *op, const Buf &a, const Buf &b, bool ta, bool tb, Buf &r);
  template <typename F>
  void unary(Operation *op, Value in, F f);

  LogicalResult attentionProbs(Operation *op, Value query, Value key, double scale, Value bias,
                               bool causal, Value keyPadding, Value mask, Buf &s);
  LogicalResult evalAttention(AttentionOp op);
  LogicalResult evalAttentionGrad(AttentionGradOp op);
  LogicalResult evalLinear(LinearOp op);
  LogicalResult evalFusedElementwise(FusedElementwiseOp op);
  LogicalResult evalReduce(Operation *op, Value input, ArrayRef<int64_t> axes, bool keep);
  LogicalResult evalReshape(ReshapeOp op);
  LogicalResult evalTranspose(TransposeOp op);
  LogicalResult evalConcat(ConcatOp op);
  LogicalResult evalSplit(SplitOp op);
  LogicalResult evalSlice(SliceOp op);
  LogicalResult evalGather(GatherOp op);
  LogicalResult evalConstant(ConstantOp op);
  LogicalResult evalState(Operation *op);
  LogicalResult evalCrossEntropy(Operation *op, Value logits, Value labels, double smoothing,
                                 int64_t ignore, const Buf *grad);
  LogicalResult evalLayerNormGrad(LayerNormGradOp op);
  LogicalResult evalEmbeddingGrad(EmbeddingGradOp op);
  LogicalResult evalSliceGrad(SliceGradOp op);
  LogicalResult evalWeightGrad(WeightGradOp op);

  const TensorMap &weights;
  bool f64Outputs;
  std::unordered_map<const void *, Buf> values;
  llvm::DenseMap<Value, int64_t> indices;
  llvm::DenseMap<Value, std::string> argNames;
  std::string error;
};

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

template <typename F>
LogicalResult Interpreter::binary(Operation *op, const Buf &a, const Buf &b, F f, Buf &r) {
  if (failed(broadcast(op, a.shape, b.shape, r.shape)))
    return failure();
  r.data.resize(numel(r.shape));
  std::array<Shape, 2> strides = {broadcastStrides(a.shape, r.shape),
                                  broadcastStrides(b.shape, r.shape)};
  forEachBroadcast<2>(r.shape, strides, [&](int64_t i, const std::array<int64_t, 2> &o) {
    r.data[i] = f(a.data[o[0]], b.data[o[1]]);
  });
  return success();
}

template <typename F>
LogicalResult Interpreter::binary(Operation *op, Value lhs, Value rhs, F f) {
  Buf r;
  if (failed(binary(op, get(lhs), get(rhs), f, r)))
    return failure();
  set(op->getResult(0), std::move(r));
  return success();
}

template <typename F>
void Interpreter::unary(Operation *op, Value in, F f) {
  Buf r = get(in);
  for (double &x : r.data)
    x = f(x);
  set(op->getResult(0), std::move(r));
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

/// Visits each 1-D row along `axis`: f(base offset, stride, length).
template <typename F>
void forEachRow(ArrayRef<int64_t> shape, int64_t axis, F f) {
  int64_t len = shape[axis], inner = numel(shape.drop_front(axis + 1));
  int64_t outer = numel(shape.take_front(axis));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in)
      f(o * len * inner + in, inner, len);
}

/// Softmax along `axis`; a row whose entries are all -inf becomes zeros.
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

/// The mean of `n` values and 1/sqrt(biased variance + eps).
std::pair<double, double> meanAndRstd(const double *x, int64_t n, double eps) {
  double mean = 0.0, var = 0.0;
  for (int64_t i = 0; i < n; ++i)
    mean += x[i];
  mean /= n;
  for (int64_t i = 0; i < n; ++i)
    var += (x[i] - mean) * (x[i] - mean);
  var /= n;
  return {mean, 1.0 / std::sqrt(var + eps)};
}

/// Layer norm over the trailing `n` elements of each row: biased variance.
void layerNormInPlace(Buf &r, const Buf &g, const Buf &b, int64_t n, double eps) {
  for (int64_t base = 0; base < (int64_t)r.data.size(); base += n) {
    auto [mean, inv] = meanAndRstd(r.data.data() + base, n, eps);
    for (int64_t i = 0; i < n; ++i)
      r.data[base + i] = (r.data[base + i] - mean) * inv * g.data[i] + b.data[i];
  }
}

/// Inverted dropout with the Philox draw of transfuse.dropout.
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

LogicalResult Interpreter::evalSliceGrad(SliceGradOp op) {
  const Buf &g = get(op.getGrad()), &like = get(op.getLike());
  const int64_t axis = normalizedAxis(op.getAxis(), (int64_t)like.shape.size());
  const int64_t start = op.getStart() + (op.getOffset() ? indices[op.getOffset()] : 0);
  const int64_t size = g.shape.size() == like.shape.size() ? g.shape[axis] : -1;
  if (size < 0 || start < 0 || start + size > like.shape[axis])
    return fail(op, "grad " + str(g.shape) + " at " + std::to_string(start) +
                        " does not fit axis " + std::to_string(axis) + " of " + str(like.shape));
  Buf r{like.shape, std::vector<double>(like.data.size(), 0.0)};
  const int64_t outer = numel(ArrayRef<int64_t>(like.shape).take_front(axis));
  const int64_t inner = numel(ArrayRef<int64_t>(like.shape).drop_front(axis + 1));
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(g.data.begin() + o * size * inner, size * inner,
                r.data.begin() + (o * like.shape[axis] + start) * inner);
  set(op.getResult(), std::move(r));
  return success();
}

LogicalResult Interpreter::evalWeightGrad(WeightGradOp op) {
  const Buf &x = get(op.getInput()), &g = get(op.getGrad());
  const int64_t K = x.shape.back(), N = g.shape.back();
  if (x.shape.size() != g.shape.size() ||
      !std::equal(x.shape.begin(), x.shape.end() - 1, g.shape.begin()))
    return fail(op, "input " + str(x.shape) + " and grad " + str(g.shape) +
                        " differ in their leading dimensions");
  const int64_t rows = K > 0 ? (int64_t)x.data.size() / K : 0;
  Buf r{{K, N}, std::vector<double>(K * N, 0.0)};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = 0; k < K; ++k) {
      const double xv = x.data[i * K + k];
      for (int64_t n = 0; n < N; ++n)
        r.data[k * N + n] += xv * g.data[i * N + n];
    }
  set(op.getResult(), std::move(r));
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

/// cross_entropy (grad null) or cross_entropy_grad (grad: the loss's
/// gradient, rank 0), as TransfuseGradOps.td defines them.
LogicalResult Interpreter::evalCrossEntropy(Operation *op, Value logitsValue, Value labelsValue,
                                            double eps, int64_t ignore, const Buf *grad) {
  const Buf &logits = get(logitsValue), &labels = get(labelsValue);
  const int64_t V = logits.shape.back(), rows = (int64_t)labels.data.size();
  if (rows * V != (int64_t)logits.data.size())
    return fail(op, "logits " + str(logits.shape) + " do not match labels " + str(labels.shape));
  int64_t count = 0;
  for (double y : labels.data) {
    if ((int64_t)y == ignore)
      continue;
    if (y < 0 || y >= V)
      return fail(op, "label " + std::to_string((int64_t)y) + " in " + nameOf(labelsValue) +
                          " is outside the vocabulary [0, " + std::to_string(V) + ")");
    ++count;
  }
  Buf r;
  if (grad) {
    r.shape = logits.shape;
    r.data.assign(logits.data.size(), 0.0);
  } else {
    r.data.assign(1, 0.0);
  }
  double total = 0.0;
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t y = (int64_t)labels.data[t];
    if (y == ignore)
      continue;
    const double *x = logits.data.data() + t * V;
    double mx = -std::numeric_limits<double>::infinity(), sum = 0.0;
    for (int64_t c = 0; c < V; ++c)
      mx = std::max(mx, x[c]);
    for (int64_t c = 0; c < V; ++c)
      sum += std::exp(x[c] - mx);
    const double lse = mx + std::log(sum);
    if (grad) {
      const double scale = grad->data[0] / (double)count;
      for (int64_t c = 0; c < V; ++c)
        r.data[t * V + c] = scale * (std::exp(x[c] - lse) - (c == y ? 1.0 - eps : 0.0) - eps / V);
    } else {
      double all = 0.0; // Σ_c -log p_c
      for (int64_t c = 0; c < V; ++c)
        all += lse - x[c];
      total += (1.0 - eps) * (lse - x[y]) + eps / V * all;
    }
  }
  if (!grad)
    r.data[0] = count ? total / (double)count : 0.0;
  set(op->getResult(0), std::move(r));
  return success();
}

LogicalResult Interpreter::evalLayerNormGrad(LayerNormGradOp op) {
  const Buf &x = get(op.getInput()), &gamma = get(op.getGamma()), &dy = get(op.getGrad());
  const int64_t axis = normalizedAxis(op.getAxis(), (int64_t)x.shape.size());
  const int64_t n = numel(ArrayRef<int64_t>(x.shape).drop_front(axis));
  const double eps = op.getEpsilon().convertToDouble();
  if (dy.data.size() != x.data.size())
    return fail(op, "grad " + str(dy.shape) + " is not the input's " + str(x.shape));
  Buf dx{x.shape, std::vector<double>(x.data.size())};
  Buf dg{gamma.shape, std::vector<double>(n, 0.0)}, db{gamma.shape, std::vector<double>(n, 0.0)};
  std::vector<double> xhat(n), d(n);
  for (int64_t base = 0; base < (int64_t)x.data.size(); base += n) {
    auto [mean, r] = meanAndRstd(x.data.data() + base, n, eps);
    double md = 0.0, mdx = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      xhat[i] = (x.data[base + i] - mean) * r;
      d[i] = dy.data[base + i] * gamma.data[i];
      md += d[i];
      mdx += d[i] * xhat[i];
      dg.data[i] += dy.data[base + i] * xhat[i];
      db.data[i] += dy.data[base + i];
    }
    md /= n;
    mdx /= n;
    for (int64_t i = 0; i < n; ++i)
      dx.data[base + i] = r * (d[i] - md - xhat[i] * mdx);
  }
  set(op.getInputGrad(), std::move(dx));
  set(op.getGammaGrad(), std::move(dg));
  set(op.getBetaGrad(), std::move(db));
  return success();
}

LogicalResult Interpreter::evalEmbeddingGrad(EmbeddingGradOp op) {
  const Buf &ids = get(op.getIds()), &g = get(op.getGrad());
  auto type = cast<RankedTensorType>(op.getType());
  const int64_t V = type.getDimSize(0), D = type.getDimSize(1);
  if ((int64_t)(ids.data.size() * D) != (int64_t)g.data.size())
    return fail(op, "grad " + str(g.shape) + " does not match ids " + str(ids.shape));
  Buf r{Shape{V, D}, std::vector<double>(V * D, 0.0)};
  for (size_t i = 0; i < ids.data.size(); ++i) {
    const int64_t id = (int64_t)ids.data[i];
    if (id < 0 || id >= V)
      return fail(op, "token id " + std::to_string(id) + " in " + nameOf(op.getIds()) +
                          " is outside the vocabulary [0, " + std::to_string(V) + ")");
    for (int64_t c = 0; c < D; ++c)
      r.data[id * D + c] += g.data[i * D + c];
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

/// The definition in TransfuseFusedOps.td, step by step on the primitives.
/// softmax(mask(scale·Q·Kᵀ + bias)) over the keys, into `s` [B, H, Sq, Sk]
/// (attention and attention_grad; masks as TransfuseFusedOps.td says).
LogicalResult Interpreter::attentionProbs(Operation *op, Value query, Value key, double scale,
                                          Value bias, bool causal, Value keyPadding, Value mask,
                                          Buf &s) {
  if (failed(matmul(op, get(query), get(key), false, /*tb=*/true, s)))
    return failure();
  for (double &x : s.data)
    x *= scale;
  if (bias) {
    Buf biased;
    if (failed(binary(op, s, get(bias), std::plus<>(), biased)))
      return failure();
    if (biased.shape != s.shape)
      return fail(op, "bias " + str(get(bias).shape) + " does not broadcast to the scores " + str(s.shape));
    s = std::move(biased);
  }
  int64_t B = s.shape[0], Sq = s.shape[2], Sk = s.shape[3];
  const double ninf = -std::numeric_limits<double>::infinity();
  auto applyMask = [&](const Buf &keep) -> LogicalResult {
    Buf masked;
    if (failed(broadcast(op, keep.shape, s.shape, masked.shape)) || masked.shape != s.shape)
      return fail(op, "mask " + str(keep.shape) + " does not broadcast to the scores " + str(s.shape));
    std::array<Shape, 1> strides = {broadcastStrides(keep.shape, s.shape)};
    forEachBroadcast<1>(s.shape, strides, [&](int64_t i, const std::array<int64_t, 1> &o) {
      if (keep.data[o[0]] == 0.0)
        s.data[i] = ninf;
    });
    return success();
  };
  if (causal) {
    Buf c{{Sq, Sk}, std::vector<double>(Sq * Sk)};
    for (int64_t i = 0; i < Sq; ++i)
      for (int64_t j = 0; j < Sk; ++j)
        c.data[i * Sk + j] = j <= i + Sk - Sq;
    if (failed(applyMask(c)))
      return failure();
  }
  if (keyPadding) {
    Buf kp = get(keyPadding);
    if (kp.shape != Shape{B, Sk})
      return fail(op, "key_padding is " + str(kp.shape) + ", expected " + str({B, Sk}));
    kp.shape = {B, 1, 1, Sk};
    if (failed(applyMask(kp)))
      return failure();
  }
  if (mask && failed(applyMask(get(mask))))
    return failure();
  softmaxInPlace(s, 3);
  return success();
}

LogicalResult Interpreter::evalAttention(AttentionOp op) {
  Buf s;
  if (failed(attentionProbs(op, op.getQuery(), op.getKey(), op.getScale().convertToDouble(),
                            op.getBias(), op.getCausal(), op.getKeyPadding(), op.getMask(), s)))
    return failure();
  if (double rate = op.getDropoutRate().convertToDouble(); rate > 0.0)
    dropoutInPlace(s, rate, op.getDropoutSeed() + key.seed, key.step, op.getDropoutStream());
  Buf r;
  if (failed(matmul(op, s, get(op.getValue()), false, false, r)))
    return failure();
  set(op.getResult(), std::move(r));
  return success();
}

LogicalResult Interpreter::evalAttentionGrad(AttentionGradOp op) {
  const double scale = op.getScale().convertToDouble(), rate = op.getDropoutRate().convertToDouble();
  Buf p;
  if (failed(attentionProbs(op, op.getQuery(), op.getKey(), scale, Value(), op.getCausal(),
                            op.getKeyPadding(), op.getMask(), p)))
    return failure();
  const Buf &g = get(op.getGrad());
  Buf pd = p, dv, dp, dq, dk;
  if (rate > 0.0)
    dropoutInPlace(pd, rate, op.getDropoutSeed() + key.seed, key.step, op.getDropoutStream());
  if (failed(matmul(op, pd, g, /*ta=*/true, false, dv)) ||
      failed(matmul(op, g, get(op.getValue()), false, /*tb=*/true, dp)))
    return failure();
  if (rate > 0.0) // through the same mask and scale
    dropoutInPlace(dp, rate, op.getDropoutSeed() + key.seed, key.step, op.getDropoutStream());
  forEachRow(p.shape, 3, [&](int64_t base, int64_t stride, int64_t len) {
    double dot = 0.0;
    for (int64_t j = 0; j < len; ++j)
      dot += dp.data[base + j * stride] * p.data[base + j * stride];
    for (int64_t j = 0; j < len; ++j) { // dS, scaled: the scores were scale·Q·Kᵀ
      double &d = dp.data[base + j * stride];
      d = p.data[base + j * stride] * (d - dot) * scale;
    }
  });
  if (failed(matmul(op, dp, get(op.getKey()), false, false, dq)) ||
      failed(matmul(op, dp, get(op.getQuery()), /*ta=*/true, false, dk)))
    return failure();
  set(op.getQueryGrad(), std::move(dq));
  set(op.getKeyGrad(), std::move(dk));
  set(op.getValueGrad(), std::move(dv));
  return success();
}

LogicalResult Interpreter::evalLinear(LinearOp op) {
  const Buf &x = get(op.getInput()), &w = get(op.getWeight());
  Buf r;
  if (failed(matmul(op, x, w, false, op.getTransposeWeight(), r)))
    return failure();
  if (op.getBias()) {
    Buf biased;
    if (failed(binary(op, r, get(op.getBias()), std::plus<>(), biased)))
      return failure();
    r = std::move(biased);
  }
  if (std::optional<math::Kind> act = activationKind(op.getActivation()))
    for (double &y : r.data)
      y = math::apply(*act, y);
  if (op.getResidual()) {
    Buf sum;
    if (failed(binary(op, r, get(op.getResidual()), std::plus<>(), sum)))
      return failure();
    if (sum.shape != r.shape)
      return fail(op, "residual " + str(get(op.getResidual()).shape) + " does not broadcast to " + str(r.shape));
    r = std::move(sum);
  }
  set(op.getResult(), std::move(r));
  return success();
}

LogicalResult Interpreter::evalFusedElementwise(FusedElementwiseOp op) {
  Block &body = op.getBody().front();
  for (auto [arg, input] : llvm::zip(body.getArguments(), op.getInputs()))
    set(arg, get(input));
  for (Operation &inner : body.without_terminator())
    if (failed(eval(&inner)))
      return failure();
  set(op.getResult(), get(cast<YieldOp>(body.getTerminator()).getValue()));
  for (Operation &inner : body.without_terminator())
    for (Value result : inner.getResults())
      values.erase(result.getAsOpaquePointer());
  for (BlockArgument arg : body.getArguments())
    values.erase(arg.getAsOpaquePointer());
  return success();
}

LogicalResult Interpreter::eval(Operation *op) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ParamOp p) {
        auto it = weights.find(p.getName().str());
        if (it == weights.end())
          return fail(op, "no weights for parameter '" + p.getName() + "'");
        const rt::Tensor &t = it->second; // F32 weights; F64 outputs of @prepare
        Buf r;
        r.shape.assign(t.shape.begin(), t.shape.end());
        if (t.dtype == rt::DType::F64)
          r.data.assign(t.data<double>(), t.data<double>() + t.numElements());
        else
          r.data.assign(t.data<float>(), t.data<float>() + t.numElements());
        set(p.getResult(), std::move(r));
        return success();
      })
      .Case([&](ConstantOp c) { return evalConstant(c); })
      .Case([&](DimOp d) {
        const Shape &shape = get(d.getInput()).shape;
        indices[d.getResult()] = shape[normalizedAxis(d.getAxis(), (int64_t)shape.size())];
        return success();
      })
      .Case([&](GatherOp g) { return evalGather(g); })
      .Case([&](MatmulOp m) {
        Buf r;
        if (failed(matmul(op, get(m.getLhs()), get(m.getRhs()), m.getTransposeLhs(),
                          m.getTransposeRhs(), r)))
          return failure();
        set(m.getResult(), std::move(r));
        return success();
      })
      .Case<AddOp, SubOp, MulOp, DivOp>([&](auto o) {
        math::Kind k = *mathKindOf(op);
        return binary(op, o.getLhs(), o.getRhs(),
                      [k](double x, double y) { return math::apply(k, x, y); });
      })
      .Case([&](ScaleOp o) {
        double f = o.getFactor().convertToDouble();
        unary(op, o.getInput(), [f](double x) { return x * f; });
        return success();
      })
      .Case<ReluOp, ExpOp, TanhOp, GeluOp, SiluOp>([&](auto o) {
        math::Kind k = *mathKindOf(op);
        unary(op, o.getInput(), [k](double x) { return math::apply(k, x); });
        return success();
      })
      .Case([&](SelectOp s) {
        const Buf &c = get(s.getCond()), &a = get(s.getOnTrue()), &b = get(s.getOnFalse());
        Buf r;
        Shape ab;
        if (failed(broadcast(op, a.shape, b.shape, ab)) ||
            failed(broadcast(op, c.shape, ab, r.shape)))
          return failure();
        r.data.resize(numel(r.shape));
        std::array<Shape, 3> strides = {broadcastStrides(c.shape, r.shape),
                                        broadcastStrides(a.shape, r.shape),
                                        broadcastStrides(b.shape, r.shape)};
        forEachBroadcast<3>(r.shape, strides, [&](int64_t i, const std::array<int64_t, 3> &o) {
          r.data[i] = c.data[o[0]] != 0.0 ? a.data[o[1]] : b.data[o[2]];
        });
        set(s.getResult(), std::move(r));
        return success();
      })
      .Case([&](SoftmaxOp s) {
        Buf r = get(s.getInput());
        softmaxInPlace(r, normalizedAxis(s.getAxis(), (int64_t)r.shape.size()));
        set(s.getResult(), std::move(r));
        return success();
      })
      .Case([&](LayerNormOp l) {
        Buf r = get(l.getInput());
        int64_t axis = normalizedAxis(l.getAxis(), (int64_t)r.shape.size());
        layerNormInPlace(r, get(l.getGamma()), get(l.getBeta()),
                         numel(ArrayRef<int64_t>(r.shape).drop_front(axis)),
                         l.getEpsilon().convertToDouble());
        set(l.getResult(), std::move(r));
        return success();
      })
      .Case([&](AddLayerNormOp l) {
        Buf sum;
        if (failed(binary(op, get(l.getInput()), get(l.getResidual()), std::plus<>(), sum)))
          return failure();
        Buf r = sum;
        layerNormInPlace(r, get(l.getGamma()), get(l.getBeta()), r.shape.back(),
                         l.getEpsilon().convertToDouble());
        set(l.getResult(), std::move(r));
        set(l.getSum(), std::move(sum));
        return success();
      })
      .Case([&](AttentionOp a) { return evalAttention(a); })
      .Case([&](LinearOp l) { return evalLinear(l); })
      .Case([&](FusedElementwiseOp f) { return evalFusedElementwise(f); })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>([&](auto r) {
        return evalReduce(op, r.getInput(), r.getAxes(), r.getKeepDims());
      })
      .Case([&](DropoutOp d) {
        Buf r = get(d.getInput());
        dropoutInPlace(r, d.getRate().convertToDouble(), d.getSeed() + key.seed,
                       (d.getStep() ? indices[d.getStep()] : 0) + key.step, d.getStream());
        set(d.getResult(), std::move(r));
        return success();
      })
      .Case([&](CrossEntropyOp c) {
        return evalCrossEntropy(op, c.getLogits(), c.getLabels(),
                                c.getLabelSmoothing().convertToDouble(), c.getIgnoreIndex(), nullptr);
      })
      .Case([&](CrossEntropyGradOp c) {
        return evalCrossEntropy(op, c.getLogits(), c.getLabels(),
                                c.getLabelSmoothing().convertToDouble(), c.getIgnoreIndex(),
                                &get(c.getGrad()));
      })
      .Case([&](LayerNormGradOp l) { return evalLayerNormGrad(l); })
      .Case([&](EmbeddingGradOp e) { return evalEmbeddingGrad(e); })
      .Case([&](SliceGradOp s) { return evalSliceGrad(s); })
      .Case([&](WeightGradOp w) { return evalWeightGrad(w); })
      .Case([&](AttentionGradOp a) { return evalAttentionGrad(a); })
      .Case([&](ActivationGradOp a) {
        const math::Kind f = *activationKind(a.getActivation()); // verified: not none
        return binary(op, a.getInput(), a.getGrad(),
                      [f](double x, double g) { return g * math::derivative(f, x); });
      })
      .Case([&](LinearInputGradOp l) {
        Buf product;
        if (failed(matmul(op, get(l.getGrad()), get(l.getWeight()), false, l.getTransposeWeight(),
                          product)))
          return failure();
        const Buf &pre = get(l.getPre());
        if (product.shape != pre.shape)
          return fail(op, "grad·op(W) " + str(product.shape) + " is not pre's shape " + str(pre.shape));
        const double scale = l.getScale().convertToDouble();
        const math::Kind f = *activationKind(l.getActivation()); // verified: not none
        for (size_t i = 0; i < product.data.size(); ++i)
          product.data[i] = product.data[i] * scale * math::derivative(f, pre.data[i]);
        set(l.getResult(), std::move(product));
        return success();
      })
      .Case([&](ExpandOp e) {
        return binary(op, e.getInput(), e.getLike(), [](double x, double) { return x; });
      })
      .Case([&](ReshapeOp r) { return evalReshape(r); })
      .Case([&](TransposeOp t) { return evalTranspose(t); })
      .Case([&](ConcatOp c) { return evalConcat(c); })
      .Case([&](SplitOp s) { return evalSplit(s); })
      .Case([&](SliceOp s) { return evalSlice(s); })
      .Case([&](CausalMaskOp c) {
        int64_t sq = indices[c.getQueryLen()], sk = indices[c.getKeyLen()];
        Buf r;
        r.shape = {sq, sk};
        r.data.resize(sq * sk);
        for (int64_t i = 0; i < sq; ++i)
          for (int64_t j = 0; j < sk; ++j)
            r.data[i * sk + j] = j <= i + sk - sq ? 1.0 : 0.0;
        set(c.getResult(), std::move(r));
        return success();
      })
      .Case([&](KeyPaddingMaskOp k) {
        double pad = (double)k.getPadId();
        unary(op, k.getTokens(), [pad](double t) { return t != pad ? 1.0 : 0.0; });
        return success();
      })
      .Case([&](PositionalEncodingOp p) {
        int64_t len = indices[p.getLength()], d = p.getType().getDimSize(1);
        int64_t offset = p.getOffset() ? indices[p.getOffset()] : 0;
        Buf r;
        r.shape = {len, d};
        r.data.resize(len * d);
        for (int64_t pos = 0; pos < len; ++pos)
          for (int64_t j = 0; j < d; ++j) {
            double freq = std::exp(-(double)(j - j % 2) * std::log(10000.0) / (double)d);
            double angle = (double)(pos + offset) * freq;
            r.data[pos * d + j] = j % 2 == 0 ? std::sin(angle) : std::cos(angle);
          }
        set(p.getResult(), std::move(r));
        return success();
      })
      .Case<StateLengthOp, CacheAppendOp, StateWriteOp, StateReadOp>(
          [&](auto) { return evalState(op); })
      .Default([&](Operation *) { return fail(op, "not supported by the reference backend"); });
}

LogicalResult Interpreter::evalState(Operation *op) {
  if (!state)
    return fail(op, "reads the decoding state, and the call has none");
  if (isa<StateLengthOp>(op)) {
    indices[op->getResult(0)] = state->length;
    return success();
  }
  StringRef name = op->getAttrOfType<StringAttr>("name").getValue();
  auto it = state->tensors.find(name.str());
  if (it == state->tensors.end())
    return fail(op, "no state tensor '" + name + "'");
  State::Tensor &t = it->second; // [R, H, T, D]
  int64_t rows = t.shape[0], heads = t.shape[1], cap = t.shape[2], d = t.shape[3];
  auto at = [&](int64_t r, int64_t h, int64_t p) { return ((r * heads + h) * cap + p) * d; };
  // Copies positions [from, from + n) of rows 0..b of the state to or from x.
  auto transfer = [&](Buf &x, int64_t from, bool toState) -> LogicalResult {
    int64_t b = x.shape[0], n = x.shape[2];
    if (b > rows)
      return fail(op, "batch " + llvm::Twine(b) + " exceeds the " + llvm::Twine(rows) +
                          " rows of state '" + name + "' (max_batch · max_beam)");
    if (from + n > cap)
      return fail(op, "positions " + llvm::Twine(from + n) + " exceed the capacity " +
                          llvm::Twine(cap) + " of state '" + name + "' (max_seq_len)");
    for (int64_t r = 0; r < b; ++r)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t p = 0; p < n; ++p)
          for (int64_t j = 0; j < d; ++j) {
            double &s = t.data[at(r, h, from + p) + j];
            double &v = x.data[((r * heads + h) * n + p) * d + j];
            toState ? (s = v) : (v = s);
          }
    return success();
  };
  if (auto w = dyn_cast<StateWriteOp>(op))
    return transfer(get(w.getInput()), 0, true);
  if (auto a = dyn_cast<CacheAppendOp>(op)) {
    Buf &x = get(a.getInput());
    int64_t n = x.shape[2];
    if (appended && *appended != n)
      return fail(op, "appends " + llvm::Twine(n) + " positions, another cache " +
                          llvm::Twine(*appended));
    appended = n;
    if (failed(transfer(x, state->length, true)))
      return failure();
    Buf r;
    r.shape = {x.shape[0], heads, state->length + n, d};
    r.data.resize(numel(r.shape));
    if (failed(transfer(r, 0, false)))
      return failure();
    set(a.getResult(), std::move(r));
    return success();
  }
  auto read = cast<StateReadOp>(op);
  Buf r;
  r.shape.assign(read.getType().getShape().begin(), read.getType().getShape().end());
  for (int64_t i = 0, k = 0; i < 4; ++i)
    if (read.getType().isDynamicDim(i))
      r.shape[i] = indices[read.getSizes()[k++]];
  r.data.resize(numel(r.shape));
  if (failed(transfer(r, 0, false)))
    return failure();
  set(read.getResult(), std::move(r));
  return success();
}

llvm::Expected<TensorMap> Interpreter::run(func::FuncOp func, const TensorMap &inputs,
                                           const EntryPoint &ep) {
  if (rt::Status s = rt::validateInputs(ep.inputs, inputs); !s.isOk())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), s.message());
  for (auto [arg, spec] : llvm::zip(func.getArguments(), ep.inputs)) {
    const rt::Tensor &t = inputs.at(spec.name);
    if (t.dtype != rt::DType::I32 && t.dtype != rt::DType::Bool &&
        t.dtype != rt::DType::F32 && t.dtype != rt::DType::F64)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "input '%s': the reference backend reads F32, F64, I32 "
                                     "and BOOL inputs only", spec.name.c_str());
    Buf b;
    b.shape.assign(t.shape.begin(), t.shape.end());
    int64_t n = t.numElements();
    b.data.resize(n);
    for (int64_t i = 0; i < n; ++i)
      b.data[i] = t.dtype == rt::DType::I32 ? (double)t.data<int32_t>()[i]
                  : t.dtype == rt::DType::Bool ? (double)t.data<uint8_t>()[i]
                  : t.dtype == rt::DType::F64 ? t.data<double>()[i]
                                              : (double)t.data<float>()[i];
    argNames[arg] = spec.name;
    set(arg, std::move(b));
  }
  TensorMap outputs;
  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [value, spec] : llvm::zip(ret.getOperands(), ep.outputs)) {
        const Buf &b = get(value);
        bool isFloat = spec.dtype != rt::DType::I32 && spec.dtype != rt::DType::Bool;
        rt::DType dtype = f64Outputs && isFloat ? rt::DType::F64 : spec.dtype;
        rt::Tensor t = rt::Tensor::zeros(dtype, std::vector<int64_t>(b.shape.begin(), b.shape.end()));
        for (size_t i = 0; i < b.data.size(); ++i) {
          switch (dtype) {
          case rt::DType::F64: t.data<double>()[i] = b.data[i]; break;
          case rt::DType::I32: t.data<int32_t>()[i] = (int32_t)b.data[i]; break;
          case rt::DType::Bool: t.data<uint8_t>()[i] = b.data[i] != 0.0; break;
          default: t.data<float>()[i] = (float)b.data[i]; break;
          }
        }
        outputs[spec.name] = std::move(t);
      }
      break;
    }
    if (failed(eval(&op)))
      return llvm::createStringError(llvm::inconvertibleErrorCode(), error);
    // Check run-time shapes against the static sizes of the result types.
    for (Value result : op.getResults()) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type)
        continue;
      const Buf &b = get(result);
      bool ok = (int64_t)b.shape.size() == type.getRank();
      for (int64_t d = 0; ok && d < type.getRank(); ++d)
        ok = type.isDynamicDim(d) || type.getDimSize(d) == b.shape[d];
      if (!ok) {
        (void)fail(&op, "produced shape " + str(b.shape) + ", which does not match its type");
        return llvm::createStringError(llvm::inconvertibleErrorCode(), error);
      }
    }
    // Free values whose last user has run (keeps the base model's memory low).
    for (Value operand : op.getOperands())
      if (llvm::all_of(operand.getUsers(), [&](Operation *u) {
            return u->getBlock() == op.getBlock() && !op.isBeforeInBlock(u);
          }))
        values.erase(operand.getAsOpaquePointer());
  }
  return outputs;
}

} // namespace

/// Runs one entry point of `mi` with `weights` as they are.
static llvm::Expected<TensorMap> runEntry(func::FuncOp func, const ModelInterface &mi, DropoutKey key,
                                          const TensorMap &weights, const TensorMap &inputs,
                                          bool f64Outputs, State *state = nullptr) {
  for (const EntryPoint &ep : mi.entryPoints)
    if (ep.name == func.getName()) {
      Interpreter interpreter(weights, f64Outputs);
      interpreter.key = key;
      std::optional<State> copy;
      if (state)
        interpreter.state = &copy.emplace(*state);
      auto outputs = interpreter.run(func, inputs, ep);
      if (outputs && state) {
        *state = std::move(*copy);
        state->length += interpreter.appended.value_or(0);
      }
      return outputs;
    }
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "no entry point '%s'",
                                 func.getName().str().c_str());
}

llvm::Expected<TensorMap> mlir::transfuse::reference::run(func::FuncOp func,
                                                          const TensorMap &weights,
                                                          const TensorMap &inputs,
                                                          bool f64Outputs, State *state,
                                                          DropoutKey key) {
  auto module = func->getParentOfType<ModuleOp>();
  if (usesState(func) && !state)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "entry point '%s' uses the decoding state; pass one",
                                   func.getName().str().c_str());
  auto mi = extractInterface(module);
  if (!mi)
    return mi.takeError();
  // Weight-only work hoisted into @prepare runs first; its outputs are the
  // `prepared` params of the other entry points.
  auto prepare = module.lookupSymbol<func::FuncOp>(kPrepareFunction);
  if (!prepare || prepare == func)
    return runEntry(func, *mi, key, weights, inputs, f64Outputs, state);
  auto prepared = runEntry(prepare, *mi, key, weights, {}, /*f64Outputs=*/true);
  if (!prepared)
    return prepared.takeError();
  TensorMap all = weights;
  for (auto &[name, tensor] : *prepared)
    all[name] = std::move(tensor);
  return runEntry(func, *mi, key, all, inputs, f64Outputs, state);
}

llvm::Expected<State> mlir::transfuse::reference::createState(ModuleOp module) {
  auto decls = collectStates(module);
  if (failed(decls))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the model's state tensors disagree (see the diagnostics)");
  State state;
  for (const StateDecl &d : *decls) {
    State::Tensor &t = state.tensors[d.name];
    t.shape.assign(d.capacity.getShape().begin(), d.capacity.getShape().end());
    t.data.assign(numel(t.shape), 0.0);
  }
  return state;
}
