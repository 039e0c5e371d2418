//===- Pipelines.cpp - pipelines and fusion strategies, in one place ------===//

#include "passes/Passes.h"

#include "ir/TransfuseDialect.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::transfuse;

namespace mlir::transfuse {
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"
} // namespace mlir::transfuse

llvm::Expected<FusionStrategy> FusionStrategy::parse(llvm::StringRef text) {
  FusionStrategy s;
  SmallVector<llvm::StringRef> names;
  text.split(names, '+');
  for (llvm::StringRef name : names) {
    name = name.trim();
    if (name == "none")
      continue;
    if (name == "all") {
      s.attention = s.layernorm = s.epilogue = s.projections = s.elementwise = true;
      continue;
    }
    bool *flag = llvm::StringSwitch<bool *>(name)
                     .Case("attention", &s.attention)
                     .Case("layernorm", &s.layernorm)
                     .Case("epilogue", &s.epilogue)
                     .Case("projections", &s.projections)
                     .Case("elementwise", &s.elementwise)
                     .Default(nullptr);
    if (!flag)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "unknown fusion '%s' in strategy '%s' (expected none, attention, layernorm, "
          "epilogue, projections, elementwise or all, combined with '+')",
          name.str().c_str(), text.str().c_str());
    *flag = true;
  }
  return s;
}

bool FusionStrategy::any() const {
  return attention || layernorm || epilogue || projections || elementwise;
}

std::string FusionStrategy::str() const {
  if (attention && layernorm && epilogue && projections && elementwise)
    return "all";
  std::string out;
  for (auto [on, name] : {std::pair{projections, "projections"}, {attention, "attention"},
                          {layernorm, "layernorm"}, {epilogue, "epilogue"},
                          {elementwise, "elementwise"}})
    if (on)
      out += (out.empty() ? "" : "+") + std::string(name);
  return out.empty() ? "none" : out;
}

void transfuse::buildCleanupPipeline(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void transfuse::buildFusionPipeline(OpPassManager &pm, const FusionStrategy &s,
                                    FusionReport *report) {
  buildCleanupPipeline(pm);
  if (s.any()) {
    // Imported graphs: their decomposed ops become the named ones the
    // fusions take.
    pm.addPass(createTransfuseRaiseDecomposed());
    buildCleanupPipeline(pm);
  }
  if (s.projections)
    pm.addPass(createMergeProjectionsPass(report));
  if (s.attention)
    pm.addPass(createFuseAttentionPass(report));
  if (s.layernorm)
    pm.addPass(createFuseAddLayerNormPass(report));
  if (s.epilogue)
    pm.addPass(createFuseLinearEpiloguePass(report));
  if (s.elementwise)
    pm.addPass(createFuseElementwisePass(report));
  buildCleanupPipeline(pm);
}

void transfuse::buildCompilePipeline(OpPassManager &pm, const FusionStrategy &s,
                                     FusionReport *report, bool train) {
  buildFusionPipeline(pm, s, report);
  if (train) {
    pm.addPass(createTransfuseAutodiff());
    buildCleanupPipeline(pm);
    if (s.epilogue) {
      pm.addPass(createTransfuseFuseLinearBackward());
      buildCleanupPipeline(pm);
    }
  }
  pm.addPass(createTransfuseHoistPrepare());
  buildCleanupPipeline(pm);
}

namespace {
struct FusionPipelineOptions : public PassPipelineOptions<FusionPipelineOptions> {
  Option<std::string> strategy{*this, "strategy",
                               llvm::cl::desc("Fusion strategy, e.g. all or attention+layernorm"),
                               llvm::cl::init("all")};
};
} // namespace

void transfuse::registerTransfusePassesAndPipelines() {
  registerTransfusePasses(); // generated: every pass of Passes.td
  PassPipelineRegistration<>("transfuse-cleanup",
                             "Canonicalize and CSE a transfuse graph",
                             buildCleanupPipeline);
  // Registered by hand so that a bad strategy fails the run.
  registerPassPipeline(
      "transfuse-fusion", "The fusion pipeline of a strategy (as transfuse compile --fusion)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) -> LogicalResult {
        FusionPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        auto strategy = FusionStrategy::parse(options.strategy);
        if (!strategy)
          return errorHandler(llvm::toString(strategy.takeError()));
        buildFusionPipeline(pm, *strategy, nullptr);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(FusionPipelineOptions());
      });
}
