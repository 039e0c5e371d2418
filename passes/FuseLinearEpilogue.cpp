//===- FuseLinearEpilogue.cpp - --transfuse-fuse-linear-epilogue ----------===//
//
// Every matmul of activations [..., K] by a rank-2 weight becomes a
// transfuse.linear, which then absorbs what follows it with one use: a bias
// add ([N]), an activation (relu, gelu, gelu_tanh, silu), and a residual add
// that no layer norm consumes (that one belongs to add_layer_norm). Then
// the epilogues that combine two columns of one product:
//   gated   act(z₁)·z₂ of a product split in two halves (SwiGLU: the gate
//           and up projections merged by the projections fusion);
//   rotary  transfuse.rotary of the leading parts of a product (the Q and K
//           of a merged Q/K/V projection, or a lone Q or K projection).
//
//===----------------------------------------------------------------------===//

#include "ir/Sizes.h"
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
                                 mm.getLhs(), mm.getRhs(), bias, residual, Value(), Value(),
                                 mm.getTransposeRhs() ? rewriter.getUnitAttr() : UnitAttr(),
                                 ActivationAttr::get(rewriter.getContext(), activation),
                                 UnitAttr(), IntegerAttr(), IntegerAttr());
  rewriter.replaceAllUsesWith(cur, linear.getResult());
  for (Operation *op : llvm::reverse(absorbed))
    rewriter.eraseOp(op);
  rewriter.eraseOp(mm);
}

