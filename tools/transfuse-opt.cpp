//===- transfuse-opt.cpp - mlir-opt with the transfuse dialect -----------===//
//
// Parses, verifies, transforms and prints transfuse IR. Every pass and
// pipeline of passes/ is registered, plus MLIR's generic transforms.
//
//   transfuse-opt --import-onnx MODEL.onnx
//
// prints the ONNX importer's module instead (its weights dropped), for the
// lit tests of the importer.
//
//===----------------------------------------------------------------------===//

#include "codegen/lowering/Lowering.h"
#include "ir/KernelDialect.h"
#include "ir/TransfuseDialect.h"
#include "passes/Passes.h"

#include "frontend/onnx/OnnxImport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  if (argc >= 2 && llvm::StringRef(argv[1]) == "--import-onnx") {
    if (argc != 3) {
      llvm::errs() << "usage: transfuse-opt --import-onnx MODEL.onnx\n";
      return 2;
    }
    mlir::MLIRContext context;
    auto imported = mlir::transfuse::onnx_import::importOnnxFile(context, argv[2], {});
    if (!imported) {
      llvm::errs() << "transfuse-opt: " << llvm::toString(imported.takeError()) << "\n";
      return 1;
    }
    imported->module->print(llvm::outs());
    return 0;
  }
  mlir::DialectRegistry registry;
  registry.insert<mlir::transfuse::TransfuseDialect, mlir::transfuse::kernel::TFKDialect,
                  mlir::arith::ArithDialect, mlir::func::FuncDialect>();
  mlir::registerTransformsPasses();
  mlir::transfuse::registerTransfusePassesAndPipelines();
  mlir::transfuse::registerKernelPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "Transfuse optimizer driver\n", registry));
}
