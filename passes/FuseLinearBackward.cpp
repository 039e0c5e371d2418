//===- FuseLinearBackward.cpp - --transfuse-fuse-linear-backward ----------===//
//
// The backward half of the linear-epilogue fusion: after autodiff, the
// gradient reaching an activation's input through the linear layer above
// it, activation_grad(pre, [scale(] matmul(g, W) [)]), becomes one
// transfuse.linear_input_grad, which lowers to one GEMM whose epilogue
// scales and applies the derivative (the product is never stored alone).
//
//===----------------------------------------------------------------------===//

#include "passes/PassDetail.h"

#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::transfuse {
#define GEN_PASS_DEF_TRANSFUSEFUSELINEARBACKWARD
#include "passes/Passes.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse;

namespace {

struct FuseActivationGrad : OpRewritePattern<ActivationGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ActivationGradOp op, PatternRewriter &rw) const override {
    Value grad = op.getGrad();
    double scale = 1.0;
    ScaleOp scaleOp = grad.getDefiningOp<ScaleOp>();
    if (scaleOp) {
      if (!grad.hasOneUse())
        return failure();
      scale = scaleOp.getFactor().convertToDouble();
      grad = scaleOp.getInput();
    }
    auto mm = grad.getDefiningOp<MatmulOp>();
    if (!mm || !grad.hasOneUse() || !isLinearCandidate(mm) || op.getInput().getType() != op.getType() ||
        grad.getType() != op.getType())
      return failure();
    SmallVector<Location> locs = {mm.getLoc(), op.getLoc()};
    if (scaleOp)
      locs.insert(locs.begin() + 1, scaleOp.getLoc());
    auto fused = LinearInputGradOp::create(
        rw, rw.getFusedLoc(locs), op.getType(), mm.getLhs(), mm.getRhs(), op.getInput(), op.getActivationAttr(),
        mm.getTransposeRhs() ? rw.getUnitAttr() : UnitAttr(),
        rw.getF64FloatAttr(scale));
    rw.replaceOp(op, fused.getResult());
    if (scaleOp)
      rw.eraseOp(scaleOp);
    rw.eraseOp(mm);
    return success();
  }
};

struct FuseLinearBackwardPass
    : mlir::transfuse::impl::TransfuseFuseLinearBackwardBase<FuseLinearBackwardPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseActivationGrad>(&getContext());
    walkAndApplyPatterns(getOperation(), FrozenRewritePatternSet(std::move(patterns)));
  }
};

} // namespace
