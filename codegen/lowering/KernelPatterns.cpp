//===- KernelPatterns.cpp - one conversion pattern per transfuse op -------===//
//
// Each pattern writes its op's kernel op into a destination: the caller's
// output when the value is returned, else a new tfk.alloc (Entry). Sizes
// come from the Entry, derived before the conversion started.
//
//===----------------------------------------------------------------------===//

#include "codegen/lowering/EntryState.h"
#include "codegen/lowering/OpMath.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::lowering;

namespace {

template <class Op> struct Lowering : OpConversionPattern<Op> {
  Lowering(const TypeConverter &converter, MLIRContext *ctx, Entry &entry)
      : OpConversionPattern<Op>(converter, ctx), entry(entry) {}
  Entry &entry;
  Value dest(ConversionPatternRewriter &rw, Op op, unsigned i = 0) const {
    return entry.destination(rw, op.getLoc(), op->getResult(i));
  }
  /// How errors name a token operand: "input 'NAME'" for an entry's input.
  std::string tokenName(Value v) const {
    if (auto cast = v.getDefiningOp<UnrealizedConversionCastOp>())
      if (auto in = cast.getInputs()[0].getDefiningOp<tfk::InputOp>())
        return "input '" + entry.inputNames.lookup(in.getIndex()) + "'";
    return "an operand";
  }
};

#define LOWERING(OP)                                                                     \
  struct OP##Lowering : Lowering<OP> {                                                   \
    using Lowering::Lowering;                                                            \
    LogicalResult matchAndRewrite(OP op, OpAdaptor a,                                    \
                                  ConversionPatternRewriter &rw) const override;         \
  };                                                                                     \
  LogicalResult OP##Lowering::matchAndRewrite(OP op, OpAdaptor a,                        \
                                              ConversionPatternRewriter &rw) const

LOWERING(UnrealizedConversionCastOp) { // an argument's tensor view of its tfk.input
  rw.replaceOp(op, a.getInputs());
  return success();
}

LOWERING(ParamOp) {
  rw.replaceOpWithNewOp<tfk::ParamOp>(op, memrefOf(op.getType()), op.getName(), op.getPrepared());
  return success();
}

LOWERING(ConstantOp) {
  rw.replaceOpWithNewOp<tfk::ConstantOp>(op, memrefOf(op.getType()), op.getValue());
  return success();
}

LOWERING(DimOp) {
  rw.replaceOp(op, entry.size(entry.analysis.index(op)));
  return success();
}

LOWERING(ReshapeOp) {
  rw.replaceOpWithNewOp<tfk::ReshapeOp>(op, memrefOf(op.getType()), a.getInput(),
                                        entry.sizes(op.getResult()));
  return success();
}

LOWERING(GatherOp) {
  Value out = dest(rw, op);
  tfk::GatherOp::create(rw, op.getLoc(), ValueRange{a.getTable(), a.getIds()}, ValueRange{out},
                        rw.getStringAttr(tokenName(op.getIds())));
  rw.replaceOp(op, out);
  return success();
}

LOWERING(CrossEntropyOp) {
  // The mean loss (a scalar) from the logits' rows; the labels as given.
  Value out = dest(rw, op);
  tfk::CrossEntropyOp::create(rw, op.getLoc(), ValueRange{a.getLogits(), a.getLabels()},
                              ValueRange{out}, rw.getStringAttr(tokenName(op.getLabels())),
                              op.getLabelSmoothingAttr(), op.getIgnoreIndexAttr());
  rw.replaceOp(op, out);
  return success();
}

