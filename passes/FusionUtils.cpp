//===- FusionUtils.cpp - constants, biases, recording ---------------------===//

#include "passes/FusionUtils.h"

#include "ir/TransfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::transfuse;

std::optional<double> mlir::transfuse::constantScalar(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = dyn_cast<DenseFPElementsAttr>(constant.getValue());
  if (!dense || dense.getNumElements() != 1)
    return std::nullopt;
  return (*dense.getValues<APFloat>().begin()).convertToDouble();
}

Value mlir::transfuse::biasOf(AddOp add, Value product) {
  Value bias = add.getLhs() == product ? add.getRhs() : add.getLhs();
  auto pt = cast<RankedTensorType>(product.getType());
  auto bt = cast<RankedTensorType>(bias.getType());
  if (bias == product || add.getType() != pt || bt.getRank() != 1 ||
      bt.getDimSize(0) != pt.getShape().back() || ShapedType::isDynamic(bt.getDimSize(0)))
    return Value();
  return bias;
}

void FusionRecorder::fused(Location loc) const {
  if (report)
    report->fused(fusion);
  if (remarks)
    emitRemark(loc) << fusion << ": fused";
}

void FusionRecorder::missed(Location loc, const llvm::Twine &reason) const {
  if (report)
    report->missed(fusion, loc, reason.str());
  if (remarks)
    emitRemark(loc) << fusion << ": not fused: " << reason;
}

void FusionListener::notifyMatchFailure(Location loc,
                                        function_ref<void(Diagnostic &)> reasonCallback) {
  Diagnostic reason(loc, DiagnosticSeverity::Remark);
  reasonCallback(reason);
  recorder.missed(loc, reason.str());
}
