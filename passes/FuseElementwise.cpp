//===- FuseElementwise.cpp - --transfuse-fuse-elementwise -----------------===//
//
// Chains of elementwise ops that no named fusion took become one
// transfuse.fused_elementwise: starting from the last op of a chain, producers
// of the same result type with a single use join, and one-element constants
// are cloned into the body. What stays outside becomes an input.
//
//===----------------------------------------------------------------------===//

#include "passes/PassDetail.h"

#include "mlir/IR/IRMapping.h"

namespace mlir::transfuse {
#define GEN_PASS_DEF_TRANSFUSEFUSEELEMENTWISE
#include "passes/Passes.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse;

namespace {

bool isMath(Operation *op) { return isElementwise(op) && !isa<ConstantOp>(op); }

bool isScalarConstant(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  return c && cast<ShapedType>(c.getType()).getNumElements() == 1;
}

/// The chain of elementwise ops ending at a root (an op whose result does
/// not feed another op of the same chain, else the chain grows from its
/// consumer) -> one fused_elementwise.
struct FuseElementwise : RewritePattern {
  static constexpr llvm::StringLiteral kFusion = "elementwise";

  explicit FuseElementwise(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  /// The chain ending at `root`, producers first.
  static SmallVector<Operation *> cluster(Operation *root) {
    SmallVector<Operation *> ops = {root}, worklist = {root};
    Type type = root->getResult(0).getType();
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && isMath(def) && def->getBlock() == root->getBlock() &&
            operand.hasOneUse() && operand.getType() == type && !llvm::is_contained(ops, def)) {
          ops.push_back(def);
          worklist.push_back(def);
        }
      }
    }
    llvm::sort(ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    return ops;
  }

  static void fuse(ArrayRef<Operation *> ops, PatternRewriter &b) {
    Operation *root = ops.back();
    SmallVector<Value> inputs;
    for (Operation *op : ops)
      for (Value operand : op->getOperands())
        if (!llvm::is_contained(ops, operand.getDefiningOp()) && !isScalarConstant(operand) &&
            !llvm::is_contained(inputs, operand))
          inputs.push_back(operand);
    b.setInsertionPoint(root);
    SmallVector<Location> locs;
    for (Operation *op : ops)
      locs.push_back(op->getLoc());
    Location loc = b.getFusedLoc(locs);
    auto fused = FusedElementwiseOp::create(b, loc, root->getResult(0).getType(), inputs);
    Block *body = b.createBlock(&fused.getBody());
    IRMapping map;
    for (Value input : inputs)
      map.map(input, body->addArgument(input.getType(), input.getLoc()));
    for (Operation *op : ops)
      for (Value operand : op->getOperands())
        if (!map.contains(operand) && isScalarConstant(operand))
          map.map(operand, b.clone(*operand.getDefiningOp())->getResult(0));
    for (Operation *op : ops)
      b.clone(*op, map);
    YieldOp::create(b, loc, map.lookup(root->getResult(0)));
    b.replaceAllUsesWith(root->getResult(0), fused.getResult());
    for (Operation *op : llvm::reverse(ops))
      b.eraseOp(op);
  }

  LogicalResult matchAndRewrite(Operation *root, PatternRewriter &rewriter) const override {
    if (!isMath(root) || root->getParentOfType<FusedElementwiseOp>())
      return failure();
    Value r = root->getResult(0);
    if (r.hasOneUse() && isMath(*r.getUsers().begin()) &&
        (*r.getUsers().begin())->getResult(0).getType() == r.getType())
      return failure(); // inside a chain: its root fuses it
    SmallVector<Operation *> ops = cluster(root);
    if (ops.size() < 2)
      return rewriter.notifyMatchFailure(
          root, "no elementwise producer of the same shape with a single use to fuse with");
    fuse(ops, rewriter);
    return success();
  }
};

struct FuseElementwisePass
    : FusionPass<mlir::transfuse::impl::TransfuseFuseElementwiseBase<FuseElementwisePass>,
                 FuseElementwise> {
  using FusionPass::FusionPass;
};

} // namespace

std::unique_ptr<Pass> mlir::transfuse::createFuseElementwisePass(FusionReport *report) {
  return std::make_unique<FuseElementwisePass>(report);
}
