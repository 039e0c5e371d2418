//===- TransfuseGradOps.cpp - the loss and backward ops: verifiers, sizes ----===//

#include "ir/TransfuseDialect.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::transfuse;

LogicalResult CrossEntropyOp::verify() {
  auto logits = cast<RankedTensorType>(getLogits().getType());
  auto labels = cast<RankedTensorType>(getLabels().getType());
  if (logits.getRank() != labels.getRank() + 1 || logits.isDynamicDim(logits.getRank() - 1))
    return emitOpError("logits must be the labels' shape plus a static vocabulary, got ")
           << logits << " and " << labels;
  if (cast<RankedTensorType>(getType()).getRank() != 0)
    return emitOpError("the loss is a scalar (rank 0)");
  double e = getLabelSmoothing().convertToDouble();
  if (!(e >= 0.0 && e <= 1.0))
    return emitOpError("label_smoothing must be in [0, 1], got ") << e;
  return success();
}

SizeExpr CrossEntropyGradOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getLogits(), axis);
}

SizeExpr LayerNormGradOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getInput(), axis);  // only input_grad has dynamic dims
}

SizeExpr PoolGradOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getInput(), axis);
}

SizeExpr UnfoldGradOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getInput(), axis);
}

SizeExpr L2NormalizeGradOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getInput(), axis);
}

LogicalResult EmbeddingGradOp::verify() {
  auto ids = cast<RankedTensorType>(getIds().getType());
  auto grad = cast<RankedTensorType>(getGrad().getType());
  auto table = cast<RankedTensorType>(getType());
  if (table.getRank() != 2 || !table.hasStaticShape())
    return emitOpError("the result is the static table [V, D], got ") << table;
  if (grad.getRank() != ids.getRank() + 1 || grad.getDimSize(grad.getRank() - 1) != table.getDimSize(1))
    return emitOpError("grad must be the ids' shape plus D = ")
           << table.getDimSize(1) << ", got " << grad;
  return success();
}

LogicalResult ActivationGradOp::verify() {
  if (getActivation() == Activation::None)
    return emitOpError("needs an activation, not none");
  return success();
}

LogicalResult LinearInputGradOp::verify() {
  if (getActivation() == Activation::None)
    return emitOpError("needs an activation, not none");
  auto g = cast<RankedTensorType>(getGrad().getType());
  auto w = cast<RankedTensorType>(getWeight().getType());
  auto pre = cast<RankedTensorType>(getPre().getType());
  if (w.getRank() != 2 || g.getRank() < 1 || g.getRank() != pre.getRank() || getType() != pre)
    return emitOpError("expects grad [..., N], a rank-2 weight and pre [..., K] of grad's rank, "
                       "the result pre's type; got ")
           << g << ", " << w << ", " << pre << " -> " << getType();
  const bool t = getTransposeWeight();
  int64_t n = w.getDimSize(t ? 1 : 0), k = w.getDimSize(t ? 0 : 1);  // op(W) is [N, K]
  auto mismatch = [](int64_t a, int64_t b) {
    return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
  };
  if (mismatch(g.getShape().back(), n) || mismatch(pre.getShape().back(), k))
    return emitOpError("op(weight) ") << w << (t ? " transposed" : "") << " does not map grad "
                                      << g << " to pre " << pre;
  for (int64_t i = 0; i + 1 < g.getRank(); ++i)
    if (mismatch(g.getDimSize(i), pre.getDimSize(i)))
      return emitOpError("grad ") << g << " and pre " << pre << " differ in leading dimension " << i;
  return success();
}

SizeExpr LinearInputGradOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getPre(), axis);
}

namespace {
/// activation_grad{relu}(dropout(h), dropout(g)) with one dropout key and
/// shape -> activation_grad{relu}(dropout(h), g · 1/(1 - rate)).
struct ReluGradThroughDropout : OpRewritePattern<ActivationGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ActivationGradOp op, PatternRewriter &rw) const override {
    auto forward = op.getInput().getDefiningOp<DropoutOp>();
    auto backward = op.getGrad().getDefiningOp<DropoutOp>();
    if (op.getActivation() != Activation::Relu || !forward || !backward ||
        op.getInput().getType() != op.getGrad().getType() ||
        forward.getType() != backward.getType() || forward.getRate() != backward.getRate() ||
        forward.getSeed() != backward.getSeed() || forward.getStream() != backward.getStream() ||
        forward.getStep() != backward.getStep())
      return failure();
    double keep = 1.0 / (1.0 - forward.getRate().convertToDouble());
    Value scaled = ScaleOp::create(rw, op.getLoc(), backward.getInput(), rw.getF64FloatAttr(keep));
    rw.modifyOpInPlace(op, [&] { op.getGradMutable().assign(scaled); });
    return success();
  }
};
} // namespace

void ActivationGradOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *ctx) {
  results.add<ReluGradThroughDropout>(ctx);
}

LogicalResult WeightGradOp::verify() {
  auto x = cast<RankedTensorType>(getInput().getType());
  auto g = cast<RankedTensorType>(getGrad().getType());
  auto w = cast<RankedTensorType>(getType());
  if (x.getRank() < 2 || g.getRank() != x.getRank())
    return emitOpError("input and grad must have the same rank, at least 2, got ") << x << " and " << g;
  for (int64_t d = 0; d + 1 < x.getRank(); ++d)
    if (!x.isDynamicDim(d) && !g.isDynamicDim(d) && x.getDimSize(d) != g.getDimSize(d))
      return emitOpError("input and grad differ in leading dimension ") << d << ": " << x << " and " << g;
  const int64_t k = x.getDimSize(x.getRank() - 1), n = g.getDimSize(g.getRank() - 1);
  if (w.getRank() != 2 || w.getDimSize(0) != k || w.getDimSize(1) != n)
    return emitOpError("the result must be [K, N] = [") << k << ", " << n << "], got " << w;
  return success();
}

SizeExpr WeightGradOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  Value v = axis == 0 ? getInput() : getGrad();
  return sizes.dim(v, cast<RankedTensorType>(v.getType()).getRank() - 1);
}

SizeExpr SliceGradOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getLike(), axis);
}

SizeExpr AttentionGradOp::resultSize(unsigned result, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getOperand(result), axis);  // dq: q's, dk: k's, dv: v's
}
