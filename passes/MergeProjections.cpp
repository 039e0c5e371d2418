//===- MergeProjections.cpp - --transfuse-merge-projections ---------------===//
//
// Plain projections of one input (x·Wᵢ [+ bᵢ], as matmul [+ add] or as a
// linear without activation or residual) become one projection by the
// concatenated weight, followed by a split: one GEMM with a wide N instead of
// several narrow ones. Q/K/V of self-attention merge this way, and so do the
// K/V projections of the encoder memory (across all decoder layers).
//
//===----------------------------------------------------------------------===//

#include "passes/PassDetail.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"


namespace mlir::transfuse {
#define GEN_PASS_DEF_TRANSFUSEMERGEPROJECTIONS
#include "passes/Passes.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse;

namespace {

struct Projection {
  Operation *op;      // the matmul or linear
  Operation *biasAdd; // the matmul's bias add, if any
  Value weight, bias, result;
  int64_t n;
};

/// Recognizes a plain projection rooted at `op`.
std::optional<Projection> asProjection(Operation *op) {
  if (auto mm = dyn_cast<MatmulOp>(op)) {
    if (mm.getRhs().getType().getRank() != 2 || mm.getTransposeLhs() ||
        ShapedType::isDynamic(mm.getType().getShape().back()))
      return std::nullopt; // not a projection by a weight
    Projection p{op, nullptr, mm.getRhs(), Value(), mm.getResult(),
                 mm.getType().getShape().back()};
    if (mm.getResult().hasOneUse())
      if (auto add = dyn_cast<AddOp>(*mm.getResult().getUsers().begin()))
        if (Value b = biasOf(add, mm.getResult())) {
          p.biasAdd = add;
          p.bias = b;
          p.result = add.getResult();
        }
    return p;
  }
  if (auto l = dyn_cast<LinearOp>(op)) {
    if (l.getActivation() != Activation::None || l.getResidual() || l.getGated() ||
        l.getInvFreq())
      return std::nullopt;
    return Projection{op, nullptr, l.getWeight(), l.getBias(), l.getResult(),
                      l.getType().getShape().back()};
  }
  return std::nullopt;
}

/// Collects, operands first, the ops to move before `point` so that `v` is
/// available there: none when it already is; false when it cannot be made
/// available (it depends on an op of the group being merged, `group`, or on
/// an impure op after `point`). Weights sliced from a packed parameter are
/// computed where each layer starts, so they move.
bool hoistable(Value v, Operation *point, const llvm::DenseSet<Operation *> &group,
               llvm::SetVector<Operation *> &moves) {
  if (isa<BlockArgument>(v))
    return true;
  Operation *def = v.getDefiningOp();
  if (group.contains(def) || def->getBlock() != point->getBlock())
    return false;
  if (def->isBeforeInBlock(point) || moves.contains(def))
    return true;
  if (!isPure(def) || def->getNumRegions() != 0)
    return false;
  for (Value operand : def->getOperands())
    if (!hoistable(operand, point, group, moves))
      return false;
  moves.insert(def);
  return true;
}

/// Group key: the input, the weight layout, linear vs matmul, bias presence.
using Key = std::tuple<void *, bool, bool, bool>;

Key keyOf(Operation *op, const Projection &p) {
  bool transposed = isa<LinearOp>(op) ? cast<LinearOp>(op).getTransposeWeight()
                                      : cast<MatmulOp>(op).getTransposeRhs();
  return Key{op->getOperand(0).getAsOpaquePointer(), transposed, isa<LinearOp>(op),
             static_cast<bool>(p.bias)};
}

/// Projections of one input with one key -> one matmul (or linear) on the
/// concatenated weights and a split of its result. Rooted at the group's
/// first projection; the others are the input's later users with its key.
struct MergeProjections : RewritePattern {
  static constexpr llvm::StringLiteral kFusion = "projections";

