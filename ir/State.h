//===- State.h - the state tensors a model's entry points name ------------===//
//
// The state ops (TransfuseStateOps.td) name state tensors; this collects
// them once per module, with their capacities, for the interpreter, the
// lowering and the manifest, and derives how many positions an entry point
// appends (by how much it advances the state's length).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_IR_STATE_H
#define TRANSFUSE_IR_STATE_H

#include "ir/Sizes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace mlir::transfuse {

struct StateDecl {
  std::string name;
  /// [rows, H, positions, D] at the capacity: rows the entry points'
  /// transfuse.max_batch, positions their transfuse.max_seq_len.
  RankedTensorType capacity;
  /// Read as attention's K (a backend may store it transposed).
  bool keys = false;
};

/// The state tensors named in `module`, in order of first use. Fails, with
/// an error on the op, when two ops naming one tensor disagree (element
/// type, H, D, `keys`) or the functions using state disagree on maxima.
FailureOr<std::vector<StateDecl>> collectStates(ModuleOp module);

/// The positions `func` appends to its caches: the n of every
/// cache_append, which must be one size (constant 0 when it appends none).
/// Fails, with an error on the op, when two differ.
FailureOr<SizeExpr> appendedPositions(func::FuncOp func, SizeAnalysis &sizes);

/// True when `func` reads or writes state.
bool usesState(func::FuncOp func);

} // namespace mlir::transfuse

#endif // TRANSFUSE_IR_STATE_H
