//===- CpuCodegen.h - the kernel IR printed as C++ over the runtime kernels ===//
//
// The CPU backend. generateCpp prints the kernel IR of a compiled module
// (codegen/lowering/Lowering.h: lowered, viewed, planned) as one C++
// translation unit: per entry point, straight-line calls into
// runtime/kernels (GEMM with epilogues, attention, norms) and
// runtime/exec/Ops.h (the generic primitives), with shapes and arena
// offsets baked in and the dynamic sizes read from the inputs; plus Highway
// code generated for each tfk.elementwise region. The unit
// defines transfuse_generated_model() (runtime/exec/Generated.h);
// runtime/exec/ModelAbi.cpp turns that into the C ABI of model.h.
//
// buildArtifact compiles it with the toolchain found at build time (or
// --cxx / $TRANSFUSE_CXX) and links the precompiled runtime libraries into a
// self-contained libmodel.so, libmodel.a or executable. docs/codegen.md has
// the op-to-kernel table.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_CPU_CPUCODEGEN_H
#define TRANSFUSE_CODEGEN_CPU_CPUCODEGEN_H

#include "codegen/Interface.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::transfuse::cpu {

/// Where the printed code runs: C++ over runtime/kernels, or CUDA C++ over
/// runtime/kernels/cuda (the cuda target shares this printer; Emitter.h).
enum class Target { kCpu, kCuda };
inline const char *targetName(Target t) { return t == Target::kCuda ? "cuda" : "cpu"; }

/// The C++ source of the artifact of `kernels` (the kernel IR of a module
/// whose interface is `interface`); fails, naming the op, on what the
/// printer cannot print. For the cuda target it is CUDA C++ (model.cu):
/// launches of runtime/kernels/cuda and generated __global__ regions, the
/// same tables, and ModelDesc::device.
/// `bf16` (the cuda target only): f32 tensors are stored as bf16, the
/// weights uploaded as bf16 (ModelDesc::bf16); `interface` then gives its
/// f32 inputs and outputs as BF16 (bf16Interface).
llvm::Expected<std::string> generateCpp(ModuleOp kernels, const ModelInterface &interface,
                                        llvm::StringRef fusion, Target target = Target::kCpu,
                                        bool bf16 = false);

/// `interface` with its entries' F32 inputs and outputs as BF16: what a
/// model compiled with --dtype bf16 takes and gives.
ModelInterface bf16Interface(ModelInterface interface);

/// Success when this build can build cuda artifacts (nvcc and
/// libtransfuse_cuda.a were found at configure time), else the error saying
/// that --target cuda is unavailable.
llvm::Error checkCudaAvailable();

enum class ArtifactKind { kShared, kStatic, kExecutable };

struct BuildOptions {
  ArtifactKind kind = ArtifactKind::kShared;
  Target target = Target::kCpu;
  bool bf16 = false; // --dtype bf16 (cuda): bf16 storage, fp32 arithmetic
  std::string cxx; // empty: $TRANSFUSE_CXX, else the compiler found at build time
};

/// The compiler BuildOptions would use.
std::string defaultCompiler();

/// Writes DIR/model.cpp (model.cu for the cuda target: `source`) and
/// DIR/model.h (the C ABI).
llvm::Error writeSources(llvm::StringRef dir, llvm::StringRef source, Target target = Target::kCpu);

/// Writes the sources (writeSources), then builds DIR/libmodel.so,
/// DIR/libmodel.a or DIR/model (the executable) from them. Compiler output
/// is kept in DIR/build.log; a failure names the command and quotes the log.
llvm::Error buildArtifact(llvm::StringRef dir, llvm::StringRef source, const BuildOptions &options);

} // namespace mlir::transfuse::cpu

#endif // TRANSFUSE_CODEGEN_CPU_CPUCODEGEN_H
