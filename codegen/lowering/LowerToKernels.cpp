//===- LowerToKernels.cpp - --transfuse-lower-to-kernels ------------------===//
//
// The fused graph of each entry point becomes tfk kernel calls on memrefs,
// one conversion pattern per transfuse op. Before the conversion runs:
//   - what the kernels cannot run is one error naming the op (check());
//   - every size the ops need is an index value at the top of the body,
//     one per distinct expression of SizeAnalysis (ir/Sizes.h), so equal
//     sizes are the same value and later passes compare values;
//   - each argument becomes a tfk.input (through a cast the conversion
//     removes), and each returned value's producer learns that it writes
//     the caller's output buffer.
//
//===----------------------------------------------------------------------===//

#include "codegen/lowering/Lowering.h"
#include "codegen/lowering/OpMath.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

namespace mlir::transfuse {
#define GEN_PASS_DEF_TRANSFUSELOWERTOKERNELS
#include "codegen/lowering/KernelPasses.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse;
namespace tfk = mlir::transfuse::kernel;

namespace {

MemRefType memrefOf(Type tensor) {
  auto t = cast<RankedTensorType>(tensor);
  return MemRefType::get(t.getShape(), t.getElementType());
}

/// `v` through reshapes (views of their input).
Value rootThroughReshapes(Value v) {
  while (auto r = v.getDefiningOp<ReshapeOp>())
    v = r.getInput();
  return v;
}

/// The parameter a GEMM weight is (through reshapes), or null.
ParamOp weightParam(Value w) { return rootThroughReshapes(w).getDefiningOp<ParamOp>(); }

/// A matmul by a 2-D weight: the GEMM kernel with packed panels.
bool isGemmByWeight(MatmulOp m) {
  return weightParam(m.getRhs()) && m.getRhs().getType().getRank() == 2 && !m.getTransposeLhs();
}

bool supportedElement(Type t) { return t.isF32() || t.isInteger(32) || t.isInteger(1); }

/// What the patterns of one entry point share: the sizes of the original
/// tensor values (derived before any op is replaced), the index value of
/// each, and which results are written to the caller's outputs.
struct Entry {
  SizeAnalysis analysis;
  std::map<std::string, Value> indexOf; // SizeExpr::str() -> index value
  /// Values written into the caller's output buffer: the output's index
  /// and the value returned there (the value itself or a reshape of it).
  llvm::DenseMap<Value, std::pair<unsigned, Value>> output;
  llvm::DenseMap<unsigned, std::string> inputNames;
  OpBuilder top;

  explicit Entry(func::FuncOp f) : top(f.getContext()) {
    top.setInsertionPointToStart(&f.getBody().front());
  }

