//===- Passes.h - transfuse passes and pipelines --------------------------===//
//
// Passes are declared in Passes.td (one pass, one file) as fusion lands; the
// pipelines and named fusion strategies are assembled in Pipelines.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_PASSES_PASSES_H
#define TRANSFUSE_PASSES_PASSES_H

#include "mlir/Pass/PassManager.h"

namespace mlir::transfuse {

/// Adds the graph clean-up every pipeline starts with: canonicalize, CSE.
void buildCleanupPipeline(OpPassManager &pm);

/// Registers the transfuse passes and pipelines with the global registry
/// (for transfuse-opt).
void registerTransfusePasses();

} // namespace mlir::transfuse

#endif // TRANSFUSE_PASSES_PASSES_H
