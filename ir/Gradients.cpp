//===- Gradients.cpp - the gradient rule of every differentiable op ------===//
//
// GradientOpInterface (ir/TransfuseInterfaces.td) as external models, one
// rule per op: given the gradients of its results, the ops computing the
// gradients of its operands. Broadcast operands get their gradient summed
// back to their shape (unbroadcast). The autodiff pass
// (passes/Autodiff.cpp) walks a function backwards calling these; the
// gradient checks (tests/unit/compiler/autodiff_test.cpp) hold each rule
// against finite differences. Autodiff runs on
// the graph any fusion strategy made: linear, add_layer_norm and attention
// have rules (attention's, attention_grad, recomputes the probabilities);
// fused_elementwise has none yet (docs/training.md).
//
//===----------------------------------------------------------------------===//

#include "ir/Gradients.h"
#include "ir/TransfuseDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::transfuse;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// A rank-0 constant of `like`'s element type.
Value scalar(OpBuilder &b, Location loc, Value like, double value) {
  auto type = RankedTensorType::get({}, tensorType(like).getElementType());
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), value)));
}

} // namespace

Value mlir::transfuse::unbroadcast(OpBuilder &b, Location loc, Value grad, Type target) {
  auto g = tensorType(grad);
  auto t = cast<RankedTensorType>(target);
  int64_t extra = g.getRank() - t.getRank();
  Value r = grad;
  if (extra > 0) {
    SmallVector<int64_t> lead;
    for (int64_t i = 0; i < extra; ++i)
      lead.push_back(i);
    r = ReduceSumOp::create(b, loc, r, lead, false);
  }
  SmallVector<int64_t> ones;
  auto rt = tensorType(r);
  for (int64_t i = 0; i < t.getRank(); ++i)
    if (t.getDimSize(i) == 1 && rt.getDimSize(i) != 1)
      ones.push_back(i);
  if (!ones.empty())
    r = ReduceSumOp::create(b, loc, r, ones, true);
  return r;
}

