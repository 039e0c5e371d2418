//===- Passes.h - transfuse passes and pipelines --------------------------===//
//
// Passes are declared in Passes.td (one pass, one file). Pipelines and the
// named fusion strategies are assembled in one place, Pipelines.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_PASSES_PASSES_H
#define TRANSFUSE_PASSES_PASSES_H

#include "passes/FusionReport.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"

namespace mlir::transfuse {

class TransfuseDialect;

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// The fusion passes, recording into `report` (may be null).
std::unique_ptr<Pass> createFuseAttentionPass(FusionReport *report);
std::unique_ptr<Pass> createFuseAddLayerNormPass(FusionReport *report);
std::unique_ptr<Pass> createFuseLinearEpiloguePass(FusionReport *report);
std::unique_ptr<Pass> createMergeProjectionsPass(FusionReport *report);
std::unique_ptr<Pass> createFuseElementwisePass(FusionReport *report);

/// The name of the entry point --transfuse-hoist-prepare creates.
inline constexpr llvm::StringLiteral kPrepareFunction = "prepare";

/// A fusion strategy: which fusions run. Named strategies are none,
/// attention, layernorm, epilogue, projections, elementwise and all; names
/// combine with '+' (attention+layernorm).
struct FusionStrategy {
  bool attention = false, layernorm = false, epilogue = false, projections = false,
       elementwise = false;
  static llvm::Expected<FusionStrategy> parse(llvm::StringRef text);
  std::string str() const;
  /// Whether any fusion runs.
  bool any() const;
};

/// Adds the graph clean-up every pipeline starts and ends with:
/// canonicalize (folds and dead-code removal) and CSE.
void buildCleanupPipeline(OpPassManager &pm);

/// Adds the fusion pipeline of `strategy`: clean-up, when anything fuses
/// --transfuse-raise-decomposed and clean-up, the chosen fusions in a fixed
/// order (projections, attention, layernorm, epilogue, elementwise),
/// clean-up.
void buildFusionPipeline(OpPassManager &pm, const FusionStrategy &strategy,
                         FusionReport *report);

/// Adds what `transfuse compile` runs: the fusion pipeline of `strategy`,
/// with `train` the gradient of @loss (--transfuse-autodiff, so the fused
/// forward gets fused backward ops), then the hoisting of weight-only work
/// into @prepare, then clean-up.
void buildCompilePipeline(OpPassManager &pm, const FusionStrategy &strategy,
                          FusionReport *report, bool train = false);

/// Registers the transfuse passes and pipelines with the global registry
/// (for transfuse-opt), including `transfuse-fusion{strategy=...}`.
void registerTransfusePassesAndPipelines();

} // namespace mlir::transfuse

#endif // TRANSFUSE_PASSES_PASSES_H
