//===- PlanMemory.cpp - --transfuse-plan-memory ---------------------------===//
//
// Each tfk.alloc gets a slot of the call's arena: its bytes at the compiled
// maxima, live from the first kernel op that touches it (or a view of it)
// to the last, placed by passes/MemoryPlan.h's greedy rule. Allocs no
// kernel touches go.
//
//===----------------------------------------------------------------------===//

#include "codegen/lowering/Lowering.h"
#include "passes/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <limits>

namespace mlir::transfuse {
#define GEN_PASS_DEF_TRANSFUSEPLANMEMORY
#include "codegen/lowering/KernelPasses.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse::kernel;

namespace {

/// The value of index `v` at the maxima; saturates at INT64_MAX.
int64_t maximum(Value v, int64_t maxBatch, int64_t maxSeq) {
  Operation *def = v.getDefiningOp();
  if (auto c = dyn_cast_or_null<arith::ConstantIndexOp>(def))
    return c.value();
  if (auto d = dyn_cast_or_null<InputDimOp>(def))
    return d.getDim() == 0 ? maxBatch : maxSeq;
  if (isa_and_nonnull<StateLengthOp>(def))
    return maxSeq; // the cache's capacity (SizeExpr::maximum)
  if (auto add = dyn_cast_or_null<arith::AddIOp>(def)) {
    int64_t s;
    if (__builtin_add_overflow(maximum(add.getLhs(), maxBatch, maxSeq),
                               maximum(add.getRhs(), maxBatch, maxSeq), &s))
      return std::numeric_limits<int64_t>::max();
    return s;
  }
  if (auto b = dyn_cast_or_null<BroadcastDimOp>(def)) {
    int64_t m = 1;
    for (Value t : b.getTerms())
      m = std::max(m, maximum(t, maxBatch, maxSeq));
    return m;
  }
  return std::max(maxBatch, maxSeq);
}

int64_t bytesAtMaxima(AllocOp alloc, int64_t maxBatch, int64_t maxSeq) {
  MemRefType type = alloc.getType();
  Type e = type.getElementType();
  int64_t n = e.isInteger(1) ? 1 : e.getIntOrFloatBitWidth() / 8;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    int64_t extent = type.isDynamicDim(d)
                         ? maximum(alloc.getSizes()[type.getDynamicDimIndex(d)], maxBatch, maxSeq)
                         : type.getDimSize(d);
    if (__builtin_mul_overflow(n, extent, &n))
      return std::numeric_limits<int64_t>::max();
  }
  return n;
}

/// The alloc whose memory `v` is (through views), or null.
AllocOp allocOf(Value v) {
  for (;;) {
    Operation *def = v.getDefiningOp();
    if (auto r = dyn_cast_or_null<ReshapeOp>(def))
      v = r.getSource();
    else if (auto h = dyn_cast_or_null<HeadsOp>(def))
      v = h.getSource();
    else
      return dyn_cast_or_null<AllocOp>(def);
  }
}

/// A kernel call: a destination-style tfk op (it returns nothing; storage,
/// views and sizes return values), other than a check. A new kernel op
/// needs nothing here.
bool isKernel(Operation &op) {
  return isa<TFKDialect>(op.getDialect()) && op.getNumResults() == 0 && !isa<CheckOp>(op);
}

void planEntry(func::FuncOp func) {
  auto attr = [&](StringRef name) {
    auto a = func->getAttrOfType<IntegerAttr>(name);
    return a ? a.getInt() : int64_t{1};
  };
  int64_t maxBatch = attr(transfuse::kMaxBatchAttr), maxSeq = attr(transfuse::kMaxSeqLenAttr);
  Block &body = func.getBody().front();
  transfuse::MemoryPlan plan;
  llvm::DenseMap<Operation *, size_t> index;
  for (auto alloc : body.getOps<AllocOp>()) {
    index[alloc] = plan.buffers.size();
    plan.buffers.push_back({alloc.getView(), 0, transfuse::alignToArena(bytesAtMaxima(alloc, maxBatch, maxSeq)),
                            std::numeric_limits<int64_t>::max(), -1});
  }
  int64_t position = 0;
  for (Operation &op : body) {
    if (!isKernel(op))
      continue;
    for (Value operand : op.getOperands())
      if (AllocOp alloc = allocOf(operand)) {
        transfuse::PlannedBuffer &b = plan.buffers[index[alloc]];
        b.firstUse = std::min(b.firstUse, position);
        b.lastUse = std::max(b.lastUse, position);
      }
    ++position;
  }
  // Allocs no kernel touches hold nothing.
  llvm::erase_if(plan.buffers, [](const transfuse::PlannedBuffer &b) {
    if (b.lastUse >= 0)
      return false;
    b.value.getDefiningOp()->erase();
    return true;
  });
  transfuse::placeBuffers(plan);
  Builder b(func.getContext());
  for (const transfuse::PlannedBuffer &buf : plan.buffers) {
    auto alloc = buf.value.getDefiningOp<AllocOp>();
    alloc.setOffsetAttr(b.getI64IntegerAttr(buf.offset));
    alloc.setBytesAttr(b.getI64IntegerAttr(buf.size));
  }
  func->setAttr(kArenaBytesAttr, b.getI64IntegerAttr(plan.arenaSize));
}

struct PlanMemoryPass : transfuse::impl::TransfusePlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      planEntry(func);
  }
};

} // namespace