namespace {

using Grads = SmallVectorImpl<Value>;

LogicalResult vjp(AddOp op, OpBuilder &b, ValueRange g, Grads &out) {
  out[0] = unbroadcast(b, op.getLoc(), g[0], op.getLhs().getType());
  out[1] = unbroadcast(b, op.getLoc(), g[0], op.getRhs().getType());
  return success();
}

LogicalResult vjp(SubOp op, OpBuilder &b, ValueRange g, Grads &out) {
  Location loc = op.getLoc();
  out[0] = unbroadcast(b, loc, g[0], op.getLhs().getType());
  out[1] = unbroadcast(b, loc, ScaleOp::create(b, loc, g[0], b.getF64FloatAttr(-1.0)),
                       op.getRhs().getType());
  return success();
}

LogicalResult vjp(MulOp op, OpBuilder &b, ValueRange g, Grads &out) {
  Location loc = op.getLoc();
  out[0] = unbroadcast(b, loc, MulOp::create(b, loc, g[0], op.getRhs()), op.getLhs().getType());
  out[1] = unbroadcast(b, loc, MulOp::create(b, loc, g[0], op.getLhs()), op.getRhs().getType());
  return success();
}

LogicalResult vjp(DivOp op, OpBuilder &b, ValueRange g, Grads &out) {
  // d(l/r)/dl = 1/r; d(l/r)/dr = -(l/r)/r.
  Location loc = op.getLoc();
  Value gr = DivOp::create(b, loc, g[0], op.getRhs());
  out[0] = unbroadcast(b, loc, gr, op.getLhs().getType());
  Value dr = ScaleOp::create(b, loc, MulOp::create(b, loc, gr, op.getResult()), b.getF64FloatAttr(-1.0));
  out[1] = unbroadcast(b, loc, dr, op.getRhs().getType());
  return success();
}

LogicalResult vjp(ScaleOp op, OpBuilder &b, ValueRange g, Grads &out) {
  out[0] = ScaleOp::create(b, op.getLoc(), g[0], op.getFactorAttr());
  return success();
}

/// What relu's derivative is read from, given y = relu(z): z > 0 exactly
/// where y > 0 (NaN and -0 included), so y serves, and nothing has to keep
/// z for the backward pass. When y's only use is a dropout, its output d
/// serves too: where an element is kept, d = y/(1 - rate) has y's sign;
/// where it is dropped, the gradient reaching y is 0 (finite upstream
/// gradients), and 0 times either derivative is the same 0. The dropout's
/// output is saved anyway (the next product's weight gradient reads it),
/// so the backward pass keeps no extra activation alive.
Value reluDerivativeSource(Value y) {
  if (y.hasOneUse())
    if (auto dropout = dyn_cast<DropoutOp>(*y.getUsers().begin()))
      return dropout.getResult();
  return y;
}

Value reluGrad(OpBuilder &b, Location loc, Value y, Value g) {
  return ActivationGradOp::create(b, loc, y.getType(), reluDerivativeSource(y), g,
                                  Activation::Relu);
}

LogicalResult vjp(ReluOp op, OpBuilder &b, ValueRange g, Grads &out) {
  out[0] = reluGrad(b, op.getLoc(), op.getResult(), g[0]);
  return success();
}

/// gelu and silu: g · f'(x) from the input.
template <class Op> LogicalResult activationVjp(Op op, OpBuilder &b, ValueRange g, Grads &out) {
  out[0] = ActivationGradOp::create(b, op.getLoc(), op.getType(), op.getInput(), g[0],
                                    *activationOf(op));
  return success();
}
LogicalResult vjp(GeluOp op, OpBuilder &b, ValueRange g, Grads &out) {
  return activationVjp(op, b, g, out);
}
LogicalResult vjp(SiluOp op, OpBuilder &b, ValueRange g, Grads &out) {
  return activationVjp(op, b, g, out);
}

LogicalResult vjp(ExpOp op, OpBuilder &b, ValueRange g, Grads &out) {
  out[0] = MulOp::create(b, op.getLoc(), g[0], op.getResult());
  return success();
}

LogicalResult vjp(TanhOp op, OpBuilder &b, ValueRange g, Grads &out) {
  // g·(1 - y²) = g - g·y·y.
  Location loc = op.getLoc();
  Value y = op.getResult();
  out[0] = SubOp::create(b, loc, g[0], MulOp::create(b, loc, MulOp::create(b, loc, g[0], y), y));
  return success();
}

LogicalResult vjp(SigmoidOp op, OpBuilder &b, ValueRange g, Grads &out) {
  // g·y·(1 - y) = g·y - g·y·y.
  Location loc = op.getLoc();
  Value y = op.getResult();
  Value gy = MulOp::create(b, loc, g[0], y);
  out[0] = SubOp::create(b, loc, gy, MulOp::create(b, loc, gy, y));
  return success();
}

LogicalResult vjp(SqrtOp op, OpBuilder &b, ValueRange g, Grads &out) {
  // g / (2·y).
  Location loc = op.getLoc();
  out[0] = DivOp::create(b, loc, g[0], ScaleOp::create(b, loc, op.getResult(), b.getF64FloatAttr(2.0)));
  return success();
}

LogicalResult vjp(ErfOp op, OpBuilder &b, ValueRange g, Grads &out) {
  // g · 2/√π · exp(-x²).
  Location loc = op.getLoc();
  Value x = op.getInput();
  Value e = ExpOp::create(b, loc, ScaleOp::create(b, loc, MulOp::create(b, loc, x, x), b.getF64FloatAttr(-1.0)));
  out[0] = MulOp::create(b, loc, g[0], ScaleOp::create(b, loc, e, b.getF64FloatAttr(1.1283791670955126)));
  return success();
}

LogicalResult vjp(PowOp op, OpBuilder &b, ValueRange g, Grads &out) {
  // d/da a^e = e·a^(e-1); the exponent must be a constant (d/de would need log).
  if (!op.getRhs().getDefiningOp<ConstantOp>())
    return op.emitOpError("is differentiated only with a constant exponent");
  Location loc = op.getLoc();
  Value e = op.getRhs();
  Value power = PowOp::create(b, loc, op.getLhs(), SubOp::create(b, loc, e, scalar(b, loc, e, 1.0)));
  out[0] = unbroadcast(b, loc, MulOp::create(b, loc, g[0], MulOp::create(b, loc, e, power)),
                       op.getLhs().getType());
  return success();
}

LogicalResult vjp(SelectOp op, OpBuilder &b, ValueRange g, Grads &out) {
  Location loc = op.getLoc();
  Value zero = scalar(b, loc, g[0], 0.0);
  Type type = g[0].getType();
  out[1] = unbroadcast(b, loc, SelectOp::create(b, loc, type, op.getCond(), g[0], zero),
                       op.getOnTrue().getType());
  out[2] = unbroadcast(b, loc, SelectOp::create(b, loc, type, op.getCond(), zero, g[0]),
                       op.getOnFalse().getType());
  return success();
}

LogicalResult vjp(SoftmaxOp op, OpBuilder &b, ValueRange g, Grads &out) {
  // y·(g - Σ_axis g·y); an all-masked row (y = 0) gets 0.
  Location loc = op.getLoc();
  Value y = op.getResult();
  Value gy = MulOp::create(b, loc, g[0], y);
  int64_t axis = normalizedAxis(op.getAxis(), tensorType(y).getRank());
  Value sum = ReduceSumOp::create(b, loc, gy, ArrayRef<int64_t>{axis}, true);
  out[0] = MulOp::create(b, loc, y, SubOp::create(b, loc, g[0], sum));
  return success();
}

LogicalResult vjp(PoolOp op, OpBuilder &b, ValueRange g, Grads &out) {
  out[0] = PoolGradOp::create(b, op.getLoc(), op.getInput().getType(), op.getInput(), op.getKeep(),
                              g[0], op.getModeAttr());
  return success();
}

LogicalResult vjp(UnfoldOp op, OpBuilder &b, ValueRange g, Grads &out) {
  out[0] = UnfoldGradOp::create(b, op.getLoc(), op.getInput().getType(), op.getInput(), g[0],
                                op.getPatchAttr());
  return success();
}

/// Expand in a forward graph (a learned token broadcast over the batch):
/// the gradient summed back to the input's shape; `like` gives only sizes.
LogicalResult vjp(ExpandOp op, OpBuilder &b, ValueRange g, Grads &out) {
  out[0] = unbroadcast(b, op.getLoc(), g[0], op.getInput().getType());
  return success();
}

LogicalResult vjp(L2NormalizeOp op, OpBuilder &b, ValueRange g, Grads &out) {
  out[0] = L2NormalizeGradOp::create(b, op.getLoc(), op.getType(), op.getInput(), g[0],
                                     op.getEpsilonAttr());
  return success();
}

LogicalResult vjp(RotaryOp op, OpBuilder &b, ValueRange g, Grads &out) {
  // A rotation's transpose is the rotation by -θ; inv_freq is a constant.
  out[0] = RotaryOp::create(b, op.getLoc(), op.getType(), g[0], op.getInvFreq(), op.getOffset(),
                            op.getHeadDimAttr(), op.getInverse() ? UnitAttr() : b.getUnitAttr());
  return success();
}

LogicalResult vjp(LayerNormOp op, OpBuilder &b, ValueRange g, Grads &out) {
  auto grads = LayerNormGradOp::create(
      b, op.getLoc(), TypeRange{op.getInput().getType(), op.getGamma().getType(), op.getGamma().getType()},
      op.getInput(), op.getGamma(), g[0], op.getAxisAttr(), op.getEpsilonAttr(), op.getRmsAttr());
  out[0] = grads.getInputGrad();
  out[1] = grads.getGammaGrad();
  if (op.getBeta())
    out[2] = grads.getBetaGrad();
  return success();
}

/// The gradients of C = op(A)·op(B) from g = dC: d op(A) = g·op(B)ᵀ,
/// d op(B) = op(A)ᵀ·g, transposed back where A or B is stored transposed;
/// batch dimensions an operand broadcast over are summed. A rank-2 B under
/// batched rows of A (a weight: x·W) gets weight_grad, one product over
/// all rows, instead of a product per batch and their sum.
std::pair<Value, Value> matmulGrads(OpBuilder &b, Location loc, Value a, Value bm, bool ta, bool tb,
                                    Value g) {
  Value da = ta ? MatmulOp::create(b, loc, bm, g, tb, true).getResult()
                : MatmulOp::create(b, loc, g, bm, false, !tb).getResult();
  if (tensorType(bm).getRank() == 2 && tensorType(a).getRank() > 2 && !ta) {
    Value db = tb ? WeightGradOp::create(b, loc, bm.getType(), g, a).getResult()
                  : WeightGradOp::create(b, loc, bm.getType(), a, g).getResult();
    return {unbroadcast(b, loc, da, a.getType()), db};
  }
  Value db = tb ? MatmulOp::create(b, loc, g, a, true, ta).getResult()
                : MatmulOp::create(b, loc, a, g, !ta, false).getResult();
  return {unbroadcast(b, loc, da, a.getType()), unbroadcast(b, loc, db, bm.getType())};
}

LogicalResult vjp(MatmulOp op, OpBuilder &b, ValueRange g, Grads &out) {
  std::tie(out[0], out[1]) = matmulGrads(b, op.getLoc(), op.getLhs(), op.getRhs(),
                                         op.getTransposeLhs(), op.getTransposeRhs(), g[0]);
  return success();
}

LogicalResult vjp(LinearOp op, OpBuilder &b, ValueRange g, Grads &out) {
  // result = act(z) + residual, z = x·op(W) + bias. relu's derivative is
  // read from the result when there is no residual (reluDerivativeSource);
  // otherwise z is recomputed for the activation's derivative (and for a
  // gated product's halves). A rotary product's gradient at z is the
  // inverse rotation of its rotated columns.
  Location loc = op.getLoc();
  Value x = op.getInput(), w = op.getWeight(), gz = g[0];
  const bool tw = op.getTransposeWeight();
  const int64_t axis = tensorType(op.getResult()).getRank() - 1;
  if (op.getGated()) {
    Value z = MatmulOp::create(b, loc, x, w, false, tw);
    if (Value bias = op.getBias())
      z = AddOp::create(b, loc, z, bias);
    const int64_t n = tensorType(op.getResult()).getShape().back();
    auto halves = SplitOp::create(b, loc, z, axis, ArrayRef<int64_t>{n, n});
    Value gate = halves.getResult(0), up = halves.getResult(1);
    // d gate = g·up·act'(gate), d up = g·act(gate).
    Value dGate = MulOp::create(b, loc, g[0], up);
    if (op.getActivation() != Activation::None)
      dGate = ActivationGradOp::create(b, loc, gate.getType(), gate, dGate, op.getActivation());
    Value dUp = MulOp::create(b, loc, g[0], createActivation(b, loc, gate, op.getActivation()));
    gz = ConcatOp::create(b, loc, ValueRange{dGate, dUp}, axis);
  } else if (Value freq = op.getInvFreq()) {
    const int64_t n = tensorType(op.getResult()).getShape().back(), c = op.getRotaryColumns();
    auto inverse = [&](Value v) -> Value {
      return RotaryOp::create(b, loc, v.getType(), v, freq, op.getOffset(), op.getHeadDimAttr(),
                              b.getUnitAttr());
    };
    if (c == n) {
      gz = inverse(g[0]);
    } else {
      auto parts = SplitOp::create(b, loc, g[0], axis, ArrayRef<int64_t>{c, n - c});
      gz = ConcatOp::create(b, loc, ValueRange{inverse(parts.getResult(0)), parts.getResult(1)},
                            axis);
    }
  } else if (op.getActivation() == Activation::Relu && !op.getResidual()) {
    gz = reluGrad(b, loc, op.getResult(), g[0]);
  } else if (op.getActivation() != Activation::None) {
    Value z = MatmulOp::create(b, loc, x, w, false, tw);
    if (Value bias = op.getBias())
      z = AddOp::create(b, loc, z, bias);
    gz = ActivationGradOp::create(b, loc, z.getType(), z, g[0], op.getActivation());
  }
  auto [dx, dw] = matmulGrads(b, loc, x, w, false, tw, gz);
  out[0] = dx;
  out[1] = dw;
  unsigned next = 2;
  if (Value bias = op.getBias())
    out[next++] = unbroadcast(b, loc, gz, bias.getType());
  if (Value residual = op.getResidual())
    out[next++] = unbroadcast(b, loc, g[0], residual.getType());
  return success();
}

LogicalResult vjp(AddLayerNormOp op, OpBuilder &b, ValueRange g, Grads &out) {
  // sum = input + residual, result = layer_norm(sum): d sum = the norm's
  // input gradient plus the sum's own.
  Location loc = op.getLoc();
  Value sum = op.getSum(), dsum = g[1];
  if (g[0]) {
    int64_t axis = tensorType(sum).getRank() - 1;
    auto grads = LayerNormGradOp::create(
        b, loc, TypeRange{sum.getType(), op.getGamma().getType(), op.getGamma().getType()}, sum,
        op.getGamma(), g[0], b.getI64IntegerAttr(axis), op.getEpsilonAttr(), op.getRmsAttr());
    dsum = dsum ? AddOp::create(b, loc, grads.getInputGrad(), dsum).getResult() : grads.getInputGrad();
    out[2] = grads.getGammaGrad();
    if (op.getBeta())
      out[3] = grads.getBetaGrad();
  }
  out[0] = unbroadcast(b, loc, dsum, op.getInput().getType());
  out[1] = unbroadcast(b, loc, dsum, op.getResidual().getType());
  return success();
}

LogicalResult vjp(AttentionOp op, OpBuilder &b, ValueRange g, Grads &out) {
  if (op.getBias())
    return op.emitOpError("with an additive bias has no gradient rule yet");
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
  auto grads = AttentionGradOp::create(
      b, op.getLoc(), TypeRange{q.getType(), k.getType(), v.getType()}, q, k, v, g[0],
      op.getKeyPadding(), op.getMask(), op.getScaleAttr(), op.getCausalAttr(),
      op.getDropoutRateAttr(), op.getDropoutSeedAttr(), op.getDropoutStreamAttr());
  out[0] = grads.getQueryGrad();
  out[1] = grads.getKeyGrad();
  out[2] = grads.getValueGrad();
  return success();
}

LogicalResult vjp(GatherOp op, OpBuilder &b, ValueRange g, Grads &out) {
  out[0] = EmbeddingGradOp::create(b, op.getLoc(), op.getTable().getType(), op.getIds(), g[0]);
  return success();
}

LogicalResult vjp(DropoutOp op, OpBuilder &b, ValueRange g, Grads &out) {
  // The same mask, regenerated from (seed, step, stream, index).
  out[0] = DropoutOp::create(b, op.getLoc(), g[0].getType(), g[0], op.getStep(), op.getRateAttr(),
                             op.getSeedAttr(), op.getStreamAttr());
  return success();
}

LogicalResult vjp(ReshapeOp op, OpBuilder &b, ValueRange g, Grads &out) {
  out[0] = ReshapeOp::create(b, op.getLoc(), op.getInput().getType(), g[0]);
  return success();
}

LogicalResult vjp(TransposeOp op, OpBuilder &b, ValueRange g, Grads &out) {
  ArrayRef<int64_t> perm = op.getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = static_cast<int64_t>(i);
  out[0] = TransposeOp::create(b, op.getLoc(), g[0], inverse);
  return success();
}

/// g of a reduction over `axes` of x with its reduced dimensions kept as 1.
Value keptGrad(OpBuilder &b, Location loc, Value g, Value x, ArrayRef<int64_t> axes, bool keep) {
  if (keep)
    return g;
  auto xt = tensorType(x);
  SmallVector<int64_t> shape(xt.getShape());
  for (int64_t a : axes)
    shape[normalizedAxis(a, xt.getRank())] = 1;
  return ReshapeOp::create(b, loc, RankedTensorType::get(shape, xt.getElementType()), g);
}

LogicalResult vjp(ReduceSumOp op, OpBuilder &b, ValueRange g, Grads &out) {
  // g broadcast back over the reduced axes.
  Location loc = op.getLoc();
  Value x = op.getInput();
  Value kept = keptGrad(b, loc, g[0], x, op.getAxes(), op.getKeepDims());
  out[0] = ExpandOp::create(b, loc, x.getType(), kept, x);
  return success();
}

LogicalResult vjp(ReduceMeanOp op, OpBuilder &b, ValueRange g, Grads &out) {
  // g / N broadcast back; N (the elements per mean, dynamic or not) is the
  // sum of ones over the reduced axes.
  Location loc = op.getLoc();
  Value x = op.getInput();
  Value kept = keptGrad(b, loc, g[0], x, op.getAxes(), op.getKeepDims());
  Value ones = ExpandOp::create(b, loc, x.getType(), scalar(b, loc, x, 1.0), x);
  Value count = ReduceSumOp::create(b, loc, ones, op.getAxes(), true);
  out[0] = ExpandOp::create(b, loc, x.getType(), DivOp::create(b, loc, kept, count), x);
  return success();
}

LogicalResult vjp(SliceOp op, OpBuilder &b, ValueRange g, Grads &out) {
  out[0] = SliceGradOp::create(b, op.getLoc(), op.getInput().getType(), g[0], op.getInput(),
                               op.getOffset(), op.getAxisAttr(), op.getStartAttr());
  return success();
}

LogicalResult vjp(ConcatOp op, OpBuilder &b, ValueRange g, Grads &out) {
  Location loc = op.getLoc();
  int64_t axis = normalizedAxis(op.getAxis(), tensorType(op.getResult()).getRank());
  int64_t start = 0;
  for (auto [i, in] : llvm::enumerate(op.getInputs())) {
    int64_t size = tensorType(in).getDimSize(axis);
    if (ShapedType::isDynamic(size))
      return op.emitOpError("has no gradient rule along a dynamic axis");
    out[i] = SliceOp::create(b, loc, in.getType(), g[0], Value(), Value(), b.getI64IntegerAttr(axis),
                             b.getI64IntegerAttr(start), b.getI64IntegerAttr(size));
    start += size;
  }
  return success();
}

LogicalResult vjp(SplitOp op, OpBuilder &b, ValueRange g, Grads &out) {
  // The pieces' gradients concatenated; a piece without one is zeros.
  Location loc = op.getLoc();
  SmallVector<Value> pieces;
  for (auto [r, gr] : llvm::zip(op.getResults(), g)) {
    if (gr) {
      pieces.push_back(gr);
      continue;
    }
    auto t = tensorType(r);
    if (!t.hasStaticShape())
      return op.emitOpError("has no gradient rule for a dynamic piece without a gradient");
    pieces.push_back(ConstantOp::create(
        b, loc, DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), 0.0))));
  }
  out[0] = ConcatOp::create(b, loc, pieces, op.getAxis());
  return success();
}