  /// The index value of `e` (created at the top once per expression).
  Value size(const SizeExpr &e) {
    std::string key = e.str();
    if (auto it = indexOf.find(key); it != indexOf.end())
      return it->second;
    Location loc = top.getUnknownLoc();
    Value v;
    switch (e.kind()) {
    case SizeExpr::Kind::kConstant:
      v = arith::ConstantIndexOp::create(top, loc, e.value());
      break;
    case SizeExpr::Kind::kArgument:
      v = tfk::InputDimOp::create(top, loc, top.getIndexType(), e.arg(), e.dim());
      break;
    case SizeExpr::Kind::kSum:
      for (const SizeExpr &t : e.terms())
        v = v ? Value(arith::AddIOp::create(top, loc, v, size(t))) : size(t);
      break;
    case SizeExpr::Kind::kBroadcast: {
      SmallVector<Value> terms;
      for (const SizeExpr &t : e.terms())
        terms.push_back(size(t));
      v = tfk::BroadcastDimOp::create(top, loc, top.getIndexType(), terms);
      break;
    }
    case SizeExpr::Kind::kUnknown:
      return Value();
    }
    return indexOf[key] = v;
  }
  Value dim(Value tensor, int64_t d) { return size(analysis.dim(tensor, d)); }
  /// One index value per dynamic dimension of `tensor` (a value of the
  /// original graph).
  SmallVector<Value> sizes(Value tensor) {
    SmallVector<Value> s;
    auto t = cast<RankedTensorType>(tensor.getType());
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (t.isDynamicDim(d))
        s.push_back(dim(tensor, d));
    return s;
  }
  bool sameSizes(Value a, Value b) {
    auto ta = cast<RankedTensorType>(a.getType()), tb = cast<RankedTensorType>(b.getType());
    if (ta.getRank() != tb.getRank())
      return false;
    for (int64_t d = 0; d < ta.getRank(); ++d)
      if (!analysis.equal(a, d, b, d))
        return false;
    return true;
  }
  /// True when `small` is a trailing block of `big` (NumPy alignment).
  bool trailing(Value small, Value big) {
    auto ts = cast<RankedTensorType>(small.getType());
    auto tb = cast<RankedTensorType>(big.getType());
    if (ts.getRank() < 1 || ts.getRank() > tb.getRank())
      return false;
    for (int64_t d = 0; d < ts.getRank(); ++d)
      if (!analysis.equal(small, d, big, tb.getRank() - ts.getRank() + d))
        return false;
    return true;
  }
  /// Where `result` is written: the caller's output, or a new alloc.
  Value destination(OpBuilder &b, Location loc, Value result) {
    if (auto it = output.find(result); it != output.end()) {
      auto [index, returned] = it->second;
      Value out = tfk::OutputOp::create(b, loc, memrefOf(returned.getType()), index, sizes(returned));
      if (returned == result)
        return out;
      return tfk::ReshapeOp::create(b, loc, memrefOf(result.getType()), out, sizes(result));
    }
    return tfk::AllocOp::create(b, loc, memrefOf(result.getType()), sizes(result), IntegerAttr(),
                                IntegerAttr());
  }
};

std::string opName(Operation *op) { return op->getName().getStringRef().str(); }

/// What the kernels cannot run, as one error on the op; success otherwise.
LogicalResult check(func::FuncOp func, Entry &entry, const llvm::DenseSet<OperationName> &lowered) {
  Operation *bad = nullptr;
  std::string why;
  auto fail = [&](Operation *op, const llvm::Twine &message) {
    if (!bad) {
      bad = op;
      why = message.str();
    }
    return WalkResult::interrupt();
  };
  func.walk([&](Operation *op) -> WalkResult {
    for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults())) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (!t)
        continue;
      if (!supportedElement(t.getElementType())) {
        std::string s;
        llvm::raw_string_ostream os(s);
        os << "element type " << t.getElementType() << " is not supported (f32, i32, i1 are)";
        return fail(op, s);
      }
      if (t.getRank() > 8) // exec::kMaxRank (runtime/exec/Ops.h)
        return fail(op, "rank " + llvm::Twine(t.getRank()) + " is over the supported 8");
    }
    return WalkResult::advance();
  });
  Block &body = func.getBody().front();
  for (Operation &o : body.without_terminator()) {
    if (bad)
      break;
    Operation *op = &o;
    for (Value r : op->getResults())
      if (auto t = dyn_cast<RankedTensorType>(r.getType()))
        for (int64_t d = 0; d < t.getRank(); ++d)
          if (!entry.analysis.dim(r, d).known())
            fail(op, "cannot derive the run-time size of dimension " + llvm::Twine(d) +
                         " of its result");
    for (Value v : op->getOperands())
      if (v.getType().isIndex() && !entry.analysis.index(v).known())
        fail(op, "only sizes from transfuse.dim are supported as index values");
    if (bad)
      break;
    auto linear = [&](Value x, Value w, Value residual, Value result) {
      auto xt = cast<RankedTensorType>(x.getType()), wt = cast<RankedTensorType>(w.getType());
      auto rt = cast<RankedTensorType>(result.getType());
      if (wt.getRank() != 2)
        return fail(op, "a weight of rank " + llvm::Twine(wt.getRank()) + " is not supported");
      if (xt.getRank() == 0)
        return fail(op, "a rank-0 input is not supported");
      if (xt.isDynamicDim(xt.getRank() - 1) || rt.isDynamicDim(rt.getRank() - 1))
        return fail(op, "dynamic contraction or output sizes are not supported");
      if (residual && !entry.sameSizes(residual, result))
        return fail(op, "a residual that may broadcast is not supported");
      return WalkResult::advance();
    };
    llvm::TypeSwitch<Operation *, void>(op)
        .Case([&](ConstantOp c) {
          if (!isa<DenseElementsAttr>(c.getValue()))
            fail(op, "only dense f32, i32 and i1 constants are supported");
        })
        .Case([&](MatmulOp m) {
          if (isGemmByWeight(m))
            linear(m.getLhs(), m.getRhs(), Value(), m.getResult());
        })
        .Case([&](LinearOp l) {
          linear(l.getInput(), l.getWeight(), l.getResidual(), l.getResult());
        })
        .Case([&](AttentionOp a) {
          if (a.getMask())
            fail(op, "a boolean mask operand is not supported (causal and key_padding are)");
          else if (a.getDropoutRate().convertToDouble() > 0.0)
            fail(op, "attention dropout (training) is not supported");
          int64_t d = a.getQuery().getType().getDimSize(3);
          if (ShapedType::isDynamic(d) || d < 1 || d > 256)
            fail(op, "the head size must be static, 1 to 256");
          else if (a.getValue().getType().getDimSize(3) != d ||
                   a.getKey().getType().getDimSize(3) != d)
            fail(op, "query, key and value head sizes must be equal");
          if (Value bias = a.getBias()) {
            auto t = cast<RankedTensorType>(bias.getType());
            if (t.getRank() < 2 || (!t.isDynamicDim(t.getRank() - 1) &&
                                    t.getDimSize(t.getRank() - 1) == 1))
              fail(op, "the bias must hold one value per key (a last dimension of Sk)");
          }
        })
        .Case([&](AddLayerNormOp l) {
          Value x = l.getInput(), r = l.getResidual();
          if (x.getType() != l.getResult().getType())
            std::swap(x, r);
          if (!entry.sameSizes(x, l.getResult()) || !entry.trailing(r, l.getResult()))
            fail(op, "this broadcast of the residual is not supported");
        })
        .Case([&](FusedElementwiseOp f) {
          if (!f.getType().getElementType().isF32())
            fail(op, "only f32 regions are supported");
          else if (f.getType().getRank() == 0)
            fail(op, "a rank-0 region is not supported");
          for (Operation &inner : f.getBody().front().without_terminator()) {
            auto c = dyn_cast<ConstantOp>(inner);
            auto splat = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
            bool ok = c ? splat && splat.isSplat() && isa<FloatType>(splat.getElementType())
                        : isa<ScaleOp, SelectOp>(inner) || mathKindOf(&inner).has_value();
            if (!ok) {
              bad = bad ? bad : &inner;
              why = why.empty() ? "is not supported in a fused region" : why;
            }
          }
        })
        .Default([&](Operation *) {
          if (!lowered.contains(op->getName()) && !mathKindOf(op))
            fail(op, "is not supported");
        });
  }
  if (!bad)
    return success();
  return bad->emitError() << "'" << opName(bad) << "': " << why;
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

