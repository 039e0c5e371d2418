//===- Pipelines.cpp - pipelines assembled in one place -------------------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void transfuse::buildCleanupPipeline(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void transfuse::registerTransfusePasses() {
  PassPipelineRegistration<>("transfuse-cleanup",
                             "Canonicalize and CSE a transfuse graph",
                             buildCleanupPipeline);
}
