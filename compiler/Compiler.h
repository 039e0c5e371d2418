//===- Compiler.h - compile, verify and benchmark whole models ------------===//
//
// The compiler library: a model definition through the front end, the
// fusion strategy's passes, the lowering and a backend into an artifact
// directory; the artifact checked against the reference backend; fusion
// strategies timed side by side. The `transfuse` driver, the tests, the
// benchmarks and the Python package call it. It prints nothing and parses no
// flags: results come back as values (the fusion report as data), errors as
// llvm::Error.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_COMPILER_COMPILER_H
#define TRANSFUSE_COMPILER_COMPILER_H

#include "codegen/Interface.h"
#include "codegen/emit/Backend.h"
#include "codegen/reference/Interpreter.h"
#include "frontend/onnx/OnnxImport.h"
#include "models/Models.h"
#include "passes/Passes.h"
#include "runtime/Tensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace mlir::transfuse::compiler {

/// What `compile` writes besides model.mlir, manifest.json, report.json and
/// the graphs (graph.before.dot, graph.after.dot): kDot nothing more.
enum class Emit { kMlir, kKernels, kCpp, kShared, kStatic, kExecutable, kDot };

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

/// Parses "mlir", "kernels", "cpp", "shared" (libmodel.so), "static", "exe", "dot".
llvm::Expected<Emit> parseEmit(llvm::StringRef name);

/// Weights for `mi`: bound by name from a safetensors file (what binding
/// noticed without refusing, such as an unused tensor, goes to `warnings`)
/// or, with an empty path, drawn from `seed`.
llvm::Expected<reference::TensorMap> loadWeights(const ModelInterface &mi, const std::string &path,
                                                 uint64_t seed,
                                                 std::vector<std::string> *warnings = nullptr);

/// Weights a definition carries with it: an ONNX file's initializers (and
/// the weights folded from them), which `compile` writes to
/// DIR/weights.safetensors (kCarriedWeights), where the driver finds them.
using CarriedWeights = std::vector<onnx_import::Weight>;
inline constexpr const char *kCarriedWeights = "weights.safetensors";

/// Carried weights as F32 tensors by name (what kCarriedWeights holds).
reference::TensorMap carriedTensors(const CarriedWeights &weights);

/// A model definition (.json config, .mlir, a Hugging Face directory, a
/// .onnx file) built at `model`'s maxima. With `train`, a training build,
/// which must define @loss. An ONNX file's weights go to `carried` (null:
/// dropped, as for a benchmark on random weights).
llvm::Expected<OwningOpRef<ModuleOp>> loadDefinition(MLIRContext &context, llvm::StringRef path,
                                                     BuildOptions model, bool train = false,
                                                     CarriedWeights *carried = nullptr);

/// Adds @loss_grad to a training build (in place): the gradient of the
/// unfused @loss, with the loss, per parameter (--transfuse-autodiff).
llvm::Error differentiateLoss(ModuleOp module);

/// What `verify` runs an artifact against: a copy of `module` as built
/// (unfused; the reference backend computes in fp64), with `train` also
/// @loss_grad, the gradient of the unfused loss.
llvm::Expected<OwningOpRef<ModuleOp>> referenceModule(ModuleOp module, bool train);

struct CompileOptions {
  FusionStrategy strategy;
  Emit emit = Emit::kShared;
  /// The backend (target), the artifact's kind, bf16, the C++ compiler.
  emit::BuildOptions build;
  /// A training build: @loss is differentiated after fusion (@loss_grad,
  /// what tf_model_train_step runs).
  bool train = false;
  /// The Hugging Face directory the module was built from, if any: its
  /// tokenizer files are copied into the artifact (kCarriedFiles), so that
  /// an artifact alone can take text.
  std::string sourceDirectory;
  /// Weights the artifact carries (an ONNX file's): DIR/weights.safetensors.
  CarriedWeights weights;
};

/// The files of a Hugging Face directory an artifact carries, as they are.
inline constexpr const char *kCarriedFiles[] = {
    "config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
    "special_tokens_map.json", "sentence_bert_config.json", "modules.json",
    "preprocessor_config.json", "source.spm", "target.spm", "vocab.json", "target_vocab.json",
    "generation_config.json", "tokenizer.model"};

/// An artifact directory and what the compile found out.
struct Artifact {
  std::string dir;
  /// The file `emit` asked for, in `dir` (libmodel.so, model.cpp, ...).
  std::string product;
  ModelInterface interface;
  /// What fused and why the rest did not (also DIR/report.json).
  FusionReport report;
  double seconds = 0; // the whole compile, C++ toolchain included
};

/// Whether `options` can be compiled here: a known target whose toolchain
/// this machine has, bf16 only where the target takes it and only for
/// inference. `compile` checks this first; drivers call it before loading a
/// model to fail fast.
llvm::Error checkOptions(const CompileOptions &options);

/// Runs the compile pipeline on `module` (in place) and writes the artifact
/// directory: model.mlir, manifest.json, report.json, and what
/// `options.emit` asks for. On error, the files this call created are
/// removed.
llvm::Expected<Artifact> compile(ModuleOp module, llvm::StringRef dir,
                                 const CompileOptions &options);

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

/// Runs DIR/libmodel.so and the reference backend on `reference` (see
/// referenceModule) with seeded random weights on random padded inputs of
/// several sizes; returns the per-size errors of every output and checks
/// that concurrent runs agree bit for bit.
llvm::Expected<VerifyResult> verify(ModuleOp reference, const ModelInterface &mi,
                                    llvm::StringRef dir, uint64_t seed);

struct BenchRow {
  std::string strategy;
  double medianMs = 0, minMs = 0, compileSeconds = 0, gflop = 0;
  int64_t arenaBytes = 0, kernelCalls = 0, runs = 0;
};

struct BenchOptions {
  int64_t batch = 8, srcLen = 64, tgtLen = 64;
  /// The entry timed for inference (a BERT directory: encode, embed, ...).
  std::string entry = "forward";
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

} // namespace mlir::transfuse::compiler

#endif // TRANSFUSE_COMPILER_COMPILER_H