template <class Op> struct Lowering : OpConversionPattern<Op> {
  Lowering(const TypeConverter &converter, MLIRContext *ctx, Entry &entry)
      : OpConversionPattern<Op>(converter, ctx), entry(entry) {}
  Entry &entry;
  Value dest(ConversionPatternRewriter &rw, Op op, unsigned i = 0) const {
    return entry.destination(rw, op.getLoc(), op->getResult(i));
  }
  tfk::ExecOp exec(ConversionPatternRewriter &rw, Op op, StringRef kernel, ValueRange ins,
                   ValueRange outs, ArrayRef<NamedAttribute> attrs = {}) const {
    auto e = tfk::ExecOp::create(rw, op.getLoc(), kernel, ins, outs);
    for (const NamedAttribute &a : attrs)
      e->setAttr(a.getName(), a.getValue());
    return e;
  }
  NamedAttribute attr(ConversionPatternRewriter &rw, StringRef name, Attribute value) const {
    return rw.getNamedAttr(name, value);
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
  std::string what = "an operand";
  if (auto cast = op.getIds().getDefiningOp<UnrealizedConversionCastOp>())
    if (auto in = cast.getInputs()[0].getDefiningOp<tfk::InputOp>())
      what = "input '" + entry.inputNames.lookup(in.getIndex()) + "'";
  exec(rw, op, "gather", {a.getTable(), a.getIds()}, {out},
       {attr(rw, "what", rw.getStringAttr(what))});
  rw.replaceOp(op, out);
  return success();
}

LOWERING(MatmulOp) {
  Value out = dest(rw, op);
  if (isGemmByWeight(op))
    tfk::GemmOp::create(rw, op.getLoc(), a.getLhs(), a.getRhs(), Value(), Value(), out,
                        op.getTransposeRhs(), /*packed=*/true, Activation::None);
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
                      out, op.getTransposeWeight(), packed, op.getActivation());
  rw.replaceOp(op, out);
  return success();
}

