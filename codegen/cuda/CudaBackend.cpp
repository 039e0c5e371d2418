//===- CudaBackend.cpp - the cuda target's Backend ------------------------===//
//
// model.cu: the includes of runtime/kernels/cuda and the device ABI
// (runtime/exec/Cuda.cuh), the ModelDesc marked as a CUDA device's (and as
// bf16 under --dtype bf16); compiled by nvcc for sm_80 and sm_90 and linked
// with libtransfuse_cuda.a and the static CUDA runtime, so an artifact needs
// only the NVIDIA driver (and Highway) where it runs.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/CudaBackend.h"

#include "codegen/cuda/CudaConfig.h"
#include "codegen/cuda/CudaPrinter.h"

#include "llvm/Support/FileSystem.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::emit;

namespace {

class CudaBackend : public Backend {
public:
  StringRef name() const override { return "cuda"; }
  StringRef sourceFile() const override { return "model.cu"; }
  bool takesBf16() const override { return true; }
  bool hostArena() const override { return false; }

  llvm::Error available() const override {
    if (*TRANSFUSE_NVCC && *TRANSFUSE_CUDA_LIB && llvm::sys::fs::exists(TRANSFUSE_CUDA_LIB))
      return llvm::Error::success();
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--target cuda is unavailable: this build found no nvcc (the "
                                   "CUDA toolkit, /usr/local/cuda) when it was configured");
  }

  std::unique_ptr<EntryPrinter> entryPrinter(func::FuncOp func,
                                             ModuleState &module) const override {
    return std::make_unique<cuda::CudaPrinter>(func, module, *this);
  }

  std::string prologue(const ModuleState &, StringRef fusion) const override {
    return generatedHeader("cuda", fusion,
                           "Launches runtime/kernels/cuda on the calling thread's stream") +
           "#include \"runtime/exec/Cuda.cuh\"\n#include \"runtime/exec/ModelDesc.h\"\n"
           "#include \"runtime/kernels/ElementwiseMath.h\"\n"
           "#include \"runtime/kernels/cuda/Attention.cuh\"\n"
           "#include \"runtime/kernels/cuda/Decode.cuh\"\n"
           "#include \"runtime/kernels/cuda/Embedding.cuh\"\n"
           "#include \"runtime/kernels/cuda/Gemm.cuh\"\n#include \"runtime/kernels/cuda/Layout.cuh\"\n"
           "#include \"runtime/kernels/cuda/Norm.cuh\"\n"
           "#include \"runtime/kernels/cuda/Train.cuh\"\n\n"
           "#include <algorithm>\n#include <cmath>\n#include <cstddef>\n#include <cstdint>\n"
           "#include <string>\n\n"
           "namespace transfuse_generated {\nnamespace exec = transfuse::exec;\n"
           "namespace rt = transfuse::rt;\nnamespace tc = transfuse::cuda;\n"
           "namespace tx = transfuse::exec::cuda;\nnamespace tm = transfuse::kernels::math;\n";
  }

  std::string modelDescTail(const ModuleState &module) const override {
    return std::string(", &tx::kCudaDevice") + (module.bf16 ? ", /*bf16=*/true" : "");
  }

  std::vector<std::string> compileCommand(const std::string &,
                                          ArrayRef<std::string>) const override {
    // Its host compiler gets -fPIC; the sanitizer flags only reach the link:
    // nvcc's device code is not instrumented.
    return {TRANSFUSE_NVCC, "-std=c++17", "-O2", "-Xcompiler=-fPIC,-fvisibility=hidden",
            "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"};
  }
  std::vector<std::string> archives() const override { return {TRANSFUSE_CUDA_LIB}; }
  std::vector<std::string> systemLibraries() const override {
    return {"-L" TRANSFUSE_CUDA_LIB_DIR, "-lcudart_static", "-lrt", "-ldl"};
  }
};

} // namespace

const Backend &mlir::transfuse::cuda::backend() {
  static const CudaBackend b;
  return b;
}
