//===- Autodiff.cpp - reverse-mode gradients of a loss function ----------===//
//
// --transfuse-autodiff (Passes.td): @F's body is cloned into @F_grad, then
// walked backwards from the loss, each op's gradient rule
// (GradientOpInterface, ir/Gradients.cpp) building its operands' gradients
// before the return; gradients of one value from several uses are added.
// The gradients of parameters are summed per name (a name used by several
// params is one parameter: tied weights) and returned after the loss.
// fused_elementwise ops are inlined first (their bodies are primitives).
//
//===----------------------------------------------------------------------===//

#include "ir/TransfuseDialect.h"
#include "passes/PassDetail.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::transfuse {
#define GEN_PASS_DEF_TRANSFUSEAUTODIFF
#include "passes/Passes.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse;

namespace {

bool isFloatTensor(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && isa<FloatType>(tensor.getElementType());
}

struct AutodiffPass : mlir::transfuse::impl::TransfuseAutodiffBase<AutodiffPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(function);
    if (!forward || forward.isExternal()) {
      module.emitError() << "transfuse-autodiff: no function @" << function;
      return signalPassFailure();
    }
    std::string name = function + "_grad";
    if (module.lookupSymbol(name)) {
      module.emitError() << "transfuse-autodiff: @" << name << " exists already";
      return signalPassFailure();
    }
    auto results = forward.getFunctionType().getResults();
    if (results.empty() || !isFloatTensor(results[0]) ||
        cast<RankedTensorType>(results[0]).getRank() != 0) {
      forward.emitError() << "transfuse-autodiff: the first result of @" << function
                          << " must be the scalar loss, a rank-0 float tensor";
      return signalPassFailure();
    }
    if (failed(differentiate(forward, name)))
      return signalPassFailure();
  }

  LogicalResult differentiate(func::FuncOp forward, StringRef name) {
    OpBuilder b(forward);
    b.setInsertionPointAfter(forward);
    auto grad = cast<func::FuncOp>(b.clone(*forward));
    grad.setSymName(name);
    Block &body = grad.getBody().front();
    // A fused_elementwise is its body of elementwise primitives: inlined,
    // each op's own rule differentiates it (the fusion pass may fuse the
    // backward's elementwise ops again).
    SmallVector<FusedElementwiseOp> fused(body.getOps<FusedElementwiseOp>());
    for (FusedElementwiseOp f : fused) {
      b.setInsertionPoint(f);
      IRMapping map;
      Block &inner = f.getBody().front();
      map.map(inner.getArguments(), f.getInputs());
      for (Operation &op : inner.without_terminator())
        b.clone(op, map);
      f.getResult().replaceAllUsesWith(map.lookup(cast<YieldOp>(inner.getTerminator()).getValue()));
      f.erase();
    }
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value loss = ret.getOperand(0);

    // Gradients, accumulated as the walk reaches each use.
    llvm::DenseMap<Value, Value> grads;
    b.setInsertionPoint(ret);
    auto accumulate = [&](Value v, Value g) {
      if (!g)
        return;
      auto [it, inserted] = grads.try_emplace(v, g);
      if (!inserted)
        it->second = AddOp::create(b, v.getLoc(), it->second, g);
    };
    auto lossType = cast<RankedTensorType>(loss.getType());
    grads[loss] = ConstantOp::create(
        b, loss.getLoc(),
        DenseElementsAttr::get(lossType, b.getFloatAttr(lossType.getElementType(), 1.0)));

    llvm::MapVector<StringRef, SmallVector<ParamOp>> params; // by name, first use first
    for (ParamOp p : body.getOps<ParamOp>())
      params[p.getName()].push_back(p);

    // The forward ops, last first (the backward ops go before the return
    // and are not visited).
    SmallVector<Operation *> forwardOps;
    for (Operation &op : body.without_terminator())
      forwardOps.push_back(&op);
    for (Operation *op : llvm::reverse(forwardOps)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        resultGrads.push_back(grads.lookup(r));
        any |= bool(resultGrads.back());
      }
      // Leaves: params (collected below), and ops of no float operand
      // (constants, positional encodings) that nothing flows back through.
      if (!any || isa<ParamOp>(op) ||
          llvm::none_of(op->getOperandTypes(), [](Type t) { return isFloatTensor(t); }))
        continue;
      auto rule = dyn_cast<GradientOpInterface>(op);
      if (!rule)
        return op->emitError() << "transfuse-autodiff: '" << op->getName()
                               << "' has no gradient rule (fused ops have none yet: "
                                  "differentiate before fusion)";
      SmallVector<Value> operandGrads;
      if (failed(rule.buildVJP(b, resultGrads, operandGrads)))
        return failure();
      for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
        if (isFloatTensor(operand.getType()))
          accumulate(operand, g);
    }

    // The loss, then per parameter name the sum of its params' gradients.
    SmallVector<Value> outs{loss};
    SmallVector<Attribute> names{b.getDictionaryAttr(
        b.getNamedAttr("transfuse.name", b.getStringAttr("loss")))};
    for (auto &[paramName, uses] : params) {
      auto type = cast<RankedTensorType>(uses.front().getType());
      Value sum;
      for (ParamOp p : uses)
        if (Value g = grads.lookup(p.getResult()))
          sum = sum ? AddOp::create(b, p.getLoc(), sum, g).getResult() : g;
      if (!sum)
        sum = ConstantOp::create(b, uses.front().getLoc(),
                                 DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 0.0)));
      if (sum.getType() != type)
        return uses.front().emitError()
               << "transfuse-autodiff: the gradient of '" << paramName << "' has type "
               << sum.getType() << ", not the parameter's " << type;
      outs.push_back(sum);
      names.push_back(b.getDictionaryAttr(
          b.getNamedAttr("transfuse.name", b.getStringAttr("grad." + paramName.str()))));
    }
    func::ReturnOp::create(b, ret.getLoc(), outs);
    ret.erase();
    SmallVector<Type> types;
    for (Value v : outs)
      types.push_back(v.getType());
    grad.setFunctionType(b.getFunctionType(grad.getArgumentTypes(), types));
    grad.setAllResultAttrs(names);
    return success();
  }
};

} // namespace
