//===- Lowering.cpp - the kernel pipeline and its registration ------------===//

#include "codegen/lowering/Lowering.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::transfuse {
#define GEN_PASS_REGISTRATION
#include "codegen/lowering/KernelPasses.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse;

void mlir::transfuse::buildKernelPipeline(OpPassManager &pm) {
  pm.addPass(createTransfuseLowerToKernels());
  pm.addPass(createTransfuseKernelViews());
  pm.addPass(createTransfusePlanMemory());
}

llvm::Expected<OwningOpRef<ModuleOp>> mlir::transfuse::lowerToKernels(ModuleOp module,
                                                                      StringRef target) {
  MLIRContext *ctx = module.getContext();
  ctx->getOrLoadDialect<kernel::TFKDialect>();
  OwningOpRef<ModuleOp> kernels(cast<ModuleOp>(module->clone()));
  PassManager pm(ctx);
  buildKernelPipeline(pm);
  std::string first;
  {
    ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error && first.empty()) {
        llvm::raw_string_ostream os(first);
        d.getLocation().print(os);
        os << ": " << d.str() << " (" << target << " target)";
      }
      return success();
    });
    if (failed(pm.run(*kernels)))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     first.empty() ? "the kernel lowering failed" : first);
  }
  // Where the entry points run (absent: the cpu).
  if (target != "cpu")
    for (auto func : kernels->getOps<func::FuncOp>())
      func->setAttr(kernel::kDeviceAttr, StringAttr::get(ctx, target));
  return kernels;
}

void mlir::transfuse::registerKernelPasses() {
  registerTransfuseKernelPasses();
  PassPipelineRegistration<>("transfuse-kernel-pipeline",
                             "Lower to tfk, strided views, plan memory (what backends print)",
                             [](OpPassManager &pm) { buildKernelPipeline(pm); });
}
