//===- transfuse-opt.cpp - mlir-opt with the transfuse dialect -----------===//
//
// Parses, verifies, transforms and prints transfuse IR. Every pass and
// pipeline of passes/ is registered, plus MLIR's generic transforms.
//
//===----------------------------------------------------------------------===//

#include "codegen/lowering/Lowering.h"
#include "ir/KernelDialect.h"
#include "ir/TransfuseDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::transfuse::TransfuseDialect, mlir::transfuse::kernel::TFKDialect,
                  mlir::arith::ArithDialect, mlir::func::FuncDialect>();
  mlir::registerTransformsPasses();
  mlir::transfuse::registerTransfusePassesAndPipelines();
  mlir::transfuse::registerKernelPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "Transfuse optimizer driver\n", registry));
}
