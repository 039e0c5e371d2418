//===- Compile.cpp - a model definition to an artifact directory ----------===//
//
// See Compiler.h: loading a definition, the compile pipeline, the
// lowering and the backend's printer and toolchain, weights for a model's
// interface.
//
//===----------------------------------------------------------------------===//

#include "compiler/Compiler.h"
#include "compiler/Graph.h"
#include "compiler/Support.h"

#include "codegen/lowering/Lowering.h"
#include "runtime/Safetensors.h"
#include "runtime/WeightBinding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"

#include <cstring>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::compiler;
namespace rt = ::transfuse::rt;

namespace {

/// Removes, on destruction, the files of a failed compile (and the
/// directory, when the compile created it).
struct Cleanup {
  std::string dir;
  bool created = false;
  bool carries = false; // the files a Hugging Face directory's artifact carries are ours
  bool keep = false;
  ~Cleanup() {
    if (keep)
      return;
    removeAll();
    if (created)
      llvm::sys::fs::remove(dir); // only if empty
  }
  void removeAll() const {
    for (const char *f : {"model.cpp", "model.h", "libmodel.so", "libmodel.a", "model",
                          "model.o", "build.log", "model.mlir", "kernels.mlir", "manifest.json",
                          "report.json", "graph.before.dot", "graph.after.dot", kCarriedWeights})
      llvm::sys::fs::remove(dir + "/" + f);
    for (const char *f : kCarriedFiles)
      if (carries)
        llvm::sys::fs::remove(dir + "/" + f);
  }
};

/// Runs `pm` on `module`; the error carries the diagnostics reported.
llvm::Error runPasses(PassManager &pm, ModuleOp module, const llvm::Twine &what) {
  std::string diagnostics;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error)
      diagnostics += "\n  " + d.str();
    return success();
  });
  if (failed(pm.run(module)))
    return error(what + " failed:" + diagnostics);
  return llvm::Error::success();
}

} // namespace

llvm::Expected<TemporaryDirectory> compiler::TemporaryDirectory::create(StringRef prefix) {
  llvm::SmallString<128> dir;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory(prefix, dir))
    return error("cannot create a temporary directory: " + ec.message());
  return TemporaryDirectory(dir.str().str());
}

compiler::TemporaryDirectory::~TemporaryDirectory() {
  if (!path_.empty())
    llvm::sys::fs::remove_directories(path_);
}

llvm::Expected<Emit> compiler::parseEmit(StringRef name) {
  if (name == "mlir") return Emit::kMlir;
  if (name == "kernels") return Emit::kKernels;
  if (name == "cpp") return Emit::kCpp;
  if (name == "shared") return Emit::kShared;
  if (name == "static") return Emit::kStatic;
  if (name == "exe") return Emit::kExecutable;
  if (name == "dot") return Emit::kDot;
  return error("--emit " + name + " is not one of mlir, kernels, cpp, shared, static, exe, dot");
}

llvm::Expected<OwningOpRef<ModuleOp>> compiler::loadDefinition(MLIRContext &context, StringRef path,
                                                               BuildOptions model, bool train,
                                                               CarriedWeights *carried) {
  if (train) {
    model.training = true;
    model.decoding = false;
  }
  if (path.ends_with(".onnx")) {
    auto imported = importOnnxDefinition(context, path, model);
    if (!imported)
      return imported.takeError();
    if (carried)
      *carried = std::move(imported->weights);
    return std::move(imported->module);
  }
  auto module = loadModelDefinition(context, path, model);
  if (!module)
    return module.takeError();
  if (train && !(**module).lookupSymbol<func::FuncOp>("loss"))
    return error("--train differentiates @loss, which '" + path + "' does not define");
  return module;
}

llvm::Error compiler::differentiateLoss(ModuleOp module) {
  PassManager pm(module.getContext());
  pm.addPass(createTransfuseAutodiff());
  buildCleanupPipeline(pm);
  return runPasses(pm, module, "differentiating the loss");
}

llvm::Expected<OwningOpRef<ModuleOp>> compiler::referenceModule(ModuleOp module, bool train) {
  OwningOpRef<ModuleOp> copy(module.clone());
  if (train)
    if (llvm::Error e = differentiateLoss(*copy))
      return std::move(e);
  return copy;
}

llvm::Error compiler::checkOptions(const CompileOptions &options) {
  const emit::Backend *backend = emit::backendNamed(options.build.target);
  if (!backend)
    return error("--target " + options.build.target + " is not one of " +
                 llvm::join(emit::backendNames(), ", "));
  if (options.build.int8 && options.build.target != "cpu")
    return error("--dtype int8 is an option of the cpu target");
  if (options.build.int8 && options.train)
    return error("--dtype int8 builds inference entries: train with f32 (the default)");
  if (llvm::Error e = backend->available())
    return e;
  if (options.build.bf16 && !backend->takesBf16())
    return error("--dtype bf16 is not an option of the " + options.build.target + " target");
  if (options.build.bf16 && options.train && backend->storesBf16())
    return error("--dtype bf16 on the " + options.build.target +
                 " target builds inference entries: train with f32 (the default), or on the "
                 "cpu target");
  return llvm::Error::success();
}

