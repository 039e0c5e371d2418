//===- FuseAddLayerNorm.cpp - --transfuse-fuse-add-layer-norm -------------===//
//
// layer_norm(x + r) over the last dimension -> transfuse.add_layer_norm, whose
// second result (the sum) replaces the add's other uses: in pre-LN models the
// sum is the residual stream that the next block adds to.
//
//===----------------------------------------------------------------------===//

#include "passes/PassDetail.h"

namespace mlir::transfuse {
#define GEN_PASS_DEF_TRANSFUSEFUSEADDLAYERNORM
#include "passes/Passes.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse;

namespace {

/// True when `v` is available right before `op`.
bool availableBefore(Value v, Operation *op) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return arg.getOwner() == op->getBlock() || arg.getOwner()->getParentOp()->isAncestor(op);
  Operation *def = v.getDefiningOp();
  return def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
}

/// layer_norm(add(x, r)) -> add_layer_norm; a match failure's reason is the
/// report's why-not.
struct FuseAddLayerNorm : OpRewritePattern<LayerNormOp> {
  static constexpr llvm::StringLiteral kFusion = "add_layer_norm";

  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LayerNormOp ln, PatternRewriter &rewriter) const override {
    auto type = ln.getType();
    if (normalizedAxis(ln.getAxis(), type.getRank()) != type.getRank() - 1)
      return rewriter.notifyMatchFailure(ln, "normalizes more than the last dimension");
    auto add = ln.getInput().getDefiningOp<AddOp>();
    if (!add) {
      Operation *def = ln.getInput().getDefiningOp();
      return rewriter.notifyMatchFailure(
          ln, def ? "its input is not a residual add (it comes from '" +
                        def->getName().getStringRef().str() + "'" + at(def) + ")"
                  : std::string("its input is not a residual add (it is a function argument)"));
    }
    // The operand with the sum's own type is the input; the other broadcasts.
    Value x = add.getLhs(), r = add.getRhs();
    if (x.getType() != add.getType())
      std::swap(x, r);
    if (x.getType() != add.getType())
      return rewriter.notifyMatchFailure(ln, "both operands of the add broadcast");
    // A residual that broadcasts is a trailing block of the sum ([T, D] of
    // [B, T, D]): none of its dimensions is a 1 stretched over the sum's.
    auto rt = cast<RankedTensorType>(r.getType()), st = cast<RankedTensorType>(add.getType());
    for (int64_t d = 0; r.getType() != add.getType() && d < rt.getRank(); ++d)
      if (rt.getDimSize(d) == 1 && st.getDimSize(st.getRank() - rt.getRank() + d) != 1)
        return rewriter.notifyMatchFailure(
            ln, "the residual broadcasts along its dimension " + std::to_string(d) +
                    " (size 1; a residual must be the sum's shape or its trailing dimensions)");
    // Place the fused op where every operand is available and the sum
    // dominates the add's other users: at the add if gamma and beta are
    // defined before it, else at the layer norm if no other user precedes it.
    Operation *at = add;
    if (!availableBefore(ln.getGamma(), add) ||
        (ln.getBeta() && !availableBefore(ln.getBeta(), add))) {
      at = ln;
      for (Operation *user : add->getUsers())
        if (user != ln && (user->getBlock() != ln->getBlock() || user->isBeforeInBlock(ln)))
          return rewriter.notifyMatchFailure(
              ln, "the sum is used before the layer norm's parameters are defined");
    }
    rewriter.setInsertionPoint(at);
    auto fused = AddLayerNormOp::create(rewriter, rewriter.getFusedLoc({add.getLoc(), ln.getLoc()}),
                                        TypeRange{type, type}, x, r, ln.getGamma(),
                                        ln.getBeta(), ln.getEpsilon(), ln.getRms());
    rewriter.replaceOp(ln, fused.getResult());
    rewriter.replaceOp(add, fused.getSum());
    return success();
  }
};

struct FuseAddLayerNormPass
    : FusionPass<mlir::transfuse::impl::TransfuseFuseAddLayerNormBase<FuseAddLayerNormPass>,
                 FuseAddLayerNorm> {
  using FusionPass::FusionPass;
};

} // namespace

std::unique_ptr<Pass> mlir::transfuse::createFuseAddLayerNormPass(FusionReport *report) {
  return std::make_unique<FuseAddLayerNormPass>(report);
}
