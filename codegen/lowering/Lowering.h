//===- Lowering.h - the fused graph to the kernel IR, for every backend ---===//
//
// The passes of KernelPasses.td and the pipeline a backend runs before it
// prints: lower to tfk, strided views, memory plan (docs/codegen.md).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_LOWERING_LOWERING_H
#define TRANSFUSE_CODEGEN_LOWERING_LOWERING_H

#include "ir/KernelDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"

namespace mlir::transfuse {

#define GEN_PASS_DECL
#include "codegen/lowering/KernelPasses.h.inc"

/// Adds --transfuse-lower-to-kernels, --transfuse-kernel-views and
/// --transfuse-plan-memory.
void buildKernelPipeline(OpPassManager &pm);

/// The kernel IR of a compiled module (fused, @prepare hoisted), in a new
/// module; `module` is left as it is. An op, type or shape the kernels
/// cannot run is an error "LOC: 'op': why", suffixed with `target`. Entry
/// points of a target other than "cpu" get `tfk.device = target`.
llvm::Expected<OwningOpRef<ModuleOp>> lowerToKernels(ModuleOp module, llvm::StringRef target);

/// Registers the passes above and `transfuse-kernel-pipeline` (for transfuse-opt).
void registerKernelPasses();

} // namespace mlir::transfuse

#endif // TRANSFUSE_CODEGEN_LOWERING_LOWERING_H
