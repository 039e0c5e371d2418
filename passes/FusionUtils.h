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
#include "mlir/Transforms/WalkPatternRewriteDriver.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace mlir::transfuse {

/// The value of a constant with one element (any shape of ones).
std::optional<double> constantScalar(Value v);

class AddOp;

/// For `add` = `product` + b with b a [N] vector (N the product's last
/// dimension) and the product's type: b (a bias). Null otherwise.
Value biasOf(AddOp add, Value product);

/// Records a pass's fusions into a report and, when asked, as remarks.
struct FusionRecorder {
  llvm::StringRef fusion;
  FusionReport *report = nullptr;
  bool remarks = false;

  void fused(Location loc) const;
  void missed(Location loc, const llvm::Twine &reason) const;
};

/// Feeds a recorder from a pattern driver: the reason a pattern gives to
/// notifyMatchFailure is a miss at the op's location. Patterns record their
/// own successes (FusionRecorder::fused).
class FusionListener : public RewriterBase::Listener {
public:
  explicit FusionListener(const FusionRecorder &recorder) : recorder(recorder) {}
  void notifyMatchFailure(Location loc,
                          function_ref<void(Diagnostic &)> reasonCallback) override;

private:
  const FusionRecorder &recorder;
};

/// Applies the fusion pattern(s) `Patterns` once to every op under `root`,
/// in order (one walk, no fixpoint: a fusion never enables another of its
/// kind), feeding `recorder`.
template <typename... Patterns>
void applyFusionPatterns(Operation *root, const FusionRecorder &recorder) {
  RewritePatternSet set(root->getContext());
  set.add<Patterns...>(root->getContext(), recorder);
  FrozenRewritePatternSet frozen(std::move(set));
  FusionListener listener(recorder);
  walkAndApplyPatterns(root, frozen, &listener);
}

} // namespace mlir::transfuse

#endif // TRANSFUSE_PASSES_FUSIONUTILS_H
