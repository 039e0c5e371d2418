//===- MemoryPlan.cpp - liveness-based buffer reuse -----------------------===//

#include "passes/MemoryPlan.h"

#include "ir/TransfuseDialect.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::transfuse;

namespace {

/// Bytes of `v` with every dynamic dimension at its maximum; saturates at
/// INT64_MAX instead of overflowing.
int64_t bytesAtMaxima(Value v, SizeAnalysis &dims, int64_t maxBatch, int64_t maxSeq) {
  auto type = cast<RankedTensorType>(v.getType());
  Type e = type.getElementType();
  int64_t n = e.isInteger(1) ? 1 : e.getIntOrFloatBitWidth() / 8;
  for (auto [d, size] : llvm::enumerate(type.getShape())) {
    int64_t extent = ShapedType::isDynamic(size) ? dims.maximum(v, d, maxBatch, maxSeq) : size;
    if (__builtin_mul_overflow(n, extent, &n))
      return std::numeric_limits<int64_t>::max();
  }
  return n;
}

/// Values that need no arena memory of their own.
bool ownsNoMemory(Operation *op) { return isa<ParamOp, ConstantOp, ReshapeOp, DimOp>(op); }

} // namespace

int64_t mlir::transfuse::alignToArena(int64_t n) {
  if (n > std::numeric_limits<int64_t>::max() - kArenaAlignment)
    return std::numeric_limits<int64_t>::max() / kArenaAlignment * kArenaAlignment;
  return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

Value mlir::transfuse::storageRoot(Value v, const llvm::DenseMap<Value, Value> &aliases) {
  for (;;) {
    if (auto r = v.getDefiningOp<ReshapeOp>())
      v = r.getInput();
    else if (auto it = aliases.find(v); it != aliases.end())
      v = it->second;
    else
      return v;
  }
}

MemoryPlan mlir::transfuse::planMemory(func::FuncOp func,
                                       const llvm::DenseMap<Value, Value> &aliases) {
  MemoryPlan plan;
  Block &body = func.getBody().front();
  auto attr = [&](StringRef name) {
    auto a = func->getAttrOfType<IntegerAttr>(name);
    return a ? a.getInt() : int64_t{1};
  };
  int64_t maxBatch = attr(kMaxBatchAttr), maxSeq = attr(kMaxSeqLenAttr);

  llvm::DenseMap<Operation *, int64_t> position;
  int64_t next = 0;
  for (Operation &op : body)
    position[&op] = next++;
  auto root = [&](Value v) { return storageRoot(v, aliases); };
  llvm::DenseSet<Value> returned;
  for (Value v : body.getTerminator()->getOperands())
    returned.insert(root(v));

  SizeAnalysis dims;
  llvm::DenseMap<Value, size_t> index;
  for (Operation &op : body) {
    if (ownsNoMemory(&op))
      continue;
    for (Value result : op.getResults()) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || returned.contains(result) || aliases.count(result))
        continue;
      index[result] = plan.buffers.size();
      plan.buffers.push_back({result, 0, alignToArena(bytesAtMaxima(result, dims, maxBatch, maxSeq)),
                              position[&op], position[&op]});
    }
  }
  // Live from the first definition of the value or of any view of it (a
  // producer may write into its consumer's storage) ...
  for (auto [view, target] : aliases)
    if (auto it = index.find(root(view)); it != index.end())
      if (Operation *def = view.getDefiningOp(); def && position.count(def))
        plan.buffers[it->second].firstUse =
            std::min(plan.buffers[it->second].firstUse, position[def]);
  // ... until the last use of the value or of any view of it.
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      if (auto it = index.find(root(operand)); it != index.end())
        plan.buffers[it->second].lastUse =
            std::max(plan.buffers[it->second].lastUse, position[&op]);

  placeBuffers(plan);
  return plan;
}

void mlir::transfuse::placeBuffers(MemoryPlan &plan) {
  plan.arenaSize = 0;
  std::vector<size_t> order(plan.buffers.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return plan.buffers[a].size > plan.buffers[b].size;
  });
  std::vector<size_t> placed;
  for (size_t i : order) {
    PlannedBuffer &buf = plan.buffers[i];
    std::vector<std::pair<int64_t, int64_t>> busy; // [offset, end) overlapping in time
    for (size_t j : placed) {
      const PlannedBuffer &other = plan.buffers[j];
      int64_t otherEnd;
      if (__builtin_add_overflow(other.offset, other.size, &otherEnd))
        otherEnd = std::numeric_limits<int64_t>::max(); // saturated sizes
      if (other.firstUse <= buf.lastUse && buf.firstUse <= other.lastUse)
        busy.push_back({other.offset, otherEnd});
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0, end = 0;
    for (auto [busyBegin, busyEnd] : busy) {
      if (!__builtin_add_overflow(offset, buf.size, &end) && end <= busyBegin)
        break;
      offset = std::max(offset, busyEnd);
    }
    buf.offset = offset;
    // Saturates: an arena this large fails to allocate, never wraps.
    if (__builtin_add_overflow(offset, buf.size, &end))
      end = std::numeric_limits<int64_t>::max();
    plan.arenaSize = std::max(plan.arenaSize, end);
    placed.push_back(i);
  }
}
