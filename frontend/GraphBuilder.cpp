//===- GraphBuilder.cpp - nn-style construction of transfuse graphs -------===//

#include "frontend/GraphBuilder.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::transfuse;

static RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

Value GraphBuilder::param(StringRef name, ArrayRef<int64_t> shape, StringRef init,
                          std::optional<int64_t> fanIn, bool optional) {
  auto it = params.find(name);
  if (it != params.end()) {
    assert(typeOf(it->second).getShape() == shape && "param reused with another shape");
    return it->second;
  }
  // Params sit at the top of the function, in creation order, so that every
  // use sees them and the IR lists them as PyTorch lists its state dict.
  OpBuilder::InsertionGuard guard(b);
  if (lastParam)
    b.setInsertionPointAfter(lastParam);
  else
    b.setInsertionPointToStart(b.getInsertionBlock());
  auto type = RankedTensorType::get(shape, b.getF32Type());
  std::optional<InitKind> kind = symbolizeInitKind(init);
  assert(kind && "unknown init kind");
  auto op = ParamOp::create(b, loc, type, b.getStringAttr(name),
                            InitKindAttr::get(b.getContext(), *kind),
                            fanIn ? b.getI64IntegerAttr(*fanIn) : IntegerAttr(),
                            optional ? b.getUnitAttr() : UnitAttr(), /*prepared=*/UnitAttr());
  lastParam = op;
  params[name] = op.getResult();
  return op.getResult();
}

Value GraphBuilder::scalar(double value) {
  auto type = RankedTensorType::get({}, b.getF32Type());
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, (float)value));
}

Value GraphBuilder::constant(ArrayRef<float> values, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, b.getF32Type());
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, values));
}

Value GraphBuilder::dim(Value tensor, int64_t axis) {
  return DimOp::create(b, loc, tensor, axis);
}

Value GraphBuilder::matmul(Value lhs, Value rhs, bool transposeLhs, bool transposeRhs) {
  return MatmulOp::create(b, loc, lhs, rhs, transposeLhs, transposeRhs);
}

Value GraphBuilder::add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
Value GraphBuilder::mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }

Value GraphBuilder::scale(Value x, double factor) {
  return ScaleOp::create(b, loc, x, b.getF64FloatAttr(factor));
}

Value GraphBuilder::activation(Value x, StringRef kind) {
  std::optional<Activation> a = symbolizeActivation(kind);
  assert(a && "unknown activation");
  return createActivation(b, loc, x, *a);
}

Value GraphBuilder::tanh(Value x) { return TanhOp::create(b, loc, x); }

Value GraphBuilder::softmax(Value x, int64_t axis) {
  return SoftmaxOp::create(b, loc, x, axis);
}

Value GraphBuilder::layerNorm(Value x, Value gamma, Value beta, double eps, bool rms) {
  int64_t axis = typeOf(x).getRank() - 1;
  return LayerNormOp::create(b, loc, x, gamma, beta, b.getI64IntegerAttr(axis),
                             b.getF64FloatAttr(eps), rms ? b.getUnitAttr() : UnitAttr());
}

Value GraphBuilder::select(Value cond, Value onTrue, Value onFalse) {
  return SelectOp::create(b, loc, cond, onTrue, onFalse);
}

Value GraphBuilder::transpose(Value x, ArrayRef<int64_t> permutation) {
  return TransposeOp::create(b, loc, x, permutation);
}

Value GraphBuilder::reshape(Value x, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, typeOf(x).getElementType());
  return ReshapeOp::create(b, loc, type, x);
}

SmallVector<Value> GraphBuilder::split(Value x, int64_t axis, ArrayRef<int64_t> sizes) {
  auto op = SplitOp::create(b, loc, x, axis, sizes);
  return SmallVector<Value>(op.getResults());
}

Value GraphBuilder::sliceLeading(Value x, int64_t axis, Value length) {
  return SliceOp::create(b, loc, x, /*offset=*/Value(), length, axis, /*start=*/0, IntegerAttr());
}

Value GraphBuilder::sliceAt(Value x, int64_t axis, Value offset, Value length) {
  return SliceOp::create(b, loc, x, offset, length, axis, /*start=*/0, IntegerAttr());
}

Value GraphBuilder::last(Value x, int64_t axis) {
  return SliceOp::create(b, loc, x, dim(x, axis), Value(), axis, /*start=*/-1,
                         b.getI64IntegerAttr(1));
}