llvm::Expected<Artifact> compiler::compile(ModuleOp module, StringRef dir,
                                           const CompileOptions &options) {
  auto t0 = std::chrono::steady_clock::now();
  const emit::BuildOptions &build = options.build;
  const Emit emit = options.emit;
  const bool train = options.train;
  if (llvm::Error e = checkOptions(options))
    return std::move(e);
  const emit::Backend &backend = *emit::backendOf(build);
  Artifact artifact;
  artifact.dir = dir.str();
  const std::string graphBefore = graphDot(module, nullptr);
  PassManager pm(module.getContext());
  buildCompilePipeline(pm, options.strategy, &artifact.report, train);
  if (llvm::Error e = runPasses(pm, module, "the compile pipeline"))
    return std::move(e);
  const std::string graphAfter = graphDot(module, &artifact.report);
  auto mi = extractInterface(module);
  if (!mi)
    return mi.takeError();
  if (build.bf16 && backend.storesBf16())
    *mi = emit::bf16Interface(std::move(*mi));
  OwningOpRef<ModuleOp> kernels;
  if (emit != Emit::kMlir && emit != Emit::kDot) {
    auto lowered = lowerToKernels(module, build.target);
    if (!lowered)
      return lowered.takeError();
    kernels = std::move(*lowered);
  }
  const bool existed = llvm::sys::fs::is_directory(dir);
  if (!options.sourceDirectory.empty() && existed &&
      llvm::sys::fs::equivalent(options.sourceDirectory, dir))
    return error("the artifact directory '" + dir + "' is the model's own directory: choose "
                 "another (-o)");
  std::error_code ec = llvm::sys::fs::create_directories(dir);
  if (ec)
    return error("cannot create '" + dir + "': " + ec.message());
  // The files of an earlier compile into DIR go: a stale libmodel.so must
  // not sit beside a new manifest.
  Cleanup cleanup{dir.str(), /*created=*/!existed, /*carries=*/!options.sourceDirectory.empty()};
  cleanup.removeAll();
  if (llvm::Error e = writeMlirArtifact(module, kernels ? *kernels : ModuleOp(), *mi, dir,
                                       options.strategy.str(),
                                       build.bf16 ? "bf16" : build.int8 ? "int8" : "f32",
                                       artifact.report.toJson()))
    return std::move(e);
  for (auto [name, text] : {std::pair{"graph.before.dot", &graphBefore},
                             std::pair{"graph.after.dot", &graphAfter}}) {
    std::error_code wec;
    llvm::raw_fd_ostream os((dir + "/" + name).str(), wec);
    if (wec)
      return error("cannot write '" + dir + "/" + name + "': " + wec.message());
    os << *text;
  }
  static const char *products[] = {"model.mlir", "kernels.mlir", "", "libmodel.so", "libmodel.a",
                                   "model", "graph.after.dot"};
  artifact.product = emit == Emit::kCpp ? backend.sourceFile().str() : products[(int)emit];
  if (emit != Emit::kMlir && emit != Emit::kKernels && emit != Emit::kDot) {
    auto source = emit::generateSource(*kernels, *mi, options.strategy.str(), build);
    if (!source)
      return source.takeError();
    if (emit == Emit::kCpp) {
      if (llvm::Error e = emit::writeSources(dir, *source, build))
        return std::move(e);
    } else {
      emit::BuildOptions binary = build;
      binary.kind = emit == Emit::kStatic      ? emit::ArtifactKind::kStatic
                    : emit == Emit::kExecutable ? emit::ArtifactKind::kExecutable
                                                : emit::ArtifactKind::kShared;
      if (llvm::Error e = emit::buildArtifact(dir, *source, binary))
        return std::move(e);
    }
  }
  for (const char *f : kCarriedFiles) {
    if (options.sourceDirectory.empty())
      break;
    std::string from = options.sourceDirectory + "/" + f;
    if (!llvm::sys::fs::exists(from))
      continue;
    if (std::error_code c = llvm::sys::fs::copy_file(from, dir + "/" + f))
      return error("cannot copy '" + from + "' into '" + dir + "': " + c.message());
  }
  if (!options.weights.empty()) {
    const reference::TensorMap tensors = carriedTensors(options.weights);
    std::vector<std::pair<std::string, const rt::Tensor *>> list;
    for (const auto &[name, t] : tensors)
      list.emplace_back(name, &t);
    if (rt::Status s = rt::writeSafetensors(dir.str() + "/" + kCarriedWeights, list); !s.isOk())
      return error(s.message());
  }
  cleanup.keep = true;
  artifact.interface = std::move(*mi);
  artifact.seconds = secondsSince(t0);
  return artifact;
}

reference::TensorMap compiler::carriedTensors(const CarriedWeights &weights) {
  reference::TensorMap tensors;
  for (const onnx_import::Weight &w : weights) {
    rt::Tensor t;
    t.shape = w.shape;
    t.bytes.resize(w.values.size() * sizeof(float));
    std::memcpy(t.bytes.data(), w.values.data(), t.bytes.size());
    tensors[w.name] = std::move(t);
  }
  return tensors;
}

llvm::Expected<reference::TensorMap> compiler::loadWeights(const ModelInterface &mi,
                                                           const std::string &path, uint64_t seed,
                                                           std::vector<std::string> *warnings) {
  if (path.empty())
    return fromStatus(rt::randomWeights(mi.params, seed));
  auto file = fromStatus(rt::WeightFiles::open(path));
  if (!file)
    return file.takeError();
  std::vector<std::string> noticed;
  auto weights = fromStatus(rt::bindWeights(mi.params, mi.rules, *file, &noticed));
  if (warnings)
    warnings->insert(warnings->end(), noticed.begin(), noticed.end());
  return weights;
}
