//===- FusionUtils.cpp - constants, biases, recording ---------------------===//

#include "passes/FusionUtils.h"

#include "ir/TransfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "mlir/Rewrite/PatternApplicator.h"
#include "llvm/ADT/DenseSet.h"

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

std::string mlir::transfuse::at(Operation *op) {
  // Named locations only: an imported graph's nodes (a remark on MLIR text
  // already points at its line).
  if (!op)
    return "";
  Location loc = op->getLoc();
  if (auto fused = dyn_cast<FusedLoc>(loc); fused && !fused.getLocations().empty())
    loc = fused.getLocations()[0];
  if (!isa<NameLoc>(loc))
    return "";
  return " at " + locationString(loc);
}

bool mlir::transfuse::isLinearCandidate(MatmulOp mm) {
  return mm.getRhs().getType().getRank() == 2 && !mm.getTransposeLhs() &&
         !ShapedType::isDynamic(mm.getType().getShape().back());
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

namespace {

/// Tracks erased ops and takes the reason of a match failure.
struct FusionListener : RewriterBase::Listener {
  void notifyOperationErased(Operation *op) override { erased.insert(op); }
  void notifyMatchFailure(Location loc, function_ref<void(Diagnostic &)> reasonCallback) override {
    if (reason)
      return; // the first reason given is the why-not
    Diagnostic diag(loc, DiagnosticSeverity::Remark);
    reasonCallback(diag);
    reason = {loc, diag.str()};
  }

  llvm::DenseSet<Operation *> erased;
  /// Where and why the current op did not fuse.
  std::optional<std::pair<Location, std::string>> reason;
};

} // namespace

void mlir::transfuse::applyFusionPatterns(Operation *root, RewritePatternSet &&patterns,
                                          const FusionRecorder &recorder) {
  FrozenRewritePatternSet frozen(std::move(patterns));
  PatternApplicator applicator(frozen);
  applicator.applyDefaultCostModel();
  FusionListener listener;
  PatternRewriter rewriter(root->getContext());
  rewriter.setListener(&listener);
  SmallVector<Operation *> ops;
  root->walk([&](Operation *op) {
    if (op != root)
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    if (listener.erased.contains(op))
      continue;
    listener.reason.reset();
    Location loc = op->getLoc(); // the op may be gone after the rewrite
    rewriter.setInsertionPoint(op);
    if (succeeded(applicator.matchAndRewrite(op, rewriter)))
      recorder.fused(loc);
    else if (listener.reason)
      recorder.missed(listener.reason->first, listener.reason->second);
  }
}
