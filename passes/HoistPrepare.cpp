//===- HoistPrepare.cpp - --transfuse-hoist-prepare -----------------------===//
//
// Work that depends only on weights (slicing a packed in_proj_weight or
// c_attn, concatenating merged projection weights, transposes of weights)
// moves out of each entry point into `@prepare`, which a runtime runs once
// when it loads a model. The entry point then reads the results as
// `transfuse.param "prepared.N" {prepared}`.
//
// Before:
//   func.func @forward(...) {
//     %w = transfuse.param "in_proj_weight" ...
//     %q, %k, %v = transfuse.split %w ...
//     ... uses of %q, %k, %v
// After:
//   func.func @prepare() -> (tensor<..> {transfuse.name = "prepared.0"}, ...) {
//     %w = transfuse.param "in_proj_weight" ...
//     %q, %k, %v = transfuse.split %w ...
//     return %q, %k, %v ...
//   }
//   func.func @forward(...) {
//     %q = transfuse.param "prepared.0" {init = #transfuse.init<zeros>, prepared} ...
//
//===----------------------------------------------------------------------===//

#include "passes/PassDetail.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::transfuse {
#define GEN_PASS_DEF_TRANSFUSEHOISTPREPARE
#include "passes/Passes.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse;

namespace {

struct HoistPreparePass : mlir::transfuse::impl::TransfuseHoistPrepareBase<HoistPreparePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (module.lookupSymbol(kPrepareFunction))
      return; // already prepared
    OpBuilder b(module.getContext());
    SmallVector<Value> outputs; // values of the entry points, in order
    SmallVector<std::pair<func::FuncOp, SmallVector<Operation *>>> work;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      // Weight-only: params, constants, and pure ops of weight-only operands.
      llvm::DenseSet<Operation *> weightOnly;
      SmallVector<Operation *> hoisted;
      for (Operation &op : func.getBody().front()) {
        if (isa<ParamOp, ConstantOp>(op)) {
          weightOnly.insert(&op);
          continue;
        }
        if (op.getNumResults() == 0 || op.getNumRegions() != 0 || !isPure(&op) ||
            op.getNumOperands() == 0)
          continue;
        bool onlyWeights = llvm::all_of(op.getOperands(), [&](Value v) {
          return v.getDefiningOp() && weightOnly.contains(v.getDefiningOp());
        });
        bool tensors = llvm::all_of(op.getResultTypes(),
                                    [](Type t) { return isa<RankedTensorType>(t); });
        if (onlyWeights && tensors) {
          weightOnly.insert(&op);
          hoisted.push_back(&op);
        }
      }
      if (!hoisted.empty())
        work.push_back({func, hoisted});
    }
    if (work.empty())
      return;

    // At the end of the module, so that the parameter table (in walk order)
    // lists the entry points' own parameters first, as the model defines them.
    b.setInsertionPointToEnd(module.getBody());
    auto prepare = func::FuncOp::create(b, module.getLoc(), kPrepareFunction,
                                        b.getFunctionType({}, {}));
    Block *body = prepare.addEntryBlock();
    b.setInsertionPointToStart(body);
    IRMapping map;
    // Clone what the hoisted ops need (params, constants, hoisted producers).
    std::function<void(Value)> cloneValue = [&](Value v) {
      if (map.contains(v))
        return;
      Operation *def = v.getDefiningOp();
      for (Value operand : def->getOperands())
        cloneValue(operand);
      // One clone per computation: entry points that read the same weights
      // (forward, encode, decode_step) share their prepared tensors.
      auto mapped = llvm::map_range(def->getOperands(), [&](Value o) { return map.lookup(o); });
      for (Operation &done : *body)
        if (done.getName() == def->getName() &&
            done.getAttrDictionary() == def->getAttrDictionary() &&
            done.getResultTypes() == def->getResultTypes() &&
            llvm::equal(done.getOperands(), mapped)) {
          map.map(def->getResults(), done.getResults());
          return;
        }
      b.clone(*def, map);
    };
    SmallVector<Type> resultTypes;
    SmallVector<Value> results;
    for (auto &[func, hoisted] : work) {
      llvm::DenseSet<Operation *> moved(hoisted.begin(), hoisted.end());
      for (Operation *op : hoisted)
        for (Value result : op->getResults()) {
          bool usedOutside = llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !moved.contains(user);
          });
          if (!usedOutside)
            continue;
          cloneValue(result);
          auto known = llvm::find(results, map.lookup(result));
          std::string name = "prepared." + std::to_string(known - results.begin());
          if (known == results.end()) {
            results.push_back(map.lookup(result));
            resultTypes.push_back(result.getType());
          }
          OpBuilder fb(func.getBody().front().getParentOp());
          fb.setInsertionPoint(op);
          auto param = ParamOp::create(fb, op->getLoc(), cast<RankedTensorType>(result.getType()),
                                       fb.getStringAttr(name),
                                       InitKindAttr::get(fb.getContext(), InitKind::Zeros),
                                       IntegerAttr(), UnitAttr(), fb.getUnitAttr());
          result.replaceUsesWithIf(param.getResult(), [&](OpOperand &use) {
            return !moved.contains(use.getOwner());
          });
        }
      for (Operation *op : llvm::reverse(hoisted))
        if (op->use_empty())
          op->erase();
    }
    func::ReturnOp::create(b, module.getLoc(), results);
    prepare.setType(b.getFunctionType({}, resultTypes));
    for (size_t i = 0; i < results.size(); ++i)
      prepare.setResultAttr(i, "transfuse.name", b.getStringAttr("prepared." + std::to_string(i)));
  }
};

} // namespace
