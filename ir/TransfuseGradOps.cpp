//===- TransfuseGradOps.cpp - the loss and backward ops: verifiers, sizes ----===//

#include "ir/TransfuseDialect.h"

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
  if (getKind() != "relu" && getKind() != "gelu")
    return emitOpError("kind must be relu or gelu, got '") << getKind() << "'";
  return success();
}

SizeExpr SliceGradOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getLike(), axis);
}

SizeExpr AttentionGradOp::resultSize(unsigned result, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getOperand(result), axis);  // dq: q's, dk: k's, dv: v's
}