  explicit MergeProjections(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  LogicalResult matchAndRewrite(Operation *root, PatternRewriter &b) const override {
    std::optional<Projection> rootProjection = asProjection(root);
    if (!rootProjection)
      return failure();
    Key key = keyOf(root, *rootProjection);
    SmallVector<Projection> group;
    for (Operation *user : root->getOperand(0).getUsers()) {
      if (user->getBlock() != root->getBlock() || user->getOperand(0) != root->getOperand(0))
        continue;
      std::optional<Projection> p = asProjection(user);
      if (p && keyOf(user, *p) == key)
        group.push_back(*p);
    }
    llvm::sort(group, [](const Projection &x, const Projection &y) {
      return x.op->isBeforeInBlock(y.op);
    });
    if (group.size() < 2 || group.front().op != root)
      return failure(); // alone, or not the group's first: not a candidate here
    Operation *first = root;
    llvm::DenseSet<Operation *> members;
    for (const Projection &p : group) {
      members.insert(p.op);
      if (p.biasAdd)
        members.insert(p.biasAdd);
    }
    llvm::SetVector<Operation *> moves;
    for (const Projection &p : group)
      if (!hoistable(p.weight, first, members, moves) ||
          (p.bias && !hoistable(p.bias, first, members, moves)))
        return b.notifyMatchFailure(p.op, "its weight or bias depends on values computed after "
                                          "the other projections of the same input start");
    for (Operation *op : moves)
      b.moveOpBefore(op, first);
    b.setInsertionPoint(first);
    SmallVector<Location> locs;
    SmallVector<Value> weights, biases;
    SmallVector<int64_t> sizes;
    for (const Projection &p : group) {
      locs.push_back(p.op->getLoc());
      weights.push_back(p.weight);
      if (p.bias)
        biases.push_back(p.bias);
      sizes.push_back(p.n);
    }
    Location loc = b.getFusedLoc(locs);
    bool isLinear = isa<LinearOp>(first);
    bool transposed = isLinear ? cast<LinearOp>(first).getTransposeWeight()
                               : cast<MatmulOp>(first).getTransposeRhs();
    Value x = first->getOperand(0);
    // Weights are [N, K] when transposed (concatenate rows), else [K, N].
    Value w = ConcatOp::create(b, loc, weights, transposed ? 0 : 1);
    Value bias = biases.empty() ? Value() : ConcatOp::create(b, loc, biases, 0).getResult();
    Value y;
    if (isLinear) {
      auto xt = cast<RankedTensorType>(x.getType());
      SmallVector<int64_t> shape(xt.getShape().drop_back());
      int64_t total = 0;
      for (int64_t s : sizes)
        total += s;
      shape.push_back(total);
      y = LinearOp::create(b, loc, RankedTensorType::get(shape, xt.getElementType()), x, w,
                           bias, Value(), Value(), Value(),
                           transposed ? b.getUnitAttr() : UnitAttr(),
                           ActivationAttr::get(b.getContext(), Activation::None), UnitAttr(),
                           IntegerAttr(), IntegerAttr());
    } else {
      y = MatmulOp::create(b, loc, x, w, false, transposed);
      if (bias)
        y = AddOp::create(b, loc, y, bias);
    }
    int64_t axis = cast<RankedTensorType>(y.getType()).getRank() - 1;
    auto split = SplitOp::create(b, loc, y, axis, sizes);
    for (auto [p, part] : llvm::zip(group, split.getResults())) {
      b.replaceAllUsesWith(p.result, part);
      if (p.biasAdd)
        b.eraseOp(p.biasAdd);
      b.eraseOp(p.op);
    }
    return success();
  }
};

struct MergeProjectionsPass
    : FusionPass<mlir::transfuse::impl::TransfuseMergeProjectionsBase<MergeProjectionsPass>,
                 MergeProjections> {
  using FusionPass::FusionPass;
};

} // namespace

std::unique_ptr<Pass> mlir::transfuse::createMergeProjectionsPass(FusionReport *report) {
  return std::make_unique<MergeProjectionsPass>(report);
}
