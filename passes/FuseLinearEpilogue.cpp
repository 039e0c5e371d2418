//===- FuseLinearEpilogue.cpp - --transfuse-fuse-linear-epilogue ----------===//
//
// Every matmul of activations [..., K] by a rank-2 weight becomes a
// transfuse.linear, which then absorbs what follows it with one use: a bias
// add ([N]), an activation (relu, gelu, gelu_tanh), and a residual add that
// no layer norm consumes (that one belongs to add_layer_norm).
//
//===----------------------------------------------------------------------===//

#include "passes/PassDetail.h"

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

/// matmul by a rank-2 weight, and the bias add, activation and residual add
/// that follow it, -> one linear. A matmul with nothing to absorb becomes a
/// plain linear, recorded as a miss (it runs without an epilogue).
struct FuseLinearEpilogue : OpRewritePattern<MatmulOp> {
  static constexpr llvm::StringLiteral kFusion = "linear_epilogue";

  FuseLinearEpilogue(MLIRContext *context, const FusionRecorder &recorder)
      : OpRewritePattern(context), recorder(recorder) {}

  LogicalResult matchAndRewrite(MatmulOp mm, PatternRewriter &rewriter) const override {
    if (mm.getRhs().getType().getRank() != 2 || mm.getTransposeLhs() ||
        ShapedType::isDynamic(mm.getType().getShape().back()))
      return failure(); // not a linear layer: not a candidate
    Value x = mm.getLhs(), w = mm.getRhs();
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
      if (isa<ReluOp>(user))
        activation = Activation::Relu;
      else if (auto g = dyn_cast<GeluOp>(user))
        activation = g.getApproximate() == GeluApproximation::Tanh ? Activation::GeluTanh
                                                                   : Activation::Gelu;
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
    Location loc = mm.getLoc();
    Operation *last = absorbed.empty() ? mm.getOperation() : absorbed.back();
    // The residual may be defined after the matmul: build at the last op.
    rewriter.setInsertionPoint(last);
    SmallVector<Location> locs = {loc};
    for (Operation *op : absorbed)
      locs.push_back(op->getLoc());
    auto linear = LinearOp::create(rewriter, rewriter.getFusedLoc(locs), cur.getType(), x, w,
                                   bias, residual,
                                   mm.getTransposeRhs() ? rewriter.getUnitAttr() : UnitAttr(),
                                   ActivationAttr::get(rewriter.getContext(), activation));
    rewriter.replaceAllUsesWith(cur, linear.getResult());
    for (Operation *op : llvm::reverse(absorbed))
      rewriter.eraseOp(op);
    rewriter.eraseOp(mm);
    if (absorbed.empty())
      recorder.missed(loc, "no bias, activation or residual add follows the matmul "
                           "(it runs as a plain linear)");
    else
      recorder.fused(loc);
    return success();
  }

  const FusionRecorder &recorder;
};

struct FuseLinearEpiloguePass
    : FusionPass<mlir::transfuse::impl::TransfuseFuseLinearEpilogueBase<FuseLinearEpiloguePass>,
                 FuseLinearEpilogue> {
  using FusionPass::FusionPass;
};

} // namespace

std::unique_ptr<Pass> mlir::transfuse::createFuseLinearEpiloguePass(FusionReport *report) {
  return std::make_unique<FuseLinearEpiloguePass>(report);
}