/// Every op with a formula of the table (add, sub, mul, div, relu, exp,
/// tanh, gelu: codegen/lowering/OpMath.h): exec's binary or unary with the
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
    auto e = tfk::ExecOp::create(rw, op->getLoc(), math::info(*kind).arity == 2 ? "binary" : "unary",
                                 operands, ValueRange{out});
    e->setAttr("kind", rw.getStringAttr(math::info(*kind).enumerator));
    rw.replaceOp(op, out);
    return success();
  }
};

LOWERING(ScaleOp) {
  Value out = dest(rw, op);
  exec(rw, op, "scale", {a.getInput()}, {out}, {attr(rw, "factor", op.getFactorAttr())});
  rw.replaceOp(op, out);
  return success();
}

LOWERING(SelectOp) {
  Value out = dest(rw, op);
  exec(rw, op, "select", a.getOperands(), {out});
  rw.replaceOp(op, out);
  return success();
}

LOWERING(SoftmaxOp) {
  Value out = dest(rw, op);
  int64_t axis = normalizedAxis(op.getAxis(), op.getInput().getType().getRank());
  exec(rw, op, "softmax", {a.getInput()}, {out}, {attr(rw, "axis", rw.getI64IntegerAttr(axis))});
  rw.replaceOp(op, out);
  return success();
}

LOWERING(LayerNormOp) {
  Value out = dest(rw, op);
  int64_t axis = normalizedAxis(op.getAxis(), op.getInput().getType().getRank());
  tfk::LayerNormOp::create(rw, op.getLoc(), a.getInput(), a.getGamma(), a.getBeta(), out, axis,
                           op.getEpsilon());
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
                              op.getEpsilon());
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
                           a.getKeyPadding(), a.getBias(), out, op.getScale(), op.getCausal());
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
  exec(rw, op, "transpose", {a.getInput()}, {out},
       {attr(rw, "permutation", op.getPermutationAttr())});
  rw.replaceOp(op, out);
  return success();
}

LOWERING(ConcatOp) {
  Value out = dest(rw, op);
  int64_t axis = normalizedAxis(op.getAxis(), op.getType().getRank());
  exec(rw, op, "concat", a.getInputs(), {out}, {attr(rw, "axis", rw.getI64IntegerAttr(axis))});
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
      exec(rw, op, "slice", {a.getInput()}, {out},
           {attr(rw, "axis", rw.getI64IntegerAttr(axis)),
            attr(rw, "start", rw.getI64IntegerAttr(start))});
    }
    results.push_back(out);
    start += size;
  }
  rw.replaceOp(op, results);
  return success();
}

