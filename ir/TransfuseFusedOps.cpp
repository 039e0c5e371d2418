//===- TransfuseFusedOps.cpp - verifiers of the fused ops -----------------===//
//
// Each fused op checks the shapes its unfused definition implies (see
// TransfuseFusedOps.td); dynamic sizes are checked at run time.
//
//===----------------------------------------------------------------------===//

#include "ir/TransfuseDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::transfuse;

namespace {

/// True when `from` broadcasts (NumPy rules) to exactly `to`.
bool broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  SmallVector<int64_t> out;
  std::string error;
  if (failed(broadcastShapes(from, to, out, error)) || out.size() != to.size())
    return false;
  for (auto [a, b] : llvm::zip(out, to))
    if (!compatibleSizes(a, b) || (!ShapedType::isDynamic(b) && ShapedType::isDynamic(a)))
      return false;
  return true;
}

} // namespace

LogicalResult AttentionOp::verify() {
  auto q = getQuery().getType(), k = getKey().getType(), v = getValue().getType();
  auto r = getType();
  for (auto [name, t] : {std::pair{"query", q}, std::pair{"key", k}, std::pair{"value", v}})
    if (t.getRank() != 4)
      return emitOpError(name) << " must be [B, H, S, D], got " << t;
  if (k.getElementType() != q.getElementType() || v.getElementType() != q.getElementType())
    return emitOpError("query, key and value element types differ");
  if (!compatibleSizes(q.getDimSize(0), k.getDimSize(0)) ||
      !compatibleSizes(q.getDimSize(0), v.getDimSize(0)))
    return emitOpError("query, key and value differ in batch");
  // Grouped-query attention: each K/V head serves heads / kv_heads query heads.
  int64_t heads = q.getDimSize(1), kvHeads = k.getDimSize(1);
  if (!compatibleSizes(kvHeads, v.getDimSize(1)) ||
      (!ShapedType::isDynamic(heads) && !ShapedType::isDynamic(kvHeads) &&
       (kvHeads == 0 || heads % kvHeads != 0)))
    return emitOpError("key and value heads must be equal and divide the query's ")
           << heads << ", got " << kvHeads << " and " << v.getDimSize(1);
  if (!compatibleSizes(q.getDimSize(3), k.getDimSize(3)))
    return emitOpError("query head size ") << q.getDimSize(3) << " differs from key's "
                                           << k.getDimSize(3);
  if (!compatibleSizes(k.getDimSize(2), v.getDimSize(2)))
    return emitOpError("key length ") << k.getDimSize(2) << " differs from value's "
                                      << v.getDimSize(2);
  SmallVector<int64_t> expected = {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2),
                                   v.getDimSize(3)};
  if (r.getShape() != ArrayRef<int64_t>(expected) || r.getElementType() != q.getElementType())
    return emitOpError("result must be [B, H, Sq, Dv] = ")
           << RankedTensorType::get(expected, q.getElementType()) << ", got " << r;
  SmallVector<int64_t> scores = {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2),
                                 k.getDimSize(2)};
  if (auto kp = getKeyPadding()) {
    auto t = kp.getType();
    if (t.getRank() != 2 || !compatibleSizes(t.getDimSize(0), q.getDimSize(0)) ||
        !compatibleSizes(t.getDimSize(1), k.getDimSize(2)))
      return emitOpError("key_padding must be [B, Sk], got ") << t;
  }
  if (auto m = getMask())
    if (!broadcastsTo(m.getType().getShape(), scores))
      return emitOpError("mask ") << m.getType() << " does not broadcast to the scores [B, H, Sq, Sk]";
  if (auto b = getBias()) {
    if (b.getType().getElementType() != q.getElementType())
      return emitOpError("bias element type differs from the query's");
    if (!broadcastsTo(b.getType().getShape(), scores))
      return emitOpError("bias ") << b.getType() << " does not broadcast to the scores [B, H, Sq, Sk]";
  }
  double rate = getDropoutRate().convertToDouble();
  if (!(rate >= 0.0 && rate < 1.0))
    return emitOpError("dropout_rate must be in [0, 1), got ") << rate;
  return success();
}

SizeExpr AttentionOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  // [B, H, Sq, Dv]: the query's batch, heads and rows, the value's width.
  return axis < 3 ? sizes.dim(getQuery(), axis) : sizes.dim(getValue(), 3);
}

LogicalResult AddLayerNormOp::verify() {
  auto x = getInput().getType(), res = getResidual().getType();
  if (x.getRank() < 1 || x.isDynamicDim(x.getRank() - 1))
    return emitOpError("input needs a static last dimension, got ") << x;
  if (res.getElementType() != x.getElementType())
    return emitOpError("residual element type differs from the input's");
  if (!broadcastsTo(res.getShape(), x.getShape()))
    return emitOpError("residual ") << res << " does not broadcast to the input " << x;
  int64_t d = x.getShape().back();
  SmallVector<std::pair<const char *, TensorType>, 2> params = {{"gamma", getGamma().getType()}};
  if (getBeta())
    params.push_back({"beta", getBeta().getType()});
  for (auto [name, t] : params)
    if (t.getRank() != 1 || t.getDimSize(0) != d || t.getElementType() != x.getElementType())
      return emitOpError(name) << " must be [" << d << "] of the input's element type, got " << t;
  if (getResult().getType() != x || getSum().getType() != x)
    return emitOpError("results must have the input's type ") << x;
  if (!(getEpsilon().convertToDouble() >= 0.0))
    return emitOpError("epsilon must be >= 0");
  return success();
}

