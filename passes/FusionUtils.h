//===- FusionUtils.h - facts fusion patterns need to prove ----------------===//
//
// Fusion must never change results, so each pattern proves what it assumes:
// that a scale is a constant, that a mask value is -inf, and that two
// dynamic sizes are equal at run time (they come from the same dimension of
// the same function argument, followed through the ops that carry it).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_PASSES_FUSIONUTILS_H
#define TRANSFUSE_PASSES_FUSIONUTILS_H

#include "passes/FusionReport.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>

namespace mlir::transfuse {

/// The value of a constant with one element (any shape of ones).
std::optional<double> constantScalar(Value v);

class AddOp;

/// For `add` = `product` + b with b a [N] vector (N the product's last
/// dimension) and the product's type: b (a bias). Null otherwise.
Value biasOf(AddOp add, Value product);

/// Proves run-time equality of tensor dimensions. Entry-point arguments
/// share one batch size (docs/ir.md), so their dynamic dimensions 0 are one.
class DimEquality {
public:
  /// True when dimension `a` of `x` and dimension `b` of `y` are provably
  /// equal: equal static sizes, or dynamic sizes of one origin.
  bool equal(Value x, int64_t a, Value y, int64_t b);
  /// True when the index value `size` provably equals dimension `a` of `x`.
  bool equalsIndex(Value size, Value x, int64_t a);
  /// The compiled maximum of dynamic dimension `axis` of `v`: max_batch when
  /// it comes from dimension 0 of an entry point's argument, max_seq_len from
  /// any other argument dimension, the sum of the inputs' maxima when it
  /// comes from a concat's axis (a concat starts a size of its own), the
  /// larger of max_batch and max_seq_len when unknown.
  int64_t maximum(Value v, int64_t axis, int64_t maxBatch, int64_t maxSeqLen);

private:
  using Origin = std::pair<Value, int64_t>;
  std::optional<Origin> origin(Value v, int64_t axis);
  std::optional<Origin> indexOrigin(Value size);
  /// The common origin of the dynamic dimensions that broadcast into
  /// dimension `axis` of a result of rank `rank`; none if they may differ.
  std::optional<Origin> broadcastOrigin(ValueRange operands, int64_t axis, int64_t rank);
  llvm::DenseMap<std::pair<Value, int64_t>, std::optional<Origin>> memo;
};

/// Records a pass's fusions into a report and, when asked, as remarks.
struct FusionRecorder {
  llvm::StringRef fusion;
  FusionReport *report = nullptr;
  bool remarks = false;

  void fused(Location loc) const;
  void missed(Location loc, const llvm::Twine &reason) const;
};

} // namespace mlir::transfuse

#endif // TRANSFUSE_PASSES_FUSIONUTILS_H
