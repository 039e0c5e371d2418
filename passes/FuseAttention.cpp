//===- FuseAttention.cpp - --transfuse-fuse-attention ---------------------===//
//
// Rewrites softmax(mask(scale·(Q·Kᵀ) + bias))·V into transfuse.attention.
// Starting from each softmax, the pass walks back to the Q·Kᵀ matmul and
// forward to the ·V matmul, and proves every assumption it makes: constant
// scales, -inf masking, exact transposes (composed, never guessed from a
// pattern), and equal batch, head and key lengths. Anything it cannot prove
// stays unfused, with the reason in the report.
//
//===----------------------------------------------------------------------===//

#include "passes/PassDetail.h"

#include <cmath>

namespace mlir::transfuse {
#define GEN_PASS_DEF_TRANSFUSEFUSEATTENTION
#include "passes/Passes.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse;

namespace {

/// An operand of the attention op as the matmuls saw it: `value`, with its
/// last two dimensions swapped when `swapped`.
struct Operand {
  Value value;
  bool swapped = false;
  int64_t axis(int64_t a) const { return swapped && a >= 2 ? 5 - a : a; }

  /// `value` as read through transposes of its last two dimensions (an
  /// exporter's k.transpose(-1, -2)): their input, the flag flipped.
  static Operand through(Value v, bool swapped) {
    while (auto t = v.getDefiningOp<TransposeOp>()) {
      if (t.getPermutation() != ArrayRef<int64_t>{0, 1, 3, 2})
        break;
      v = t.getInput();
      swapped = !swapped;
    }
    return {v, swapped};
  }
};

/// The constant factor of a scale-like op on a value (scale, mul or div by a
/// one-element constant), and the scaled input; none for anything else.
std::optional<std::pair<double, Value>> asScale(Operation *op) {
  if (!op)
    return std::nullopt;
  if (auto s = dyn_cast<ScaleOp>(op))
    return std::pair{s.getFactor().convertToDouble(), s.getInput()};
  auto resultType = op->getNumResults() == 1 ? op->getResult(0).getType() : Type();
  if (auto m = dyn_cast<MulOp>(op)) {
    if (auto c = constantScalar(m.getRhs()); c && m.getLhs().getType() == resultType)
      return std::pair{*c, m.getLhs()};
    if (auto c = constantScalar(m.getLhs()); c && m.getRhs().getType() == resultType)
      return std::pair{*c, m.getRhs()};
  }
  if (auto d = dyn_cast<DivOp>(op))
    if (auto c = constantScalar(d.getRhs()); c && *c != 0.0 && d.getLhs().getType() == resultType)
      return std::pair{1.0 / *c, d.getLhs()};
  return std::nullopt;
}

class AttentionMatcher {
public:
  AttentionMatcher(SoftmaxOp softmax, SizeAnalysis &dims) : softmax(softmax), dims(dims) {}

  /// Matches; on failure returns the reason.
  std::optional<std::string> match();
  /// Builds the attention op and erases what it replaces; on failure (the
  /// fused op does not verify) the input IR is untouched and `reason` set.
  LogicalResult rewrite(PatternRewriter &b, std::string &reason);

private:
  std::optional<std::string> walkScores();
  std::optional<std::string> walkProbabilities();
  std::optional<std::string> classifyMasks();

