//===- FuseLinearEpilogue.cpp - --transfuse-fuse-linear-epilogue ----------===//
//
// Every matmul of activations [..., K] by a rank-2 weight becomes a
// transfuse.linear, which then absorbs what follows it with one use: a bias
// add ([N]), an activation (relu, gelu, gelu_tanh), and a residual add that
// no layer norm consumes (that one belongs to add_layer_norm).
//
//===----------------------------------------------------------------------===//

#include "passes/PassDetail.h"

#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::transfuse {
#define GEN_PASS_DEF_TRANSFUSEFUSELINEAREPILOGUE
#include "passes/Passes.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse;

namespace {

/// The single user of `v`, if it has exactly one use.
Operation *soleUser(Value v) { return v.hasOneUse() ? *v.getUsers().begin() : nullptr; }

/// For add(v, other) or add(other, v): the other operand.
Value otherOperand(AddOp add, Value v) {
  return add.getLhs() == v ? add.getRhs() : add.getLhs();
}

bool feedsLayerNorm(Value v) {
  return llvm::any_of(v.getUsers(),
                      [](Operation *u) { return isa<LayerNormOp, AddLayerNormOp>(u); });
}

/// Replaces `mm` and the ops it absorbs (bias add, activation, residual add,
/// in that order; `cur` is the last one's result) with one linear, built at
/// the last of them (the residual may be defined after the matmul).
void replaceWithLinear(RewriterBase &rewriter, MatmulOp mm, ArrayRef<Operation *> absorbed,
                       Value cur, Value bias, Activation activation, Value residual) {
  rewriter.setInsertionPoint(absorbed.empty() ? mm.getOperation() : absorbed.back());
  SmallVector<Location> locs = {mm.getLoc()};
  for (Operation *op : absorbed)
    locs.push_back(op->getLoc());
  auto linear = LinearOp::create(rewriter, rewriter.getFusedLoc(locs), cur.getType(),
                                 mm.getLhs(), mm.getRhs(), bias, residual,
                                 mm.getTransposeRhs() ? rewriter.getUnitAttr() : UnitAttr(),
                                 ActivationAttr::get(rewriter.getContext(), activation));
  rewriter.replaceAllUsesWith(cur, linear.getResult());
  for (Operation *op : llvm::reverse(absorbed))
    rewriter.eraseOp(op);
  rewriter.eraseOp(mm);
}

/// A linear-layer matmul and the bias add, activation and residual add that
/// follow it -> one linear.
struct FuseLinearEpilogue : OpRewritePattern<MatmulOp> {
  static constexpr llvm::StringLiteral kFusion = "linear_epilogue";

  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp mm, PatternRewriter &rewriter) const override {
    if (!isLinearCandidate(mm))
      return failure(); // not a linear layer: not a candidate
    Value cur = mm.getResult(), bias, residual;
    SmallVector<Operation *> absorbed;
    Activation activation = Activation::None;
    // bias: add of a [N] vector
    if (auto add = dyn_cast_or_null<AddOp>(soleUser(cur)))
      if (Value b = biasOf(add, cur)) {
        bias = b;
        absorbed.push_back(add);
        cur = add.getResult();
      }
    // activation
    if (Operation *user = soleUser(cur)) {
      activation = activationOf(user).value_or(Activation::None);
      if (activation != Activation::None) {
        absorbed.push_back(user);
        cur = user->getResult(0);
      }
    }
    // residual: an add whose result no layer norm consumes
    if (auto add = dyn_cast_or_null<AddOp>(soleUser(cur))) {
      Value r = otherOperand(add, cur);
      if (add.getType() == cur.getType() && r != cur && !feedsLayerNorm(add.getResult())) {
        residual = r;
        absorbed.push_back(add);
        cur = add.getResult();
      }
    }
    if (absorbed.empty())
      return rewriter.notifyMatchFailure(
          mm, "no bias, activation or residual add follows the matmul (it runs as a plain linear)");
    replaceWithLinear(rewriter, mm, absorbed, cur, bias, activation, residual);
    return success();
  }
};

/// A linear-layer matmul that fused nothing becomes a plain linear, so that
/// every product by a weight takes the one GEMM path.
struct PlainLinear : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp mm, PatternRewriter &rewriter) const override {
    if (!isLinearCandidate(mm))
      return failure();
    replaceWithLinear(rewriter, mm, {}, mm.getResult(), Value(), Activation::None, Value());
    return success();
  }
};

struct FuseLinearEpiloguePass
    : FusionPass<mlir::transfuse::impl::TransfuseFuseLinearEpilogueBase<FuseLinearEpiloguePass>,
                 FuseLinearEpilogue> {
  using FusionPass::FusionPass;

  void runOnOperation() override {
    FusionPass::runOnOperation();
    RewritePatternSet plain(&getContext());
    plain.add<PlainLinear>(&getContext());
    walkAndApplyPatterns(getOperation(), FrozenRewritePatternSet(std::move(plain)));
  }
};

} // namespace

std::unique_ptr<Pass> mlir::transfuse::createFuseLinearEpiloguePass(FusionReport *report) {
  return std::make_unique<FuseLinearEpiloguePass>(report);
}