Value GraphBuilder::concat(ValueRange xs, int64_t axis) {
  return ConcatOp::create(b, loc, xs, axis);
}

Value GraphBuilder::first(Value x, int64_t axis) { return slice(x, axis, 0, 1); }

Value GraphBuilder::slice(Value x, int64_t axis, int64_t start, int64_t size) {
  return SliceOp::create(b, loc, x, Value(), Value(), axis, start, b.getI64IntegerAttr(size));
}

Value GraphBuilder::gather(Value table, Value ids) {
  return GatherOp::create(b, loc, table, ids);
}

Value GraphBuilder::dropout(Value x, double rate) {
  if (rate == 0.0)
    return x;
  return DropoutOp::create(b, loc, x, /*step=*/Value(), b.getF64FloatAttr(rate),
                           b.getI64IntegerAttr(/*seed=*/0),
                           b.getI64IntegerAttr(dropoutStreams++));
}

Value GraphBuilder::crossEntropy(Value logits, Value labels, double labelSmoothing,
                                 int64_t ignoreIndex) {
  auto type = RankedTensorType::get({}, typeOf(logits).getElementType());
  return CrossEntropyOp::create(b, loc, type, logits, labels, b.getF64FloatAttr(labelSmoothing),
                                b.getI64IntegerAttr(ignoreIndex));
}

Value GraphBuilder::linear(Value x, Value weight, Value bias) {
  Value y = matmul(x, weight, false, /*transposeRhs=*/true);
  return bias ? add(y, bias) : y;
}

Value GraphBuilder::conv1d(Value x, Value weight, Value bias) {
  Value y = matmul(x, weight);
  return bias ? add(y, bias) : y;
}

Value GraphBuilder::layerNorm(Value x, StringRef prefix, double eps) {
  int64_t d = typeOf(x).getShape().back();
  Value gamma = param((prefix + ".weight").str(), {d}, "ones");
  Value beta = param((prefix + ".bias").str(), {d}, "zeros");
  return layerNorm(x, gamma, beta, eps);
}

Value GraphBuilder::rmsNorm(Value x, StringRef prefix, double eps) {
  int64_t d = typeOf(x).getShape().back();
  return layerNorm(x, param((prefix + ".weight").str(), {d}, "ones"), Value(), eps, /*rms=*/true);
}

Value GraphBuilder::positionalEncoding(Value length, int64_t dModel, Value offset, bool halves) {
  auto type = RankedTensorType::get({ShapedType::kDynamic, dModel}, b.getF32Type());
  return PositionalEncodingOp::create(b, loc, type, length, offset, halves);
}

Value GraphBuilder::keyPaddingMask(Value tokens, int64_t padId) {
  auto s = typeOf(tokens).getShape();
  return reshape(tokenMask(tokens, padId), {s[0], 1, 1, s[1]});
}

Value GraphBuilder::tokenMask(Value tokens, int64_t padId) {
  return KeyPaddingMaskOp::create(b, loc, tokens, padId);
}

Value GraphBuilder::pool(Value x, Value keep, StringRef mode) {
  std::optional<Pooling> p = symbolizePooling(mode);
  assert(p && "unknown pooling");
  return PoolOp::create(b, loc, x, keep, *p);
}

Value GraphBuilder::l2Normalize(Value x) { return L2NormalizeOp::create(b, loc, x); }

Value GraphBuilder::unfold(Value x, int64_t patchH, int64_t patchW) {
  return UnfoldOp::create(b, loc, x, b.getDenseI64ArrayAttr({patchH, patchW}));
}

Value GraphBuilder::expand(Value x, Value like) {
  auto type = RankedTensorType::get(typeOf(like).getShape(), typeOf(x).getElementType());
  return ExpandOp::create(b, loc, type, x, like);
}

Value GraphBuilder::causalMask(Value queryLen, Value keyLen) {
  auto type = RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                                    b.getI1Type());
  return CausalMaskOp::create(b, loc, type, queryLen, keyLen);
}

Value GraphBuilder::projectHeads(Value x, Value weight, Value bias, bool transposed,
                                 int64_t numHeads) {
  return splitHeads(transposed ? linear(x, weight, bias) : conv1d(x, weight, bias), numHeads);
}

Value GraphBuilder::splitHeads(Value y, int64_t numHeads) {
  auto s = typeOf(y).getShape(); // [B, S, H·dh] -> [B, H, S, dh]
  return transpose(reshape(y, {s[0], s[1], numHeads, s[2] / numHeads}), {0, 2, 1, 3});
}

