//===- FusionUtils.h - facts fusion patterns need to prove ----------------===//
//
// Fusion must never change results, so each pattern proves what it assumes:
// that a scale is a constant, that a mask value is -inf, and that two
// dynamic sizes are equal at run time (SizeAnalysis, ir/Sizes.h: equal size
// expressions, followed through the ops' shape rules).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_PASSES_FUSIONUTILS_H
#define TRANSFUSE_PASSES_FUSIONUTILS_H

#include "passes/FusionReport.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace mlir::transfuse {

/// The value of a constant with one element (any shape of ones).
std::optional<double> constantScalar(Value v);

class AddOp;
class MatmulOp;

/// A matmul of activations [..., K] by a rank-2 weight (a linear layer's
/// product, forward or backward).
bool isLinearCandidate(MatmulOp mm);

/// For `add` = `product` + b with b a [N] vector (N the product's last
/// dimension) and the product's type: b (a bias). Null otherwise.
Value biasOf(AddOp add, Value product);

/// " at NODE": the imported graph's node `op` came from (its name and op
/// type), for a why-not that names the op a pattern broke at; empty for ops
/// without a named location.
std::string at(Operation *op);

/// Records a pass's fusions into a report and, when asked, as remarks.
struct FusionRecorder {
  llvm::StringRef fusion;
  FusionReport *report = nullptr;
  bool remarks = false;

  void fused(Location loc) const;
  void missed(Location loc, const llvm::Twine &reason) const;
};

/// Applies fusion patterns once to every op under `root`, in IR order, with
/// MLIR's PatternApplicator and a PatternRewriter, and feeds `recorder`: a
/// successful rewrite is a fusion at the matched op's location; the first
/// reason a pattern gives to notifyMatchFailure is the report's why-not, at
/// the location of the op it names (a failure without a reason means not a
/// candidate and is not reported). A fusion pattern succeeds only when it
/// fused. Ops a rewrite erased are skipped, and ops a rewrite created are not
/// visited. Neither of MLIR's drivers fits: the greedy
/// one revisits ops (a reason would be reported twice) and removes dead ops
/// on its way; walkAndApplyPatterns lets a pattern erase only the op it
/// matched, while a fusion erases the ops it absorbs.
void applyFusionPatterns(Operation *root, RewritePatternSet &&patterns,
                         const FusionRecorder &recorder);

/// The same for patterns constructed from the context.
template <typename... Patterns>
void applyFusionPatterns(Operation *root, const FusionRecorder &recorder) {
  RewritePatternSet set(root->getContext());
  set.add<Patterns...>(root->getContext());
  applyFusionPatterns(root, std::move(set), recorder);
}

/// The pass of one fusion: runs `Pattern` through applyFusionPatterns,
/// reporting under `Pattern::kFusion`. `Base` is the pass's generated base
/// class (impl::Transfuse...Base<the pass>).
template <typename Base, typename Pattern>
struct FusionPass : Base {
  using Base::Base;
  explicit FusionPass(FusionReport *report) : report(report) {}

  void runOnOperation() override {
    FusionRecorder recorder{Pattern::kFusion, report, this->remarks};
    applyFusionPatterns<Pattern>(this->getOperation(), recorder);
  }

  FusionReport *report = nullptr;
};

} // namespace mlir::transfuse

#endif // TRANSFUSE_PASSES_FUSIONUTILS_H
