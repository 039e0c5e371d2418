//===- InterpreterOps.h - the reference interpreter's private parts -------===//
//
// What the reference backend's files share: a Buf (a row-major shape and
// fp64 data), the shape and broadcast helpers, the Interpreter class and its
// elementwise templates, and the per-row math the op files reuse. The ops
// are evaluated in PrimitiveOps.cpp (TransfuseOps.td), FusedOps.cpp
// (TransfuseFusedOps.td) and GradOps.cpp (TransfuseGradOps.td); the driver,
// the dispatch and the state ops are in Interpreter.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_REFERENCE_INTERPRETEROPS_H
#define TRANSFUSE_CODEGEN_REFERENCE_INTERPRETEROPS_H

#include "codegen/reference/Interpreter.h"

#include "codegen/Interface.h"
#include "ir/TransfuseDialect.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <utility>

namespace mlir::transfuse::reference::detail {

namespace rt = ::transfuse::rt;

using Shape = SmallVector<int64_t, 4>;

struct Buf {
  Shape shape;
  std::vector<double> data;
};

inline int64_t numel(ArrayRef<int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

inline Shape stridesOf(ArrayRef<int64_t> shape) {
  Shape s(shape.size(), 1);
  for (int64_t i = (int64_t)shape.size() - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

inline std::string str(ArrayRef<int64_t> shape) {
  return rt::shapeToString(std::vector<int64_t>(shape.begin(), shape.end()));
}

/// Strides of `in` broadcast (right-aligned) to `out`: 0 where broadcast.
inline Shape broadcastStrides(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
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

  /// softmax(scale·Q·Kᵀ + bias, masked); K has Q's heads (grouped K/V
  /// heads repeated by the caller: repeatHeads).
  LogicalResult attentionProbs(Operation *op, const Buf &q, const Buf &k, double scale, Value bias,
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
  /// pool (grad null) or pool_grad; l2_normalize or l2_normalize_grad.
  LogicalResult evalPool(Operation *op, Value input, Value keep, Pooling mode, const Buf *grad);
  LogicalResult evalL2Normalize(Operation *op, Value input, double eps, const Buf *grad);
  /// unfold's patches of `input` [B, C, H, W], or with `grad` (unfold_grad)
  /// the patch rows put back into an image of input's shape.
  LogicalResult evalUnfold(Operation *op, Value input, ArrayRef<int64_t> patch, const Buf *grad);
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
void softmaxInPlace(Buf &r, int64_t axis);

/// The mean of `n` values and 1/sqrt(biased variance + eps).
std::pair<double, double> meanAndRstd(const double *x, int64_t n, double eps, bool rms);

/// Layer norm over the trailing `n` elements of each row: biased variance.
/// Grouped-query attention's K or V [B, Hkv, S, D] with each head repeated
/// for the `heads` / Hkv query heads that read it: [B, heads, S, D].
Buf repeatHeads(const Buf &x, int64_t heads);
/// Its transpose: [B, H, S, D] summed over each group of H / kvHeads heads.
Buf sumHeads(const Buf &x, int64_t kvHeads);
void layerNormInPlace(Buf &r, const Buf &g, const Buf *b, int64_t n, double eps, bool rms);

/// transfuse.rotary on the first `columns` columns of each row of r [.., S,
/// N] (heads of headDim; row s of S at position offset + s), by the
/// frequencies `freq` (pairs (i, i + freq size) of each head).
void rotaryInPlace(Buf &r, const Buf &freq, int64_t headDim, int64_t columns, int64_t offset,
                   bool inverse);
/// Inverted dropout with the Philox draw of transfuse.dropout.
void dropoutInPlace(Buf &r, double rate, uint64_t seed, uint64_t step, uint64_t stream);

} // namespace mlir::transfuse::reference::detail

#endif // TRANSFUSE_CODEGEN_REFERENCE_INTERPRETEROPS_H