Value GraphBuilder::repeatHeads(Value x, int64_t times) {
  if (times == 1)
    return x;
  auto s = typeOf(x).getShape(); // [B, Hkv, S, dh] -> [B, Hkv, times, S, dh] -> [B, H, S, dh]
  Value one = reshape(x, {s[0], s[1], 1, s[2], s[3]});
  SmallVector<Value> copies(times, one);
  return reshape(concat(copies, 2), {s[0], s[1] * times, s[2], s[3]});
}

Value GraphBuilder::rotary(Value x, Value invFreq, Value offset, int64_t headDim) {
  return RotaryOp::create(b, loc, x.getType(), x, invFreq, offset,
                          b.getI64IntegerAttr(headDim), UnitAttr());
}

Value GraphBuilder::multiHeadAttention(Value query, Value memory,
                                       const AttentionWeights &w, int64_t numHeads,
                                       ArrayRef<Value> masks, double dropoutRate) {
  Value q = projectHeads(query, w.wq, w.bq, w.transposed, numHeads);
  Value k = projectHeads(memory, w.wk, w.bk, w.transposed, numHeads);
  Value v = projectHeads(memory, w.wv, w.bv, w.transposed, numHeads);
  return attendHeads(q, k, v, w, masks, dropoutRate);
}

Value GraphBuilder::attendHeads(Value q, Value k, Value v, const AttentionWeights &w,
                                ArrayRef<Value> masks, double dropoutRate) {
  auto qs = typeOf(q).getShape(); // [B, H, Sq, dh]
  int64_t dh = qs[3];
  // scores[b, h, i, j] = q[b, h, i, :] · k[b, h, j, :] / sqrt(dh)
  Value scores = scale(matmul(q, k, false, /*transposeRhs=*/true), 1.0 / std::sqrt((double)dh));
  if (!masks.empty()) {
    Value ninf = scalar(-std::numeric_limits<double>::infinity());
    for (Value mask : masks)
      scores = select(mask, scores, ninf);
  }
  Value probs = dropout(softmax(scores, 3), dropoutRate);
  Value heads = transpose(matmul(probs, v), {0, 2, 1, 3}); // [B, Sq, H, dh]
  Value merged = reshape(heads, {qs[0], qs[2], qs[1] * dh});
  return w.transposed ? linear(merged, w.wo, w.bo) : conv1d(merged, w.wo, w.bo);
}

Value GraphBuilder::stateLength() { return StateLengthOp::create(b, loc); }

Value GraphBuilder::cacheAppend(StringRef name, Value x, bool keys) {
  auto s = typeOf(x).getShape();
  auto type = RankedTensorType::get({s[0], s[1], ShapedType::kDynamic, s[3]},
                                    typeOf(x).getElementType());
  return CacheAppendOp::create(b, loc, type, b.getStringAttr(name), x,
                               keys ? b.getUnitAttr() : UnitAttr());
}

void GraphBuilder::stateWrite(StringRef name, Value x, bool keys) {
  StateWriteOp::create(b, loc, b.getStringAttr(name), x, keys ? b.getUnitAttr() : UnitAttr());
}

Value GraphBuilder::stateRead(StringRef name, Value batch, Value length, Value like, bool keys) {
  auto s = typeOf(like).getShape();
  auto type = RankedTensorType::get({ShapedType::kDynamic, s[1], ShapedType::kDynamic, s[3]},
                                    typeOf(like).getElementType());
  return StateReadOp::create(b, loc, type, b.getStringAttr(name), ValueRange{batch, length},
                             keys ? b.getUnitAttr() : UnitAttr());
}

Value GraphBuilder::residual(Value x, StringRef normPrefix, bool preNorm, double eps,
                             double dropoutRate, llvm::function_ref<Value(Value)> f) {
  if (preNorm)
    return add(x, dropout(f(layerNorm(x, normPrefix, eps)), dropoutRate));
  return layerNorm(add(x, dropout(f(x), dropoutRate)), normPrefix, eps);
}

Value GraphBuilder::feedForward(Value x, Value w1, Value b1, Value w2, Value b2,
                                StringRef act, bool transposed, double dropoutRate) {
  auto project = [&](Value in, Value weight, Value bias) {
    return transposed ? linear(in, weight, bias) : conv1d(in, weight, bias);
  };
  Value h = dropout(activation(project(x, w1, b1), act), dropoutRate);
  return project(h, w2, b2);
}
