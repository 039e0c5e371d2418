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
#include "codegen/lowering/EntryState.h"
#include "codegen/lowering/OpMath.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

namespace mlir::transfuse {
#define GEN_PASS_DEF_TRANSFUSELOWERTOKERNELS
#include "codegen/lowering/KernelPasses.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::lowering;

namespace {
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
    // What the attention kernels (forward and backward) take: no boolean
    // mask, one static head size of 1..256.
    auto heads = [&](Value q, Value k, Value v, Value mask) {
      auto size = [](Value t) { return cast<RankedTensorType>(t.getType()).getDimSize(3); };
      int64_t d = size(q);
      if (mask)
        fail(op, "a boolean mask operand is not supported (causal and key_padding are)");
      else if (ShapedType::isDynamic(d) || d < 1 || d > 256)
        fail(op, "the head size must be static, 1 to 256");
      else if (size(v) != d || size(k) != d)
        fail(op, "query, key and value head sizes must be equal");
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
          heads(a.getQuery(), a.getKey(), a.getValue(), a.getMask());
          if (Value bias = a.getBias()) {
            auto t = cast<RankedTensorType>(bias.getType());
            if (t.getRank() < 2 || (!t.isDynamicDim(t.getRank() - 1) &&
                                    t.getDimSize(t.getRank() - 1) == 1))
              fail(op, "the bias must hold one value per key (a last dimension of Sk)");
          }
        })
        .Case([&](AttentionGradOp a) {
          heads(a.getQuery(), a.getKey(), a.getValue(), a.getMask());
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
                        : isa<ScaleOp, SelectOp, CastOp>(inner) || mathKindOf(&inner).has_value();
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

/// The entry's state tensors as tfk.state at their capacity (K transposed
/// when attention reads it as keys), the sizes their checks compare, and
/// the positions the entry appends.
LogicalResult declareStates(func::FuncOp func, Entry &entry) {
  if (!usesState(func))
    return success();
  auto decls = collectStates(func->getParentOfType<ModuleOp>());
  if (failed(decls))
    return failure();
  auto appended = appendedPositions(func, entry.analysis);
  if (failed(appended))
    return failure();
  if (*appended != SizeExpr::constant(0))
    entry.advance = entry.size(*appended);
  (void)entry.size(SizeExpr::constant(0));
  llvm::StringSet<> used;
  func.walk([&](Operation *op) {
    if (isa<CacheAppendOp, StateWriteOp, StateReadOp>(op))
      used.insert(op->getAttrOfType<StringAttr>("name").getValue());
  });
  for (const StateDecl &d : *decls) {
    if (!used.contains(d.name))
      continue;
    auto shape = d.capacity.getShape(); // [R, H, T, D]
    SmallVector<int64_t> stored{shape[0], shape[1], shape[2], shape[3]};
    if (d.keys)
      std::swap(stored[2], stored[3]); // [R, H, D, T]
    Value state = tfk::StateOp::create(
        entry.top, func.getLoc(), MemRefType::get(stored, d.capacity.getElementType()),
        d.name, ValueRange());
    entry.states[d.name] = {state, d};
    (void)entry.size(SizeExpr::constant(shape[2]));
  }
  return success();
}

LogicalResult lowerEntry(func::FuncOp func) {
  Entry entry(func);
  MLIRContext *ctx = func.getContext();
  TypeConverter types;
  types.addConversion([](Type t) { return t; });
  types.addConversion([](RankedTensorType t) -> Type { return memrefOf(t); });
  RewritePatternSet patterns(ctx);
  populateKernelPatterns(patterns, types, entry);
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
    // The sizes the patterns' checks compare.
    if (auto s = dyn_cast<SliceOp>(op); s && (s.getLength() || s.getOffset())) {
      (void)entry.size(sliceEnd(entry.analysis, s));
      (void)entry.dim(s.getInput(), normalizedAxis(s.getAxis(), s.getType().getRank()));
      if (s.getStart() < 0)
        (void)entry.size(SizeExpr::constant(-s.getStart()));
    }
    if (auto a = dyn_cast<AttentionOp>(op); a && a.getBias()) {
      (void)entry.dim(a.getKey(), 2);
      (void)entry.dim(a.getBias(), a.getBias().getType().getRank() - 1);
    }
  }
  for (BlockArgument arg : body.getArguments())
    (void)entry.sizes(arg);
  if (failed(declareStates(func, entry)))
    return failure();
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
  entry.frozen = true;

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
              tfk::StateLengthOp, tfk::ReshapeOp, tfk::StateOp>(op) &&
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