LOWERING(SliceOp) {
  int64_t axis = normalizedAxis(op.getAxis(), op.getInput().getType().getRank());
  if (op.getLength()) {
    SizeExpr end = SizeExpr::sum({SizeExpr::constant(op.getStart()),
                                  entry.analysis.dim(op.getResult(), axis)});
    tfk::CheckOp::create(rw, op.getLoc(), "le", entry.size(end), entry.dim(op.getInput(), axis),
                         "a slice past the end of its axis (a length over the table?)");
  }
  Value out = dest(rw, op);
  exec(rw, op, "slice", {a.getInput()}, {out},
       {attr(rw, "axis", rw.getI64IntegerAttr(axis)),
        attr(rw, "start", rw.getI64IntegerAttr(op.getStart()))});
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
    this->exec(rw, op, "reduce", {a.getInput()}, {out},
               {this->attr(rw, "kind", rw.getStringAttr(kind)),
                this->attr(rw, "axes_mask", rw.getI64IntegerAttr(mask))});
    rw.replaceOp(op, out);
    return success();
  }
};

LOWERING(KeyPaddingMaskOp) {
  Value out = dest(rw, op);
  exec(rw, op, "key_padding_mask", {a.getTokens()}, {out}, {attr(rw, "pad_id", op.getPadIdAttr())});
  rw.replaceOp(op, out);
  return success();
}

LOWERING(CausalMaskOp) {
  Value out = dest(rw, op);
  exec(rw, op, "causal_mask", {a.getQueryLen(), a.getKeyLen()}, {out});
  rw.replaceOp(op, out);
  return success();
}

LOWERING(PositionalEncodingOp) {
  Value out = dest(rw, op);
  SmallVector<Value> ins{a.getLength()};
  if (a.getOffset())
    ins.push_back(a.getOffset());
  exec(rw, op, "positional_encoding", ins, {out});
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
    tfk::ExecOp::create(rw, op.getLoc(), "copy", ValueRange{a.getOperands()[i]}, ValueRange{out});
  }
  rw.replaceOpWithNewOp<func::ReturnOp>(op);
  return success();
}

#undef LOWERING