LogicalResult vjp(CrossEntropyOp op, OpBuilder &b, ValueRange g, Grads &out) {
  out[0] = CrossEntropyGradOp::create(b, op.getLoc(), op.getLogits().getType(), op.getLogits(),
                                      op.getLabels(), g[0], op.getLabelSmoothingAttr(),
                                      op.getIgnoreIndexAttr());
  return success();
}

template <typename OpT>
struct Rule : public GradientOpInterface::ExternalModel<Rule<OpT>, OpT> {
  LogicalResult buildVJP(Operation *op, OpBuilder &builder, ValueRange resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    operandGrads.assign(op->getNumOperands(), Value());
    return vjp(cast<OpT>(op), builder, resultGrads, operandGrads);
  }
};

template <typename... Ops> void attach(MLIRContext *ctx) {
  (Ops::template attachInterface<Rule<Ops>>(*ctx), ...);
}

} // namespace

void mlir::transfuse::attachGradientRules(MLIRContext *ctx) {
  attach<AddOp, SubOp, MulOp, DivOp, PowOp, ScaleOp, ReluOp, GeluOp, SiluOp, ExpOp, TanhOp,
         SigmoidOp, SqrtOp, ErfOp, SelectOp, SoftmaxOp,
         LayerNormOp, RotaryOp, MatmulOp, GatherOp, DropoutOp, ReshapeOp, TransposeOp, ReduceSumOp, ReduceMeanOp, SliceOp, ConcatOp,
         SplitOp, CrossEntropyOp, LinearOp, AddLayerNormOp, AttentionOp, PoolOp, L2NormalizeOp,
         UnfoldOp, ExpandOp>(ctx);
}