  SoftmaxOp softmax;
  SizeAnalysis &dims;
  MatmulOp qk, pv;
  DropoutOp dropout;
  double scale = 1.0;
  Operand q, k, v;
  SmallVector<Operation *> chain; // between qk and softmax, nearest the softmax first
  SmallVector<Operation *> prescales;
  SmallVector<Value> keepMasks;
  SmallVector<std::pair<Value, double>> biases; // additive term, factor applied after it
  bool causal = false;
  Value keyPadding;
};

std::optional<std::string> AttentionMatcher::walkScores() {
  Value cur = softmax.getInput();
  double after = 1.0; // product of the factors between `cur` and the softmax
  while (true) {
    Operation *def = cur.getDefiningOp();
    if (!cur.hasOneUse())
      return "an intermediate of the scores has a second consumer" + at(def);
    if (!def)
      return std::string("the scores are not computed by a matmul");
    if (auto mm = dyn_cast<MatmulOp>(def)) {
      qk = mm;
      break;
    }
    if (auto sel = dyn_cast<SelectOp>(def)) {
      std::optional<double> fill = constantScalar(sel.getOnFalse());
      if (!fill || !std::isinf(*fill) || *fill > 0)
        return "a select that does not set masked scores to -inf" + at(def);
      if (sel.getOnTrue().getType() != sel.getType())
        return "a mask that does not broadcast to the scores without growing them" + at(def);
      if (after <= 0.0)
        return std::string("a non-positive scale after masking");
      keepMasks.push_back(sel.getCond());
      chain.push_back(def);
      cur = sel.getOnTrue();
      continue;
    }
    if (auto s = asScale(def)) {
      if (s->first == 0.0)
        return std::string("a zero scale");
      after *= s->first;
      chain.push_back(def);
      cur = s->second;
      continue;
    }
    if (isa<MulOp, DivOp>(def))
      return "the scale is not a constant" + at(def);
    if (auto add = dyn_cast<AddOp>(def)) {
      // The scores come from the matmul chain; the other operand is the mask.
      auto fromChain = [](Value x) {
        Operation *d = x.getDefiningOp();
        return d && isa<MatmulOp, SelectOp, AddOp, ScaleOp, MulOp, DivOp>(d);
      };
      Value scores = fromChain(add.getLhs()) ? add.getLhs()
                     : fromChain(add.getRhs()) ? add.getRhs()
                                               : Value();
      if (!scores)
        return "the scores are not computed by a matmul" + at(def);
      Value bias = scores == add.getLhs() ? add.getRhs() : add.getLhs();
      if (scores.getType() != add.getType())
        return "an additive mask that does not broadcast to the scores without growing them" +
               at(def);
      biases.push_back({bias, after});
      chain.push_back(def);
      cur = scores;
      continue;
    }
    return "the scores pass through '" + def->getName().getStringRef().str() + "'" + at(def) +
           ", which attention cannot absorb";
  }
  if (qk.getType().getRank() != 4)
    return std::string("the scores are not [B, H, Sq, Sk] (rank 4)");
  scale = after;
  // A constant scale on Q or K before the matmul is absorbed too.
  Value lhs = qk.getLhs(), rhs = qk.getRhs();
  for (Value *side : {&lhs, &rhs})
    while (side->hasOneUse()) {
      auto s = asScale(side->getDefiningOp());
      if (!s || s->first == 0.0)
        break;
      prescales.push_back(side->getDefiningOp());
      scale *= s->first;
      *side = s->second;
    }
  q = Operand::through(lhs, qk.getTransposeLhs());
  k = Operand::through(rhs, !qk.getTransposeRhs());
  return std::nullopt;
}

std::optional<std::string> AttentionMatcher::walkProbabilities() {
  Value p = softmax.getResult();
  if (!p.hasOneUse())
    return std::string("the softmax result has a second consumer");
  Operation *user = *p.getUsers().begin();
  if (auto d = dyn_cast<DropoutOp>(user)) {
    if (d.getStep())
      return std::string("dropout after the softmax takes a step operand");
    dropout = d;
    p = d.getResult();
    if (!p.hasOneUse())
      return std::string("the dropout result has a second consumer");
    user = *p.getUsers().begin();
  }
  pv = dyn_cast<MatmulOp>(user);
  if (!pv || pv.getLhs() != p || pv.getTransposeLhs())
    return "the softmax result is not multiplied by V (its consumer is '" +
           user->getName().getStringRef().str() + "'" + at(user) + ")";
  if (pv.getRhs().getType().getRank() != 4)
    return std::string("V is not [B, H, Sk, Dv] (rank 4)");
  v = Operand::through(pv.getRhs(), pv.getTransposeRhs());
  for (Operand *o : {&q, &k})
    if (cast<RankedTensorType>(o->value.getType()).getRank() != 4)
      return std::string("Q and K are not [B, H, S, D] (rank 4)");
  for (int64_t d : {0, 1})
    if (!dims.equal(q.value, q.axis(d), k.value, k.axis(d)) ||
        !dims.equal(q.value, q.axis(d), v.value, v.axis(d)))
      return std::string("the batch or head dimensions of Q, K and V are not provably equal "
                         "(a broadcasting matmul)");
  if (!dims.equal(k.value, k.axis(2), v.value, v.axis(2)))
    return std::string("V's length is not provably K's length");
  // The attention kernels (CPU and CUDA) take one static head size, 1..256.
  auto headSize = [](const Operand &o) {
    return cast<RankedTensorType>(o.value.getType()).getDimSize(o.axis(3));
  };
  const int64_t d = headSize(q);
  if (ShapedType::isDynamic(d) || d < 1 || d > 256 || headSize(k) != d || headSize(v) != d)
    return std::string("Q, K and V do not share one static head size of 1 to 256 (what the "
                       "attention kernels take)");
  return std::nullopt;
}

std::optional<std::string> AttentionMatcher::classifyMasks() {
  for (Value m : keepMasks) {
    if (auto c = m.getDefiningOp<CausalMaskOp>()) {
      if (dims.equalsIndex(c.getQueryLen(), q.value, q.axis(2)) &&
          dims.equalsIndex(c.getKeyLen(), k.value, k.axis(2))) {
        causal = true;
        continue;
      }
    }
    auto t = cast<RankedTensorType>(m.getType());
    if (!keyPadding && t.getRank() == 4 && t.getDimSize(1) == 1 && t.getDimSize(2) == 1 &&
        dims.equal(m, 0, q.value, q.axis(0)) && dims.equal(m, 3, k.value, k.axis(2))) {
      keyPadding = m;
      continue;
    }
    // The attention kernels (CPU and CUDA, forward and backward) take a
    // causal and a key-padding mask; a fused op with another boolean mask
    // would verify and then not lower, so the pattern stays unfused.
    Operation *def = m.getDefiningOp();
    return "a boolean mask that is neither causal nor key padding (the attention kernels take "
           "only those): " +
           (def ? "'" + def->getName().getStringRef().str() + "'" + at(def)
                : std::string("a function argument"));
  }
  return std::nullopt;
}

std::optional<std::string> AttentionMatcher::match() {
  auto type = softmax.getType();
  int64_t axis = normalizedAxis(softmax.getAxis(), type.getRank());
  if (axis != type.getRank() - 1)
    return "softmax over axis " + std::to_string(axis) + ", not the last (key) axis";
  if (auto reason = walkScores())
    return reason;
  if (auto reason = walkProbabilities())
    return reason;
  return classifyMasks();
}

/// x [B, Hkv, S, D] where `v` is x with each head repeated G times: x
/// reshaped to [B, Hkv, 1, S, D], then G copies concatenated along axis 2
/// (GraphBuilder::repeatHeads) or an expand of axis 2 to G by a constant
/// (Hugging Face's repeat_kv as exported), reshaped to [B, Hkv·G, S, D];
/// with G; else none. The fused op reads grouped K/V heads as they are.
std::optional<std::pair<Value, int64_t>> unrepeatedHeads(Value v) {
  auto outer = v.getDefiningOp<ReshapeOp>();
  Value repeated = outer ? outer.getInput() : Value();
  ReshapeOp inner;
  int64_t g = 0;
  if (auto concat = repeated ? repeated.getDefiningOp<ConcatOp>() : ConcatOp()) {
    if (concat.getAxis() != 2 || concat.getInputs().empty() || !llvm::all_equal(concat.getInputs()))
      return std::nullopt;
    inner = concat.getInputs()[0].getDefiningOp<ReshapeOp>();
    g = (int64_t)concat.getInputs().size();
  } else if (auto expand = repeated ? repeated.getDefiningOp<ExpandOp>() : ExpandOp()) {
    // Only axis 2 grows: `like` is a constant of ones elsewhere.
    auto lt = cast<RankedTensorType>(expand.getLike().getType());
    if (!expand.getLike().getDefiningOp<ConstantOp>() || lt.getRank() != 5 ||
        llvm::any_of(llvm::enumerate(lt.getShape()),
                     [](auto d) { return d.index() != 2 && d.value() != 1; }))
      return std::nullopt;
    inner = expand.getInput().getDefiningOp<ReshapeOp>();
    g = expand.getType().getDimSize(2);
  }
  if (!inner || g < 1 || ShapedType::isDynamic(g))
    return std::nullopt;
  Value x = inner.getInput();
  auto xt = cast<RankedTensorType>(x.getType()), it = cast<RankedTensorType>(inner.getType());
  auto vt = cast<RankedTensorType>(v.getType());
  if (xt.getRank() != 4 || it.getRank() != 5 || vt.getRank() != 4)
    return std::nullopt;
  auto xs = xt.getShape();
  if (it.getShape() != ArrayRef<int64_t>{xs[0], xs[1], 1, xs[2], xs[3]} ||
      ShapedType::isDynamic(xs[1]) || vt.getShape() != ArrayRef<int64_t>{xs[0], xs[1] * g, xs[2], xs[3]})
    return std::nullopt;
  return std::pair{x, g};
}

Value swapLastTwo(OpBuilder &b, Location loc, Operand o) {
  if (!o.swapped)
    return o.value;
  return TransposeOp::create(b, loc, o.value, ArrayRef<int64_t>{0, 1, 3, 2});
}

LogicalResult AttentionMatcher::rewrite(PatternRewriter &rewriter, std::string &reason) {
  // Build into a block of its own: nothing touches the IR until the fused op
  // verifies, so a failure leaves the input as it was.
  Block scratch;
  OpBuilder b(rewriter.getContext());
  b.setInsertionPointToEnd(&scratch);
  Location loc = b.getFusedLoc({qk.getLoc(), softmax.getLoc(), pv.getLoc()});
  // K and V repeated for grouped query heads: the fused op reads them as
  // they are (kv heads fewer than the query's).
  Operand key0 = k, value0 = v;
  auto kr = unrepeatedHeads(k.value), vr = unrepeatedHeads(v.value);
  if (kr && vr && kr->second == vr->second) {
    key0.value = kr->first;
    value0.value = vr->first;
  }
  Value query = swapLastTwo(b, loc, q), key = swapLastTwo(b, loc, key0),
        value = swapLastTwo(b, loc, value0);
  Value kp;
  if (keyPadding) {
    auto t = cast<RankedTensorType>(keyPadding.getType());
    auto type = RankedTensorType::get({t.getDimSize(0), t.getDimSize(3)}, t.getElementType());
    kp = ReshapeOp::create(b, loc, type, keyPadding);
  }
  Value bias;
  for (auto [term, factor] : biases) {
    Value scaled = factor == 1.0 ? term : ScaleOp::create(b, loc, term, b.getF64FloatAttr(factor)).getResult();
    bias = bias ? AddOp::create(b, loc, bias, scaled).getResult() : scaled;
  }
  auto att = AttentionOp::create(
      b, loc, pv.getType(), query, key, value, kp, /*mask=*/Value(), bias,
      b.getF64FloatAttr(scale), causal ? b.getUnitAttr() : UnitAttr(),
      b.getF64FloatAttr(dropout ? dropout.getRate().convertToDouble() : 0.0),
      b.getI64IntegerAttr(dropout ? (int64_t)dropout.getSeed() : 0),
      b.getI64IntegerAttr(dropout ? (int64_t)dropout.getStream() : 0));
  if (failed(att.verify())) {
    reason = "internal: the fused op does not verify";
    return failure(); // the scratch block and what it holds go away
  }
  while (!scratch.empty())
    rewriter.moveOpBefore(&scratch.front(), pv);
  rewriter.replaceOp(pv, att.getResult());
  if (dropout)
    rewriter.eraseOp(dropout);
  rewriter.eraseOp(softmax);
  for (Operation *op : chain)
    rewriter.eraseOp(op);
  rewriter.eraseOp(qk);
  for (Operation *op : prescales)
    rewriter.eraseOp(op);
  return success();
}

/// softmax((Q·Kᵀ)·scale, masked)·V -> attention; the matcher's reason for a
/// site it does not take is the report's why-not.
struct FuseAttention : OpRewritePattern<SoftmaxOp> {
  static constexpr llvm::StringLiteral kFusion = "attention";

  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SoftmaxOp softmax, PatternRewriter &rewriter) const override {
    // Fresh per site: rewrites erase ops a previous analysis may know.
    SizeAnalysis dims;
    AttentionMatcher matcher(softmax, dims);
    if (auto why = matcher.match())
      return rewriter.notifyMatchFailure(softmax, *why);
    std::string reason;
    if (failed(matcher.rewrite(rewriter, reason)))
      return rewriter.notifyMatchFailure(softmax, reason);
    return success();
  }
};

struct FuseAttentionPass
    : FusionPass<mlir::transfuse::impl::TransfuseFuseAttentionBase<FuseAttentionPass>,
                 FuseAttention> {
  using FusionPass::FusionPass;
};

} // namespace

std::unique_ptr<Pass> mlir::transfuse::createFuseAttentionPass(FusionReport *report) {
  return std::make_unique<FuseAttentionPass>(report);
}
