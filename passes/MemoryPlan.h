//===- MemoryPlan.h - liveness-based buffer reuse in one arena ------------===//
//
// Every intermediate tensor of an entry point gets a range of one arena,
// sized for the compiled maxima; tensors whose live ranges do not overlap
// share memory. Parameters live in the weights, results in the caller's
// buffers, and a reshape is a view of its input (it extends the input's
// range instead of taking memory).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_PASSES_MEMORYPLAN_H
#define TRANSFUSE_PASSES_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace mlir::transfuse {

struct PlannedBuffer {
  Value value;
  int64_t offset = 0, size = 0;     // bytes in the arena
  int64_t firstUse = 0, lastUse = 0; // op positions in the body, inclusive
};

struct MemoryPlan {
  int64_t arenaSize = 0;
  std::vector<PlannedBuffer> buffers;
};

/// The value whose storage `v` uses: through reshapes (views of their
/// input) and `aliases` (a backend's strided views), to a value that owns it.
Value storageRoot(Value v, const llvm::DenseMap<Value, Value> &aliases);

/// The byte alignment of every buffer (a cache line; AVX-512 friendly).
inline constexpr int64_t kArenaAlignment = 64;

/// `n` bytes rounded up to kArenaAlignment (saturating).
int64_t alignToArena(int64_t n);

/// Places `plan.buffers` (sizes and live ranges set) in one arena and sets
/// `arenaSize`: greedy by size, the largest buffers first, each at the
/// lowest offset free during its live range.
void placeBuffers(MemoryPlan &plan);

/// Plans the arena of `func`. Dynamic dimensions take their maxima: the
/// function's `transfuse.max_batch` for sizes that come from dimension 0 of
/// an argument, `transfuse.max_seq_len` for other argument dimensions
/// (SizeAnalysis, ir/Sizes.h, follows each size to the arguments).
/// Placement is greedy by size: the largest buffers first, each at the lowest
/// offset free during its live range.
///
/// `aliases` maps values that a backend keeps in another value's storage
/// (strided views) to that value; they own no memory, and the storage lives
/// from the first definition among them to the last use of any.
MemoryPlan planMemory(func::FuncOp func, const llvm::DenseMap<Value, Value> &aliases = llvm::DenseMap<Value, Value>());

} // namespace mlir::transfuse

#endif // TRANSFUSE_PASSES_MEMORYPLAN_H
