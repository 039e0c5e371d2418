//===- KernelExport.h - one kernel as a source pair an app embeds ----------===//
//
// `transfuse export-kernel` writes one kernel of runtime/kernels, specialized
// to a shape and options, as a self-contained NAME.h / NAME.cc pair that
// depends only on Highway (dynamic dispatch: it runs the best target of the
// machine it lands on), plus NAME_test.cc, a program that checks it against
// a scalar reference on random data.
//
// One source of truth: NAME.cc is the kernel library's own per-target code
// (embedded in this binary at build time from runtime/, see
// EmbedSources.cmake), its includes resolved in place, its namespace renamed
// to NAME_transfuse (so several exported kernels link into one app), and
// runtime/ThreadPool.h replaced by an adapter over the caller's parallel-for
// callback. The generated part is the C entry point: the fixed sizes and
// options, the argument checks and the dispatch. docs/export.md has the
// walk-through.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_CPU_KERNELEXPORT_H
#define TRANSFUSE_CODEGEN_CPU_KERNELEXPORT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::transfuse {

/// What to export. The fields are the flags of `transfuse export-kernel`,
/// and errors name them as flags (--seq-q). Sizes a kind does not use are
/// ignored; the driver refuses flags a kind does not take.
struct KernelExportSpec {
  std::string kind; // one of exportableKernels()
  std::string name; // C symbol prefix and file stem; empty: "tf_" + kind
  // attention, decode_attention (decode: seqK is the cache's capacity)
  int64_t batch = 1, heads = 1, seqQ = 0, seqK = 0, headDim = 0;
  bool causal = false;
  std::string mask = "none"; // none, key_padding, additive (attention only)
  // add_layer_norm, softmax: rows × cols; gemm, linear: [rows, k] · [k, n]
  int64_t rows = 0, cols = 0, k = 0, n = 0;
  std::vector<std::string> epilogue; // gemm, linear: bias, relu|gelu|gelu_tanh, residual
  double epsilon = 1e-5;             // add_layer_norm
  std::string dtype = "f32";
};

struct ExportedFile {
  std::string name; // NAME.h, NAME.cc, NAME_test.cc
  std::string text;
};

/// attention, decode_attention, add_layer_norm, linear, gemm, softmax.
llvm::ArrayRef<llvm::StringRef> exportableKernels();

/// The flags `kind` takes besides -o, --name and --dtype (empty for an
/// unknown kind), so that the driver refuses the others.
llvm::ArrayRef<llvm::StringRef> exportKernelFlags(llvm::StringRef kind);

/// The three files, or one error naming the flag that is wrong. `command`
/// (the command line that asked) goes into the files' opening comments.
llvm::Expected<std::vector<ExportedFile>> exportKernel(const KernelExportSpec &spec,
                                                       llvm::StringRef command);

} // namespace mlir::transfuse

#endif // TRANSFUSE_CODEGEN_CPU_KERNELEXPORT_H