LogicalResult LinearOp::verify() {
  auto x = getInput().getType(), w = getWeight().getType(), r = getType();
  if (x.getRank() < 1 || w.getRank() != 2)
    return emitOpError("needs input [..., K] and a rank-2 weight, got ") << x << " and " << w;
  if (w.getElementType() != x.getElementType() || r.getElementType() != x.getElementType())
    return emitOpError("element types differ");
  int64_t k = getTransposeWeight() ? w.getDimSize(1) : w.getDimSize(0);
  int64_t n = getTransposeWeight() ? w.getDimSize(0) : w.getDimSize(1);
  if (!compatibleSizes(x.getShape().back(), k))
    return emitOpError("input has K=") << x.getShape().back() << " but the weight has K=" << k;
  if (getGated() && (n % 2 != 0 || getResidual()))
    return emitOpError("gated needs an even N (gate, then up columns) and no residual, got N=")
           << n;
  SmallVector<int64_t> expected(x.getShape().drop_back());
  expected.push_back(getGated() ? n / 2 : n);
  if (r.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("result must be ")
           << RankedTensorType::get(expected, x.getElementType()) << ", got " << r;
  if (auto b = getBias())
    if (b.getType().getRank() != 1 || !compatibleSizes(b.getType().getDimSize(0), n) ||
        b.getType().getElementType() != x.getElementType())
      return emitOpError("bias must be [") << n << "], got " << b.getType();
  if (auto res = getResidual())
    if (res.getType().getElementType() != x.getElementType() ||
        !broadcastsTo(res.getType().getShape(), r.getShape()))
      return emitOpError("residual ") << res.getType() << " does not broadcast to the result "
                                      << r;
  const int64_t columns = getRotaryColumns(), headDim = getHeadDim();
  if (!getInvFreq()) {
    if (columns != 0 || headDim != 0 || getOffset())
      return emitOpError("rotary_columns, head_dim and offset come with `rotary` inv_freq");
    return success();
  }
  if (getGated() || getResidual() || getActivation() != Activation::None)
    return emitOpError("rotary has no activation, gating or residual");
  if (r.getRank() < 2)
    return emitOpError("rotary needs a result [..., S, N] (positions along S), got ") << r;
  if (headDim <= 0 || headDim % 2 != 0 || columns <= 0 || columns % headDim != 0 || columns > n)
    return emitOpError("rotary needs an even head_dim and rotary_columns a multiple of it within "
                       "N=")
           << n << ", got head_dim " << headDim << " and rotary_columns " << columns;
  auto freq = getInvFreq().getType();
  if (freq.getRank() != 1 || freq.getDimSize(0) != headDim / 2 || !freq.getElementType().isF32())
    return emitOpError("inv_freq must be f32 [head_dim/2 = ") << headDim / 2 << "], got " << freq;
  return success();
}

SizeExpr LinearOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  // [..., N]: the input's leading dimensions (N is static).
  return axis < getType().getRank() - 1 ? sizes.dim(getInput(), axis) : SizeExpr();
}

LogicalResult FusedElementwiseOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body has ") << body.getNumArguments() << " arguments for "
                                    << getInputs().size() << " inputs";
  for (auto [arg, input] : llvm::zip(body.getArguments(), getInputs()))
    if (arg.getType() != input.getType())
      return emitOpError("body argument type ") << arg.getType() << " differs from input type "
                                                << input.getType();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end in transfuse.yield");
  if (yield.getValue().getType() != getType())
    return emitOpError("yields ") << yield.getValue().getType() << " but the result is "
                                  << getType();
  for (Operation &op : body.without_terminator())
    if (!isElementwise(&op))
      return op.emitOpError("is not elementwise and cannot be in a fused_elementwise body");
  return success();
}

bool mlir::transfuse::isElementwise(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, PowOp, ScaleOp, ReluOp, GeluOp, SiluOp, ExpOp, TanhOp,
             SigmoidOp, SqrtOp, ErfOp,
             SelectOp, CastOp, ConstantOp>(op);
}

Value mlir::transfuse::createActivation(OpBuilder &b, Location loc, Value x,
                                        Activation activation) {
  switch (activation) {
  case Activation::None:
    return x;
  case Activation::Relu:
    return ReluOp::create(b, loc, x);
  case Activation::Gelu:
    return GeluOp::create(b, loc, x, GeluApproximation::None);
  case Activation::GeluTanh:
    return GeluOp::create(b, loc, x, GeluApproximation::Tanh);
  case Activation::Silu:
    return SiluOp::create(b, loc, x);
  }
  return x;
}

std::optional<Activation> mlir::transfuse::activationOf(Operation *op) {
  if (isa<ReluOp>(op))
    return Activation::Relu;
  if (auto g = dyn_cast<GeluOp>(op))
    return g.getApproximate() == GeluApproximation::Tanh ? Activation::GeluTanh : Activation::Gelu;
  if (isa<SiluOp>(op))
    return Activation::Silu;
  return std::nullopt;
}
