// Fuzz target: an ONNX file (seeds: the graphs tests/onnx/onnx_e2e.py
// writes) through the importer: every input is refused with one error
// naming the file, or imports into a module that verifies. The file is
// written into a directory of its own, so that external data resolves (and
// is confined) as for a real model.
#include "frontend/onnx/OnnxImport.h"
#include "tests/fuzz/FuzzUtil.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <fstream>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      transfuse::fuzz::scratchDirectory("transfuse-fuzz-onnx") + "/model.onnx";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  mlir::MLIRContext context;
  mlir::transfuse::onnx_import::ImportOptions options;
  options.maxBatch = 2;
  options.maxSeqLen = 16;
  auto imported = mlir::transfuse::onnx_import::importOnnxFile(context, path, options);
  if (!imported) {
    std::string message = llvm::toString(imported.takeError());
    FUZZ_CHECK(message.find(path) != std::string::npos, "%s", message.c_str());
    return 0;
  }
  FUZZ_CHECK(mlir::succeeded(mlir::verify(*imported->module)), "the module does not verify");
  return 0;
}