// The backward ops: each one call op of its name (runtime/exec/Ops.h).
LOWERING(CrossEntropyGradOp) {
  Value out = dest(rw, op);
  tfk::CrossEntropyGradOp::create(
      rw, op.getLoc(), ValueRange{a.getLogits(), a.getLabels(), a.getGrad()}, ValueRange{out},
      rw.getStringAttr(tokenName(op.getLabels())), op.getLabelSmoothingAttr(),
      op.getIgnoreIndexAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(EmbeddingGradOp) {
  Value out = dest(rw, op);
  tfk::EmbeddingGradOp::create(rw, op.getLoc(), ValueRange{a.getIds(), a.getGrad()},
                               ValueRange{out}, rw.getStringAttr(tokenName(op.getIds())));
  rw.replaceOp(op, out);
  return success();
}

LOWERING(ActivationGradOp) {
  if (op.getInput().getType() != op.getGrad().getType())
    return rw.notifyMatchFailure(op, "operands of different shapes");
  Value out = dest(rw, op);
  tfk::ActivationGradOp::create(rw, op.getLoc(), ValueRange{a.getInput(), a.getGrad()},
                                ValueRange{out}, op.getActivationAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(LayerNormGradOp) {
  Value dx = dest(rw, op, 0), dg = dest(rw, op, 1), db = dest(rw, op, 2);
  int64_t axis = normalizedAxis(op.getAxis(), op.getInput().getType().getRank());
  tfk::LayerNormGradOp::create(rw, op.getLoc(), ValueRange{a.getInput(), a.getGamma(), a.getGrad()},
                               ValueRange{dx, dg, db}, rw.getI64IntegerAttr(axis),
                               op.getEpsilonAttr(), op.getRmsAttr());
  rw.replaceOp(op, {dx, dg, db});
  return success();
}

LOWERING(AttentionGradOp) {
  Value dq = dest(rw, op, 0), dk = dest(rw, op, 1), dv = dest(rw, op, 2);
  SmallVector<Value> ins{a.getQuery(), a.getKey(), a.getValue(), a.getGrad()};
  if (a.getKeyPadding())
    ins.push_back(a.getKeyPadding());
  tfk::AttentionGradOp::create(rw, op.getLoc(), ins, ValueRange{dq, dk, dv}, op.getScaleAttr(),
                               op.getCausalAttr(), op.getDropoutRateAttr(),
                               op.getDropoutSeedAttr(), op.getDropoutStreamAttr());
  rw.replaceOp(op, {dq, dk, dv});
  return success();
}

LOWERING(DropoutOp) {
  Value out = dest(rw, op);
  SmallVector<Value> ins{a.getInput()};
  if (a.getStep())
    ins.push_back(a.getStep());
  tfk::DropoutOp::create(rw, op.getLoc(), ins, ValueRange{out}, op.getRateAttr(),
                         op.getSeedAttr(), op.getStreamAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(ExpandOp) {
  Value out = dest(rw, op);
  tfk::ExpandOp::create(rw, op.getLoc(), ValueRange{a.getInput()}, ValueRange{out});
  rw.replaceOp(op, out);
  return success();
}

LOWERING(WeightGradOp) {
  Value out = dest(rw, op);
  tfk::WeightGradOp::create(rw, op.getLoc(), ValueRange{a.getInput(), a.getGrad()},
                            ValueRange{out});
  rw.replaceOp(op, out);
  return success();
}

LOWERING(SliceGradOp) {
  Value out = dest(rw, op);
  SmallVector<Value> ins{a.getGrad()};
  if (a.getOffset())
    ins.push_back(a.getOffset());
  int64_t axis = normalizedAxis(op.getAxis(), op.getLike().getType().getRank());
  tfk::SliceGradOp::create(rw, op.getLoc(), ins, ValueRange{out}, rw.getI64IntegerAttr(axis),
                           op.getStartAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(MatmulOp) {
  Value out = dest(rw, op);
  if (isGemmByWeight(op))
    tfk::GemmOp::create(rw, op.getLoc(), a.getLhs(), a.getRhs(), Value(), Value(), Value(),
                        Value(), Value(), out, op.getTransposeRhs(), /*packed=*/true,
                        Activation::None, Activation::None, llvm::APFloat(1.0), false, 0, 0);
  else
    tfk::MatmulOp::create(rw, op.getLoc(), a.getLhs(), a.getRhs(), out, op.getTransposeLhs(),
                          op.getTransposeRhs());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(LinearOp) {
  Value out = dest(rw, op);
  bool packed = (bool)weightParam(op.getWeight());
  tfk::GemmOp::create(rw, op.getLoc(), a.getInput(), a.getWeight(), a.getBias(), a.getResidual(),
                      Value(), a.getInvFreq(), a.getOffset(), out, op.getTransposeWeight(), packed,
                      op.getActivation(), Activation::None, llvm::APFloat(1.0), op.getGated(),
                      op.getRotaryColumns(), op.getHeadDim());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(LinearInputGradOp) {
  Value out = dest(rw, op);
  bool packed = (bool)weightParam(op.getWeight());
  tfk::GemmOp::create(rw, op.getLoc(), a.getGrad(), a.getWeight(), Value(), Value(), a.getPre(),
                      Value(), Value(), out, op.getTransposeWeight(), packed, Activation::None,
                      op.getActivation(), op.getScale(), false, 0, 0);
  rw.replaceOp(op, out);
  return success();
}

/// Every op with a formula of the table (add, sub, mul, div, relu, exp,
/// tanh, gelu: codegen/lowering/OpMath.h): tfk.binary or tfk.unary with the
/// table's kind, so a new elementwise op needs nothing here.
struct MathLowering : ConversionPattern {
  MathLowering(const TypeConverter &converter, MLIRContext *ctx, Entry &entry)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/1, ctx), entry(entry) {}
  Entry &entry;
  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                                ConversionPatternRewriter &rw) const override {
    std::optional<math::Kind> kind = mathKindOf(op);
    if (!kind || op->getParentOfType<tfk::ElementwiseOp>())
      return failure();
    Value out = entry.destination(rw, op->getLoc(), op->getResult(0));
    StringRef name = math::info(*kind).enumerator;
    if (math::info(*kind).arity == 2)
      tfk::BinaryOp::create(rw, op->getLoc(), operands, ValueRange{out}, name);
    else
      tfk::UnaryOp::create(rw, op->getLoc(), operands, ValueRange{out}, name);
    rw.replaceOp(op, out);
    return success();
  }
};

LOWERING(ScaleOp) {
  Value out = dest(rw, op);
  tfk::ScaleOp::create(rw, op.getLoc(), ValueRange{a.getInput()}, ValueRange{out},
                       op.getFactorAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(PoolOp) {
  Value out = dest(rw, op);
  tfk::PoolOp::create(rw, op.getLoc(), ValueRange{a.getInput(), a.getKeep()}, ValueRange{out},
                      op.getModeAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(PoolGradOp) {
  Value out = dest(rw, op);
  tfk::PoolGradOp::create(rw, op.getLoc(), ValueRange{a.getInput(), a.getKeep(), a.getGrad()},
                          ValueRange{out}, op.getModeAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(UnfoldOp) {
  Value out = dest(rw, op);
  tfk::UnfoldOp::create(rw, op.getLoc(), ValueRange{a.getInput()}, ValueRange{out},
                        op.getPatchAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(UnfoldGradOp) {
  Value out = dest(rw, op);
  tfk::UnfoldGradOp::create(rw, op.getLoc(), ValueRange{a.getGrad()}, ValueRange{out},
                            op.getPatchAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(L2NormalizeOp) {
  Value out = dest(rw, op);
  tfk::L2NormalizeOp::create(rw, op.getLoc(), ValueRange{a.getInput()}, ValueRange{out},
                             op.getEpsilonAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(L2NormalizeGradOp) {
  Value out = dest(rw, op);
  tfk::L2NormalizeGradOp::create(rw, op.getLoc(), ValueRange{a.getInput(), a.getGrad()},
                                 ValueRange{out}, op.getEpsilonAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(SelectOp) {
  Value out = dest(rw, op);
  tfk::SelectOp::create(rw, op.getLoc(), a.getOperands(), ValueRange{out});
  rw.replaceOp(op, out);
  return success();
}

LOWERING(CastOp) {
  // A region of one op: the printers' scalar loops read the integer input
  // as it is (fused_elementwise regions hold casts the same way).
  Value out = dest(rw, op);
  auto e = tfk::ElementwiseOp::create(rw, op.getLoc(), ValueRange{a.getInput()}, out,
                                      rw.getStrArrayAttr({"full"}), /*vector=*/false);
  OpBuilder::InsertionGuard guard(rw);
  Block *body = rw.createBlock(&e.getBody());
  Value x = body->addArgument(op.getInput().getType(), op.getLoc());
  Value y = CastOp::create(rw, op.getLoc(), op.getType(), x);
  tfk::YieldOp::create(rw, op.getLoc(), y);
  rw.replaceOp(op, out);
  return success();
}

LOWERING(SoftmaxOp) {
  Value out = dest(rw, op);
  int64_t axis = normalizedAxis(op.getAxis(), op.getInput().getType().getRank());
  tfk::SoftmaxOp::create(rw, op.getLoc(), ValueRange{a.getInput()}, ValueRange{out},
                         rw.getI64IntegerAttr(axis));
  rw.replaceOp(op, out);
  return success();
}

LOWERING(LayerNormOp) {
  Value out = dest(rw, op);
  int64_t axis = normalizedAxis(op.getAxis(), op.getInput().getType().getRank());
  tfk::LayerNormOp::create(rw, op.getLoc(), a.getInput(), a.getGamma(), a.getBeta(), out, axis,
                           op.getEpsilon(), op.getRms());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(AddLayerNormOp) {
  // The operand with the output's sizes first; the other may be a block.
  Value x = a.getInput(), r = a.getResidual();
  if (op.getInput().getType() != op.getResult().getType())
    std::swap(x, r);
  Value out = dest(rw, op, 0);
  Value sum = op.getSum().use_empty() ? Value() : dest(rw, op, 1);
  tfk::AddLayerNormOp::create(rw, op.getLoc(), x, r, a.getGamma(), a.getBeta(), out, sum,
                              op.getEpsilon(), op.getRms());
  rw.replaceOp(op, ValueRange{out, sum});
  return success();
}

LOWERING(AttentionOp) {
  Value out = dest(rw, op);
  if (Value bias = op.getBias()) {
    int64_t last = cast<RankedTensorType>(bias.getType()).getRank() - 1;
    tfk::CheckOp::create(rw, op.getLoc(), "eq", entry.dim(bias, last), entry.dim(op.getKey(), 2),
                         "an attention bias whose last dimension is not the key length");
  }
  tfk::AttentionOp::create(rw, op.getLoc(), a.getQuery(), a.getKey(), a.getValue(),
                           a.getKeyPadding(), a.getBias(), out, op.getScaleAttr(),
                           op.getCausalAttr(), op.getDropoutRateAttr(), op.getDropoutSeedAttr(),
                           op.getDropoutStreamAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(FusedElementwiseOp) {
  // How each input is read; Highway code when every input is an f32 full
  // tensor, trailing block or single value and no select needs masks.
  Block &body = op.getBody().front();
  bool vector = llvm::none_of(body.without_terminator(), [](Operation &o) { return isa<SelectOp>(o); });
  SmallVector<StringRef> kinds;
  for (Value input : op.getInputs()) {
    auto t = cast<RankedTensorType>(input.getType());
    StringRef k = t.hasStaticShape() && t.getNumElements() == 1 ? "splat"
                  : entry.sameSizes(input, op.getResult())      ? "full"
                  : entry.trailing(input, op.getResult())        ? "trailing"
                                                                 : "strided";
    vector &= t.getElementType().isF32() && k != "strided";
    kinds.push_back(k);
  }
  Value out = dest(rw, op);
  auto e = tfk::ElementwiseOp::create(rw, op.getLoc(), a.getInputs(), out,
                                      rw.getStrArrayAttr(kinds), vector);
  rw.inlineRegionBefore(op.getBody(), e.getBody(), e.getBody().end());
  auto yield = cast<YieldOp>(e.getBody().front().getTerminator());
  rw.setInsertionPoint(yield);
  rw.replaceOpWithNewOp<tfk::YieldOp>(yield, yield.getValue());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(TransposeOp) {
  Value out = dest(rw, op);
  tfk::TransposeOp::create(rw, op.getLoc(), ValueRange{a.getInput()}, ValueRange{out},
                           op.getPermutationAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(ConcatOp) {
  Value out = dest(rw, op);
  int64_t axis = normalizedAxis(op.getAxis(), op.getType().getRank());
  tfk::ConcatOp::create(rw, op.getLoc(), a.getInputs(), ValueRange{out},
                        rw.getI64IntegerAttr(axis));
  rw.replaceOp(op, out);
  return success();
}

LOWERING(SplitOp) {
  // One slice per used result.
  int64_t axis = normalizedAxis(op.getAxis(), op.getInput().getType().getRank()), start = 0;
  SmallVector<Value> results;
  for (auto [i, r] : llvm::enumerate(op.getResults())) {
    int64_t size = op.getSizes()[i];
    Value out;
    if (!r.use_empty()) {
      out = dest(rw, op, i);
      tfk::SliceOp::create(rw, op.getLoc(), ValueRange{a.getInput()}, ValueRange{out},
                           rw.getI64IntegerAttr(axis), rw.getI64IntegerAttr(start));
    }
    results.push_back(out);
    start += size;
  }
  rw.replaceOp(op, results);
  return success();
}

LOWERING(SliceOp) {
  int64_t axis = normalizedAxis(op.getAxis(), op.getInput().getType().getRank());
  if (op.getLength() || op.getOffset()) {
    // With an offset the slice is a decode step's positions of a table
    // (learned positions): its rows are the positions a model has.
    int64_t rows = op.getInput().getType().getDimSize(axis);
    std::string why = op.getOffset() && !ShapedType::isDynamic(rows)
                          ? "more positions than the position table's " + std::to_string(rows) +
                                " rows (max_seq_len " + std::to_string(rows) + ")"
                          : std::string("a slice past the end of its axis (a length over the table?)");
    tfk::CheckOp::create(rw, op.getLoc(), "le", entry.size(sliceEnd(entry.analysis, op)),
                         entry.dim(op.getInput(), axis), why);
    if (op.getStart() < 0)
      tfk::CheckOp::create(rw, op.getLoc(), "le", entry.size(SizeExpr::constant(-op.getStart())),
                           a.getOffset(), "a slice before the start of its axis");
  }
  Value out = dest(rw, op);
  SmallVector<Value> ins{a.getInput()};
  if (a.getOffset())
    ins.push_back(a.getOffset());
  tfk::SliceOp::create(rw, op.getLoc(), ins, ValueRange{out}, rw.getI64IntegerAttr(axis),
                       rw.getI64IntegerAttr(op.getStart()));
  rw.replaceOp(op, out);
  return success();
}

template <class Op> struct ReduceLowering : Lowering<Op> {
  using Lowering<Op>::Lowering;
  LogicalResult matchAndRewrite(Op op, typename Op::Adaptor a,
                                ConversionPatternRewriter &rw) const override {
    int64_t rank = op.getInput().getType().getRank(), mask = 0;
    for (int64_t axis : op.getAxes())
      mask |= int64_t{1} << normalizedAxis(axis, rank);
    StringRef kind = isa<ReduceSumOp>(op) ? "kSum" : isa<ReduceMeanOp>(op) ? "kMean" : "kMax";
    Value out = this->dest(rw, op);
    tfk::ReduceOp::create(rw, op.getLoc(), ValueRange{a.getInput()}, ValueRange{out},
                          rw.getStringAttr(kind), rw.getI64IntegerAttr(mask));
    rw.replaceOp(op, out);
    return success();
  }
};

LOWERING(KeyPaddingMaskOp) {
  Value out = dest(rw, op);
  tfk::KeyPaddingMaskOp::create(rw, op.getLoc(), ValueRange{a.getTokens()}, ValueRange{out},
                                op.getPadIdAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(CausalMaskOp) {
  Value out = dest(rw, op);
  tfk::CausalMaskOp::create(rw, op.getLoc(), ValueRange{a.getQueryLen(), a.getKeyLen()},
                            ValueRange{out});
  rw.replaceOp(op, out);
  return success();
}

LOWERING(RotaryOp) {
  Value out = dest(rw, op);
  SmallVector<Value> ins{a.getInput(), a.getInvFreq()};
  if (a.getOffset())
    ins.push_back(a.getOffset());
  tfk::RotaryOp::create(rw, op.getLoc(), ins, ValueRange{out}, op.getHeadDimAttr(),
                        op.getInverseAttr());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(PositionalEncodingOp) {
  Value out = dest(rw, op);
  SmallVector<Value> ins{a.getLength()};
  if (a.getOffset())
    ins.push_back(a.getOffset());
  tfk::PositionalEncodingOp::create(rw, op.getLoc(), ins, ValueRange{out}, op.getHalves());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(StateLengthOp) {
  rw.replaceOp(op, entry.size(SizeExpr::stateLength()));
  return success();
}

/// The tfk.state of `name`, and a check, before the call starts, that
/// positions [0, end) fit its capacity.
static Value stateFor(ConversionPatternRewriter &rw, Location loc, Entry &entry, StringRef name,
                      const SizeExpr &end) {
  auto &[state, decl] = entry.states.at(name.str());
  int64_t capacity = decl.capacity.getDimSize(2);
  tfk::CheckOp::create(rw, loc, "le", entry.size(end), entry.size(SizeExpr::constant(capacity)),
                       "more positions than decoding state '" + name.str() + "' holds (max_seq_len " +
                           std::to_string(capacity) + ")");
  return state;
}

LOWERING(CacheAppendOp) {
  // Written at positions L..L+n; the L + n positions read back densely
  // (decode attention reads the state in place instead: kernel views).
  SizeExpr end = entry.analysis.dim(op.getResult(), 2);
  Value state = stateFor(rw, op.getLoc(), entry, op.getName(), end);
  tfk::StateWriteOp::create(rw, op.getLoc(), a.getInput(), state,
                            entry.size(SizeExpr::stateLength()), op.getKeys());
  Value out = dest(rw, op);
  tfk::StateReadOp::create(rw, op.getLoc(), state, out, op.getKeys());
  rw.replaceOp(op, out);
  return success();
}

LOWERING(StateWriteOp) {
  Value state = stateFor(rw, op.getLoc(), entry, op.getName(), entry.analysis.dim(op.getInput(), 2));
  tfk::StateWriteOp::create(rw, op.getLoc(), a.getInput(), state, entry.size(SizeExpr::constant(0)),
                            op.getKeys());
  rw.eraseOp(op);
  return success();
}

LOWERING(StateReadOp) {
  Value state = stateFor(rw, op.getLoc(), entry, op.getName(), entry.analysis.dim(op.getResult(), 2));
  Value out = dest(rw, op);
  tfk::StateReadOp::create(rw, op.getLoc(), state, out, op.getKeys());
  rw.replaceOp(op, out);
  return success();
}

using ReturnOp = func::ReturnOp;
LOWERING(ReturnOp) {
  // Values not written in place (an input, a parameter, a value returned
  // twice) are copied into their output.
  for (auto [i, v] : llvm::enumerate(op.getOperands())) {
    auto it = entry.output.find(rootThroughReshapes(v));
    if (it != entry.output.end() && it->second.first == i)
      continue;
    Value out = tfk::OutputOp::create(rw, op.getLoc(), memrefOf(v.getType()), i, entry.sizes(v));
    tfk::CopyOp::create(rw, op.getLoc(), ValueRange{a.getOperands()[i]}, ValueRange{out});
  }
  if (entry.advance)
    tfk::AdvanceOp::create(rw, op.getLoc(), entry.advance);
  rw.replaceOpWithNewOp<func::ReturnOp>(op);
  return success();
}

#undef LOWERING

} // namespace

void mlir::transfuse::lowering::populateKernelPatterns(RewritePatternSet &patterns,
                                                       const TypeConverter &types, Entry &entry) {
  patterns.add<UnrealizedConversionCastOpLowering, ParamOpLowering, ConstantOpLowering,
               DimOpLowering, ReshapeOpLowering, GatherOpLowering, CrossEntropyOpLowering,
               CrossEntropyGradOpLowering, EmbeddingGradOpLowering, ActivationGradOpLowering,
               LayerNormGradOpLowering, AttentionGradOpLowering, DropoutOpLowering,
               ExpandOpLowering, SliceGradOpLowering, PoolOpLowering, PoolGradOpLowering,
               UnfoldOpLowering, UnfoldGradOpLowering,
               L2NormalizeOpLowering, L2NormalizeGradOpLowering, WeightGradOpLowering, LinearInputGradOpLowering, MatmulOpLowering,
               LinearOpLowering, MathLowering, ScaleOpLowering, SelectOpLowering, CastOpLowering,
               SoftmaxOpLowering, LayerNormOpLowering, AddLayerNormOpLowering,
               AttentionOpLowering, FusedElementwiseOpLowering, TransposeOpLowering,
               ConcatOpLowering, SplitOpLowering, SliceOpLowering, ReduceLowering<ReduceSumOp>,
               ReduceLowering<ReduceMeanOp>, ReduceLowering<ReduceMaxOp>,
               KeyPaddingMaskOpLowering, CausalMaskOpLowering, PositionalEncodingOpLowering,
               RotaryOpLowering,
               StateLengthOpLowering, CacheAppendOpLowering, StateWriteOpLowering,
               StateReadOpLowering, ReturnOpLowering>(types, patterns.getContext(), entry);
}