LogicalResult lowerEntry(func::FuncOp func) {
  Entry entry(func);
  MLIRContext *ctx = func.getContext();
  TypeConverter types;
  types.addConversion([](Type t) { return t; });
  types.addConversion([](RankedTensorType t) -> Type { return memrefOf(t); });
  RewritePatternSet patterns(ctx);
  patterns.add<UnrealizedConversionCastOpLowering, ParamOpLowering, ConstantOpLowering,
               DimOpLowering, ReshapeOpLowering, GatherOpLowering, MatmulOpLowering,
               LinearOpLowering, MathLowering, ScaleOpLowering, SelectOpLowering,
               SoftmaxOpLowering, LayerNormOpLowering, AddLayerNormOpLowering,
               AttentionOpLowering, FusedElementwiseOpLowering, TransposeOpLowering,
               ConcatOpLowering, SplitOpLowering, SliceOpLowering, ReduceLowering<ReduceSumOp>,
               ReduceLowering<ReduceMeanOp>, ReduceLowering<ReduceMaxOp>,
               KeyPaddingMaskOpLowering, CausalMaskOpLowering, PositionalEncodingOpLowering,
               ReturnOpLowering>(types, ctx, entry);
  llvm::DenseSet<OperationName> lowered;
  for (const std::unique_ptr<RewritePattern> &p : patterns.getNativePatterns())
    if (std::optional<OperationName> root = p->getRootKind())
      lowered.insert(*root);
  if (failed(check(func, entry, lowered)))
    return failure();
  Block &body = func.getBody().front();
  // Results computed by an op write the caller's buffer; the first return
  // of a value owns it.
  for (auto [i, v] : llvm::enumerate(body.getTerminator()->getOperands())) {
    Value root = rootThroughReshapes(v);
    Operation *def = root.getDefiningOp();
    if (def && !isa<ParamOp, ConstantOp>(def) && !entry.output.count(root))
      entry.output[root] = {(unsigned)i, v};
  }
  // Every size, derived while the graph is whole.
  for (Operation &op : body) {
    for (Value r : op.getResults()) {
      if (isa<RankedTensorType>(r.getType()))
        (void)entry.sizes(r);
      else if (isa<DimOp>(op))
        (void)entry.size(entry.analysis.index(r));
    }
    if (auto s = dyn_cast<SliceOp>(op); s && s.getLength())
      (void)entry.size(SizeExpr::sum(
          {SizeExpr::constant(s.getStart()),
           entry.analysis.dim(s.getResult(), normalizedAxis(s.getAxis(), s.getType().getRank()))}));
    if (auto s = dyn_cast<SliceOp>(op); s && s.getLength())
      (void)entry.dim(s.getInput(), normalizedAxis(s.getAxis(), s.getType().getRank()));
    if (auto a = dyn_cast<AttentionOp>(op); a && a.getBias()) {
      (void)entry.dim(a.getKey(), 2);
      (void)entry.dim(a.getBias(), a.getBias().getType().getRank() - 1);
    }
  }
  for (BlockArgument arg : body.getArguments())
    (void)entry.sizes(arg);
  // Arguments: tfk.input, seen by the graph through a cast until converted.
  for (BlockArgument arg : body.getArguments()) {
    if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "transfuse.name"))
      entry.inputNames[arg.getArgNumber()] = name.str();
    else
      entry.inputNames[arg.getArgNumber()] = "arg" + std::to_string(arg.getArgNumber());
    Value in = tfk::InputOp::create(entry.top, func.getLoc(), memrefOf(arg.getType()),
                                    arg.getArgNumber(), entry.sizes(arg));
    auto cast = UnrealizedConversionCastOp::create(entry.top, func.getLoc(), arg.getType(), in);
    entry.analysis.assumeSameSizes(cast.getResult(0), arg);
    arg.replaceAllUsesWith(cast.getResult(0));
  }
  body.eraseArguments(0, body.getNumArguments());

  ConversionTarget target(*ctx);
  target.addLegalDialect<tfk::TFKDialect, arith::ArithDialect>();
  target.addLegalOp<func::FuncOp>();
  target.addDynamicallyLegalOp<func::ReturnOp>([](func::ReturnOp r) { return r->getNumOperands() == 0; });
  // A fused region's ops stay transfuse ops inside tfk.elementwise.
  target.addDynamicallyLegalDialect<TransfuseDialect>(
      [](Operation *op) { return op->getParentOfType<tfk::ElementwiseOp>() != nullptr; });
  if (failed(applyFullConversion(func, target, std::move(patterns))))
    return failure();
  func.setFunctionType(FunctionType::get(ctx, {}, {}));
  func.removeArgAttrsAttr();
  func.removeResAttrsAttr();
  // Sizes and views nothing reads.
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isa<arith::ConstantOp, arith::AddIOp, tfk::InputDimOp, tfk::BroadcastDimOp,
              tfk::ReshapeOp>(op) &&
          op.use_empty()) {
        op.erase();
        changed = true;
      }
  }
  return success();
}

struct LowerToKernelsPass
    : mlir::transfuse::impl::TransfuseLowerToKernelsBase<LowerToKernelsPass> {
  void runOnOperation() override {
    for (auto func : llvm::make_early_inc_range(getOperation().getOps<func::FuncOp>()))
      if (failed(lowerEntry(func)))
        return signalPassFailure();
  }
};

} // namespace
