//===- ModelTools.h - compile, verify and benchmark whole models ----------===//
//
// The steps behind `transfuse compile`, `compile --verify` and `bench model`,
// kept out of the flag parsing in transfuse.cpp. They print nothing; results
// come back as values and errors as llvm::Error.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_TOOLS_MODELTOOLS_H
#define TRANSFUSE_TOOLS_MODELTOOLS_H

#include "codegen/Interface.h"
#include "codegen/emit/Backend.h"
#include "codegen/reference/Interpreter.h"
#include "passes/Passes.h"
#include "runtime/Tensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace mlir::transfuse::tools {

enum class Emit { kMlir, kKernels, kCpp, kShared, kStatic, kExecutable };

/// A fresh directory in the system's temporary folder, removed with its
/// contents when this object is destroyed (benchmarks and stress runs compile
/// their artifacts into one).
class TemporaryDirectory {
public:
  static llvm::Expected<TemporaryDirectory> create(llvm::StringRef prefix);
  TemporaryDirectory(TemporaryDirectory &&other) noexcept : path_(std::move(other.path_)) {
    other.path_.clear();
  }
  TemporaryDirectory &operator=(TemporaryDirectory &&) = delete;
  ~TemporaryDirectory();
  const std::string &path() const { return path_; }

private:
  explicit TemporaryDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

/// Parses "mlir", "cpp", "shared" (libmodel.so), "static", "exe".
/// Weights from a safetensors file (warnings to stderr) or random from a
/// seed; exits with the error on failure.
reference::TensorMap loadWeights(const ModelInterface &mi, const std::string &path, uint64_t seed);

llvm::Expected<Emit> parseEmit(llvm::StringRef name);

struct CompileResult {
  ModelInterface interface;
  double seconds = 0; // the whole compile, C++ toolchain included
};

/// Runs the compile pipeline of `strategy` on `module` and writes the
/// artifact directory: model.mlir, manifest.json, report.json, and for the
/// cpu target model.cpp, model.h and the binary `emit` asks for. With
/// `train`, @loss is differentiated after fusion (@loss_grad, what
/// tf_model_train_step runs). On error, the files this call created are
/// removed.
llvm::Expected<CompileResult> compileModule(ModuleOp module, const FusionStrategy &strategy,
                                            llvm::StringRef dir, Emit emit,
                                            const emit::BuildOptions &build,
                                            FusionReport *report, bool train = false);

/// Random inputs for entry point `ep` of `module`: token ids in the
/// vocabulary of the table they index (ids that equal a padding id are
/// moved off it), dimension 0 = `batch`, every other dynamic dimension the
/// length `lengths` gives for the input's name (src_tokens -> "src", other
/// inputs -> "tgt"). With `pad`, the last sequence of the batch ends in
/// padding where the model masks padding.
llvm::Expected<std::map<std::string, ::transfuse::rt::Tensor>>
randomInputs(ModuleOp module, const EntryPoint &ep, int64_t batch, int64_t srcLen,
             int64_t tgtLen, uint64_t seed, bool pad);

struct VerifyCase {
  std::string entry;
  /// The call's place in a sequence on one decoding state (0: the first).
  int step = 0;
  int64_t batch = 0, srcLen = 0, tgtLen = 0;
  double maxAbsError = 0, maxAbsReference = 0;
};

struct VerifyResult {
  std::vector<VerifyCase> cases;
  /// Runs of the last case made from 4 threads at once on one model, and
  /// whether every one gave the bytes of the single run.
  int concurrentRuns = 0;
  bool concurrentIdentical = true;
};

/// Runs DIR/libmodel.so and the reference backend on `module` (the IR the
/// artifact was built from) with seeded random weights on random padded
/// inputs of several sizes; returns the per-size errors of every output and
/// checks that concurrent runs agree bit for bit.
llvm::Expected<VerifyResult> verifyArtifact(ModuleOp module, const ModelInterface &mi,
                                            llvm::StringRef dir, uint64_t seed);

struct BenchRow {
  std::string strategy;
  double medianMs = 0, minMs = 0, compileSeconds = 0, gflop = 0;
  int64_t arenaBytes = 0, kernelCalls = 0, runs = 0;
};

struct BenchOptions {
  int64_t batch = 8, srcLen = 64, tgtLen = 64;
  int threads = 0;
  /// Time the compiled train step (a training build's loss_grad and the
  /// Adam update) instead of forward; gflop is then 3x forward's (the
  /// forward and backward of every matmul).
  bool train = false;
  double minSeconds = 2.0;
  int minRuns = 5;
  emit::BuildOptions build;
  /// Where to keep each strategy's artifact (KEEP/<strategy>, for profiling
  /// what was timed); empty: a temporary directory, removed.
  std::string keepDir;
};

/// Compiles `modelPath` once per strategy into a temporary directory and
/// times the forward entry point (or, with `train`, the train step) on
/// random inputs (no padding).
llvm::Expected<BenchRow> benchStrategy(llvm::StringRef modelPath, const FusionStrategy &strategy,
                                       const BenchOptions &options);

struct DecodeBenchOptions {
  int64_t batch = 1, srcLen = 24, newTokens = 32;
  int beam = 1;
  int threads = 0;
  bool recompute = false;
  double minSeconds = 2.0;
  int minRuns = 3;
  std::string fusion = "all";
  std::string weightsPath; // empty: random weights
  emit::BuildOptions build;
};

struct DecodeBenchResult {
  int threads = 0;
  int64_t runs = 0;
  /// One request: encode and newTokens steps of every sentence (EOS
  /// ignored, so every engine does the same work); medians and bests.
  double medianMs = 0, minMs = 0;
  double tokensPerSecond = 0; // batch · newTokens / the median request
  /// The same tokens by recomputing the whole prefix through forward each
  /// step (greedy), when asked.
  double recomputeMs = 0, recomputeTokensPerSecond = 0;
};

/// Compiles `modelPath` (an encoder_decoder config) once into a temporary
/// directory with its decoding entries at these maxima, draws random
/// weights and sources of srcLen ids, and times translating them.
llvm::Expected<DecodeBenchResult> benchDecode(llvm::StringRef modelPath,
                                              const DecodeBenchOptions &options);

} // namespace mlir::transfuse::tools

#endif // TRANSFUSE_TOOLS_MODELTOOLS_H