/// True when a and b have provably equal sizes in every dimension.
bool sameSizes(Value a, Value b) {
  auto ta = cast<RankedTensorType>(a.getType()), tb = cast<RankedTensorType>(b.getType());
  if (ta.getRank() != tb.getRank())
    return false;
  SizeAnalysis sizes;
  for (int64_t d = 0; d < ta.getRank(); ++d)
    if (!sizes.equal(a, d, b, d))
      return false;
  return true;
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
    // residual: an add whose result no layer norm consumes, of the result's
    // own sizes (the GEMM epilogue reads it element for element, no
    // broadcasting)
    if (auto add = dyn_cast_or_null<AddOp>(soleUser(cur))) {
      Value r = otherOperand(add, cur);
      if (add.getType() == cur.getType() && r != cur && !feedsLayerNorm(add.getResult()) &&
          sameSizes(r, cur)) {
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

/// A linear with no epilogue yet, whose columns a paired epilogue may take.
bool isPlainLinear(LinearOp l) {
  return l.getActivation() == Activation::None && !l.getResidual() && !l.getGated() &&
         !l.getInvFreq();
}

/// The split of `l`'s result along its last axis, when that is its one use.
SplitOp lastAxisSplit(LinearOp l) {
  auto split = dyn_cast_or_null<SplitOp>(soleUser(l.getResult()));
  int64_t rank = l.getType().getRank();
  if (!split || (split.getAxis() != rank - 1 && split.getAxis() != -1))
    return SplitOp();
  return split;
}

/// A linear with the same operands as `l` and the given epilogue, built
/// where `l` is.
LinearOp rebuild(PatternRewriter &b, LinearOp l, Location loc, Type type, Activation activation,
                 bool gated, Value invFreq, Value offset, int64_t columns, int64_t headDim) {
  b.setInsertionPoint(l);
  auto i64 = [&](int64_t v) { return v ? b.getI64IntegerAttr(v) : IntegerAttr(); };
  return LinearOp::create(b, loc, type, l.getInput(), l.getWeight(), l.getBias(), Value(), invFreq,
                          offset, l.getTransposeWeightAttr(),
                          ActivationAttr::get(b.getContext(), activation),
                          gated ? b.getUnitAttr() : UnitAttr(), i64(columns), i64(headDim));
}

/// act(z₁)·z₂ of a linear's result z split in two equal halves -> one
/// linear {gated}: the product's columns are combined as they are stored.
struct FuseGatedLinear : OpRewritePattern<LinearOp> {
  static constexpr llvm::StringLiteral kFusion = "gated_linear";

  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LinearOp l, PatternRewriter &b) const override {
    // Separate gate (a linear with the activation) and up products of one
    // input: the projections fusion merges them first.
    if (l.getActivation() != Activation::None && !l.getResidual() && !l.getGated())
      if (auto mul = dyn_cast_or_null<MulOp>(soleUser(l.getResult())))
        if (llvm::any_of(mul->getOperands(), [&](Value v) {
              auto other = v.getDefiningOp<LinearOp>();
              return other && other != l && other.getInput() == l.getInput();
            }))
          return b.notifyMatchFailure(l, "its gate and up products are separate (the projections "
                                         "fusion merges them into one)");
    if (!isPlainLinear(l))
      return failure();
    SplitOp split = lastAxisSplit(l);
    if (!split || split.getNumResults() != 2)
      return failure();
    Value first = split.getResult(0), second = split.getResult(1);
    Operation *act = soleUser(first);
    std::optional<Activation> activation = act ? activationOf(act) : std::nullopt;
    auto mul = activation ? dyn_cast_or_null<MulOp>(soleUser(act->getResult(0))) : MulOp();
    if (!mul) {
      if (Operation *a = soleUser(second); a && activationOf(a))
        return b.notifyMatchFailure(l, "the activation reads the second half (the gate must be "
                                       "the first half of the merged product)");
      return failure(); // not a gated product
    }
    Value gate = act->getResult(0);
    if (!llvm::is_contained(mul->getOperands(), second) ||
        !llvm::is_contained(mul->getOperands(), gate) || !second.hasOneUse())
      return b.notifyMatchFailure(mul, "the product is not act(gate)·up of one split product");
    auto sizes = split.getSizes();
    if (sizes[0] != sizes[1])
      return b.notifyMatchFailure(split, "the gate and up halves differ in size");
    if (mul.getType() != cast<RankedTensorType>(first.getType()))
      return b.notifyMatchFailure(mul, "the product broadcasts");
    Location loc = b.getFusedLoc({l.getLoc(), split.getLoc(), act->getLoc(), mul.getLoc()});
    LinearOp gated =
        rebuild(b, l, loc, mul.getType(), *activation, /*gated=*/true, Value(), Value(), 0, 0);
    b.replaceAllUsesWith(mul.getResult(), gated.getResult());
    b.eraseOp(mul);
    b.eraseOp(act);
    b.eraseOp(split);
    b.eraseOp(l);
    return success();
  }
};

/// transfuse.rotary of a linear's result, or of the leading parts of its
/// split (Q and K of a merged Q/K/V projection) -> one linear {rotary}.
struct FuseRotaryLinear : OpRewritePattern<LinearOp> {
  static constexpr llvm::StringLiteral kFusion = "rotary_linear";

  using OpRewritePattern::OpRewritePattern;

  /// The rotary op that is `v`'s one use, if any.
  static RotaryOp rotaryOf(Value v) { return dyn_cast_or_null<RotaryOp>(soleUser(v)); }

  LogicalResult matchAndRewrite(LinearOp l, PatternRewriter &b) const override {
    if (!isPlainLinear(l))
      return failure();
    SplitOp split = lastAxisSplit(l);
    SmallVector<Value> parts;
    SmallVector<int64_t> sizes;
    if (split) {
      parts.assign(split.getResults().begin(), split.getResults().end());
      sizes.assign(split.getSizes().begin(), split.getSizes().end());
    } else {
      parts.push_back(l.getResult());
      sizes.push_back(l.getType().getShape().back());
    }
    // The rotated parts: a prefix, all rotated alike.
    size_t rotated = 0;
    while (rotated < parts.size() && rotaryOf(parts[rotated]))
      ++rotated;
    if (rotated == 0) {
      if (llvm::any_of(parts, [](Value p) { return (bool)rotaryOf(p); }))
        return b.notifyMatchFailure(l, "the rotated parts are not the product's leading columns");
      return failure(); // not a rotary product
    }
    for (size_t i = rotated; i < parts.size(); ++i)
      if (rotaryOf(parts[i]))
        return b.notifyMatchFailure(l, "the rotated parts are not the product's leading columns");
    RotaryOp r0 = rotaryOf(parts[0]);
    int64_t columns = 0;
    for (size_t i = 0; i < rotated; ++i) {
      RotaryOp r = rotaryOf(parts[i]);
      if (r.getInverse() || r.getInvFreq() != r0.getInvFreq() || r.getOffset() != r0.getOffset() ||
          r.getHeadDim() != r0.getHeadDim())
        return b.notifyMatchFailure(r, "the parts are rotated by different frequencies, positions "
                                       "or head sizes");
      columns += sizes[i];
    }
    const int64_t headDim = r0.getHeadDim();
    if (2 * cast<RankedTensorType>(r0.getInvFreq().getType()).getDimSize(0) != headDim)
      return b.notifyMatchFailure(r0, "a partial rotary (fewer rotated columns than head_dim) is "
                                      "not fused");
    for (Value v : {Value(r0.getInvFreq()), Value(r0.getOffset())})
      if (v && v.getDefiningOp() && v.getParentBlock() == l->getBlock() &&
          !v.getDefiningOp()->isBeforeInBlock(l))
        return b.notifyMatchFailure(r0, "its frequencies or offset are computed after the product");
    SmallVector<Location> locs = {l.getLoc()};
    for (size_t i = 0; i < rotated; ++i)
      locs.push_back(rotaryOf(parts[i]).getLoc());
    LinearOp fused = rebuild(b, l, b.getFusedLoc(locs), l.getType(), Activation::None, false,
                             r0.getInvFreq(), r0.getOffset(), columns, headDim);
    SmallVector<Value> fresh = {fused.getResult()};
    if (split) {
      b.setInsertionPoint(split);
      auto again = SplitOp::create(b, split.getLoc(), fused.getResult(), split.getAxis(), sizes);
      fresh.assign(again.getResults().begin(), again.getResults().end());
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i < rotated) {
        RotaryOp r = rotaryOf(parts[i]);
        b.replaceAllUsesWith(r.getResult(), fresh[i]);
        b.eraseOp(r);
      } else {
        b.replaceAllUsesWith(parts[i], fresh[i]);
      }
    }
    if (split)
      b.eraseOp(split);
    b.eraseOp(l);
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
    applyFusionPatterns<FuseGatedLinear>(getOperation(),
                                         {FuseGatedLinear::kFusion, report, remarks});
    applyFusionPatterns<FuseRotaryLinear>(getOperation(),
                                          {FuseRotaryLinear::kFusion, report, remarks});
  }
};

} // namespace

std::unique_ptr<Pass> mlir::transfuse::createFuseLinearEpiloguePass(FusionReport *report) {
  return std::make_unique<FuseLinearEpiloguePass>(report);
}
