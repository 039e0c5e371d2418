//===- Backend.h - the printer core's extension point: one Backend per target ===//
//
// Every backend prints the kernel IR of a compiled module (codegen/lowering:
// lowered, viewed, planned) as one translation unit that defines
// transfuse_generated_model() (runtime/exec/ModelDesc.h), builds it and links
// the precompiled runtime into a self-contained artifact. What every backend
// prints the same way is the printer core's (codegen/emit): storage, sizes,
// checks, the run/shapes/flops functions, the ABI tables, the toolchain's
// links, and one call description per kernel op that both kinds of device
// share (KernelCalls.cpp). A Backend says what differs: its preamble, how a
// kernel call is spelled, how fused elementwise regions are printed, how
// constants live, and how its source is compiled. Backends are found by
// name (backendNamed); codegen/Backends.cpp lists them.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_EMIT_BACKEND_H
#define TRANSFUSE_CODEGEN_EMIT_BACKEND_H

#include "codegen/Interface.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace mlir::transfuse::emit {

class EntryPrinter;
struct ModuleState;

enum class ArtifactKind { kShared, kStatic, kExecutable };

/// How an artifact is printed and built.
struct BuildOptions {
  std::string target = "cpu";  // a backend's name (backendNamed)
  ArtifactKind kind = ArtifactKind::kShared;
  // --dtype bf16: on cuda f32 tensors stored as bf16 with fp32 arithmetic;
  // on cpu the products' operands (weights packed, activations as a
  // product reads them) rounded to bf16, fp32 sums and fp32 elsewhere
  // (Backend::storesBf16; docs/bf16.md).
  bool bf16 = false;
  // --dtype int8 (cpu, inference): the packed GEMMs' weights quantized per
  // output column at load and their inputs per row at run time
  // (kernels::gemmInt8); everything else stays fp32.
  bool int8 = false;
  std::string cxx;             // empty: $TRANSFUSE_CXX, else the compiler found at build time
};

class Backend {
public:
  virtual ~Backend() = default;
  /// The target's name ("cpu", "cuda"): the tfk.device its entries run on.
  virtual llvm::StringRef name() const = 0;
  /// The generated source's file name in the artifact ("model.cpp").
  virtual llvm::StringRef sourceFile() const = 0;
  /// Success when this build can build the target's artifacts.
  virtual llvm::Error available() const { return llvm::Error::success(); }
  /// Success when the target takes --dtype bf16.
  virtual bool takesBf16() const { return false; }
  /// Under --dtype bf16: whether every f32 tensor is stored as bf16 (the
  /// interface too: bf16Interface), or the products alone take bf16
  /// operands (ModuleState::bf16Products).
  virtual bool storesBf16() const { return true; }
  /// Whether an entry's arena lives in host memory (checked against the
  /// machine's memory at compile time).
  virtual bool hostArena() const { return true; }

  /// The printer of one entry point (EntryPrinter.h).
  virtual std::unique_ptr<EntryPrinter> entryPrinter(func::FuncOp func,
                                                     ModuleState &module) const = 0;
  /// The source up to the anonymous namespace that holds the entries:
  /// the header comment, includes, namespace aliases and whatever code the
  /// entries' printers collected in `module` that must stand outside it.
  virtual std::string prologue(const ModuleState &module, llvm::StringRef fusion) const = 0;
  /// Code after the C entry point (closing what the prologue opened).
  virtual std::string epilogue(const ModuleState &) const { return ""; }
  /// Fields after the standard ones of the ModelDesc initializer.
  virtual std::string modelDescTail(const ModuleState &) const { return ""; }

  /// The compiler and flags that compile the generated source (the core
  /// adds the include paths, -c, the source and -o); `cxx` is the C++
  /// compiler of the build options, `extraFlags` the build's sanitizer flags.
  virtual std::vector<std::string> compileCommand(const std::string &cxx,
                                                  llvm::ArrayRef<std::string> extraFlags) const = 0;
  /// Libraries the target's artifacts link besides the runtime's: archives
  /// merged into a static artifact, then system libraries.
  virtual std::vector<std::string> archives() const { return {}; }
  virtual std::vector<std::string> systemLibraries() const { return {}; }
};

/// The backend named `name`, or null (codegen/Backends.cpp lists them).
/// Whether this build can build its artifacts is Backend::available.
const Backend *backendNamed(llvm::StringRef name);
/// The names of the backends this build knows, in order.
std::vector<std::string> backendNames();

/// The source of the artifact of `kernels` (the kernel IR of a module whose
/// interface is `interface`) for `options.target`; fails, naming the op, on
/// what the backend cannot print. Under `options.bf16`, `interface` gives
/// its f32 inputs and outputs as BF16 (bf16Interface).
llvm::Expected<std::string> generateSource(ModuleOp kernels, const ModelInterface &interface,
                                           llvm::StringRef fusion,
                                           const BuildOptions &options = {});

/// `interface` with its entries' F32 inputs and outputs as BF16: what a
/// model compiled with --dtype bf16 takes and gives.
ModelInterface bf16Interface(ModelInterface interface);

/// The compiler BuildOptions would use.
std::string defaultCompiler();

/// Writes DIR/<the backend's source file> (`source`) and DIR/model.h (the C ABI).
llvm::Error writeSources(llvm::StringRef dir, llvm::StringRef source,
                         const BuildOptions &options = {});

/// Writes the sources (writeSources), then builds DIR/libmodel.so,
/// DIR/libmodel.a or DIR/model (the executable) from them. Compiler output
/// is kept in DIR/build.log; a failure names the command and quotes the log.
llvm::Error buildArtifact(llvm::StringRef dir, llvm::StringRef source,
                          const BuildOptions &options = {});

/// The backend of `options.target`, or an error naming the target and the
/// known ones.
llvm::Expected<const Backend &> backendOf(const BuildOptions &options);

} // namespace mlir::transfuse::emit

#endif // TRANSFUSE_CODEGEN_EMIT_BACKEND_H
