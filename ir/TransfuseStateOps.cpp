//===- TransfuseStateOps.cpp - state ops: verifiers, sizes, declarations --===//

#include "ir/State.h"
#include "ir/TransfuseDialect.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::transfuse;

/// A state tensor's type: [B, H, positions, D] with static H and D.
static LogicalResult verifyStateType(Operation *op, RankedTensorType type, StringRef what) {
  if (type.getRank() != 4 || type.isDynamicDim(1) || type.isDynamicDim(3))
    return op->emitOpError() << what << " must be [B, H, positions, D] with static H and D, got "
                             << type;
  return success();
}

LogicalResult CacheAppendOp::verify() {
  auto in = getInput().getType(), out = getType();
  if (failed(verifyStateType(*this, in, "input")) || failed(verifyStateType(*this, out, "result")))
    return failure();
  if (in.getElementType() != out.getElementType() || !compatibleSizes(in.getDimSize(0), out.getDimSize(0)) ||
      in.getDimSize(1) != out.getDimSize(1) || in.getDimSize(3) != out.getDimSize(3) ||
      !out.isDynamicDim(2))
    return emitOpError("result must be the input's [B, H, ?, D], got ") << out;
  return success();
}

SizeExpr CacheAppendOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  if (axis == 2)
    return SizeExpr::sum({SizeExpr::stateLength(), sizes.dim(getInput(), 2)});
  return sizes.dim(getInput(), axis);
}

LogicalResult StateWriteOp::verify() {
  return verifyStateType(*this, getInput().getType(), "input");
}

LogicalResult StateReadOp::verify() {
  if (failed(verifyStateType(*this, getType(), "result")))
    return failure();
  if ((int64_t)getSizes().size() != getType().getNumDynamicDims())
    return emitOpError("needs one size per dynamic dimension of ")
           << getType() << ", got " << getSizes().size();
  return success();
}

SizeExpr StateReadOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  auto type = getType();
  if (!type.isDynamicDim(axis))
    return SizeExpr::constant(type.getDimSize(axis));
  return sizes.index(getSizes()[type.getDynamicDimIndex(axis)]);
}

namespace {
/// One op naming a state tensor: its name, its type and `keys`.
struct StateUse {
  StringRef name;
  RankedTensorType type;
  bool keys;
};
std::optional<StateUse> stateUse(Operation *op) {
  if (auto a = dyn_cast<CacheAppendOp>(op))
    return StateUse{a.getName(), a.getInput().getType(), a.getKeys()};
  if (auto w = dyn_cast<StateWriteOp>(op))
    return StateUse{w.getName(), w.getInput().getType(), w.getKeys()};
  if (auto r = dyn_cast<StateReadOp>(op))
    return StateUse{r.getName(), r.getType(), r.getKeys()};
  return std::nullopt;
}
} // namespace

bool mlir::transfuse::usesState(func::FuncOp func) {
  bool uses = false;
  func.walk([&](Operation *op) {
    if (isa<StateLengthOp>(op) || stateUse(op))
      uses = true;
  });
  return uses;
}

FailureOr<std::vector<StateDecl>> mlir::transfuse::collectStates(ModuleOp module) {
  std::vector<StateDecl> decls;
  llvm::StringMap<size_t> index;
  std::optional<std::pair<int64_t, int64_t>> maxima; // (rows, positions)
  Operation *maximaFrom = nullptr;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || !usesState(func))
      continue;
    auto batch = func->getAttrOfType<IntegerAttr>(kMaxBatchAttr);
    auto seq = func->getAttrOfType<IntegerAttr>(kMaxSeqLenAttr);
    if (!batch || !seq)
      return func.emitOpError("uses state, so it needs ")
             << kMaxBatchAttr << " and " << kMaxSeqLenAttr << " (the state's capacity)";
    std::pair<int64_t, int64_t> m{batch.getInt(), seq.getInt()};
    if (maxima && *maxima != m)
      return func.emitOpError("has maxima (")
             << m.first << ", " << m.second << ") but the state's capacity is ("
             << maxima->first << ", " << maxima->second << ") from @"
             << cast<func::FuncOp>(maximaFrom).getName();
    maxima = m;
    maximaFrom = func;
    WalkResult walk = func.walk([&](Operation *op) -> WalkResult {
      auto use = stateUse(op);
      if (!use)
        return WalkResult::advance();
      auto capacity = RankedTensorType::get(
          {m.first, use->type.getDimSize(1), m.second, use->type.getDimSize(3)},
          use->type.getElementType());
      auto [it, inserted] = index.try_emplace(use->name, decls.size());
      if (inserted) {
        decls.push_back({use->name.str(), capacity, use->keys});
        return WalkResult::advance();
      }
      const StateDecl &d = decls[it->second];
      if (d.capacity != capacity || d.keys != use->keys) {
        op->emitOpError("names state '")
            << use->name << "' as " << capacity << (use->keys ? " keys" : "")
            << " but an earlier op names it " << d.capacity << (d.keys ? " keys" : "");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  return decls;
}

FailureOr<SizeExpr> mlir::transfuse::appendedPositions(func::FuncOp func, SizeAnalysis &sizes) {
  std::optional<SizeExpr> n;
  WalkResult walk = func.walk([&](CacheAppendOp op) -> WalkResult {
    SizeExpr e = sizes.dim(op.getInput(), 2);
    if (!n) {
      n = e;
      return WalkResult::advance();
    }
    if (e == *n)
      return WalkResult::advance();
    op.emitOpError("appends ") << e.str() << " positions but an earlier cache_append appends "
                               << n->str() << " positions: one call advances every cache alike";
    return WalkResult::interrupt();
  });
  if (walk.wasInterrupted())
    return failure();
  return n ? *n : SizeExpr::constant(0);
}
