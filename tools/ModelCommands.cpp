//===- ModelCommands.cpp - compile, run, stress and demo ------------------===//
//
// `transfuse compile` (compiler::compile, --verify against the reference
// backend), `run` (an entry point of an artifact, or of its model.mlir on the
// reference backend), `stress` and `demo`. Their flags are in Commands.cpp.
//
//===----------------------------------------------------------------------===//

#include "tools/Commands.h"

#include "codegen/Interface.h"
#include "codegen/reference/Interpreter.h"
#include "compiler/Compiler.h"
#include "compiler/Stress.h"
#include "models/HuggingFace.h"
#include "models/Models.h"
#include "runtime/Safetensors.h"
#include "runtime/WeightBinding.h"
#include "runtime/host/CompiledModel.h"
#include "tools/Cli.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <numeric>

#include "tools/EmbeddedModels.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::tools;
namespace rt = ::transfuse::rt;

namespace {

/// "761 ops, 182 parameters (63119496 weights)"
std::string describe(ModuleOp module, const ModelInterface &mi) {
  size_t ops = 0;
  module->walk([&](Operation *) { ++ops; });
  int64_t weights = 0;
  for (const auto &p : mi.params)
    weights += std::accumulate(p.shape.begin(), p.shape.end(), int64_t{1}, std::multiplies<>());
  return std::to_string(ops) + " ops, " + std::to_string(mi.params.size()) + " parameters (" +
         std::to_string(weights) + " weights)";
}

BuildOptions buildOptions(const std::map<std::string, std::string> &flags) {
  BuildOptions o;
  o.maxBatch = intFlag(flags, "--max-batch", 0, 1, 1 << 16);
  o.maxSeqLen = intFlag(flags, "--max-seq-len", 0, 1, 1 << 20);
  o.maxBeam = intFlag(flags, "--max-beam", 0, 1, 1 << 10);
  o.imageSize = imageSizeFlag(flags);
  // --dim NAME=MAX[,NAME=MAX...]: an ONNX file's maxima per dim_param.
  const std::string dims = flag(flags, "--dim");
  for (llvm::StringRef item : llvm::split(dims, ',')) {
    if (item.empty())
      continue;
    auto [name, value] = item.split('=');
    int64_t max = 0;
    if (name.empty() || value.getAsInteger(10, max) || max < 1 || max > (1 << 20))
      die("--dim " + item.str() + " is not NAME=MAX with MAX in [1, 1048576]");
    o.dims[name.str()] = max;
  }
  return o;
}

func::FuncOp entryFunc(ModuleOp module, llvm::StringRef name) {
  auto func = module.lookupSymbol<func::FuncOp>(name);
  if (!func)
    die("the model has no entry point '" + name + "'");
  return func;
}


/// Writes `outputs` to `path` and says so.
void writeOutputs(const std::string &path, const std::map<std::string, rt::Tensor> &outputs) {
  std::vector<std::pair<std::string, const rt::Tensor *>> list;
  for (const auto &[name, tensor] : outputs)
    list.emplace_back(name, &tensor);
  if (rt::Status s = rt::writeSafetensors(path, list); !s.isOk())
    die(s.message());
  for (const auto &[name, tensor] : outputs)
    llvm::outs() << "wrote " << name << " " << rt::dtypeName(tensor.dtype)
                 << rt::shapeToString(tensor.shape) << " to " << path << "\n";
}

/// The tensors of an inputs file, checked against the entry point's specs
/// from the file's header (names, dtypes, shapes, maxima) before any is read,
/// so that a bad or oversized input is refused without being copied.
reference::TensorMap readInputs(const rt::SafetensorsFile &file,
                                const std::vector<rt::TensorSpec> &specs) {
  std::vector<std::string> names = file.names();
  std::vector<rt::TensorRef> refs;
  for (const std::string &name : names) {
    const rt::SafetensorsFile::Info *info = file.info(name);
    refs.push_back(rt::TensorRef{name, info->dtype, info->shape.data(), info->shape.size()});
  }
  if (rt::Status s = rt::validateInputs(specs, refs.data(), refs.size()); !s.isOk())
    die(file.path() + ": " + s.message());
  reference::TensorMap inputs;
  for (const std::string &name : names)
    inputs[name] = orDie(file.read(name));
  return inputs;
}

} // namespace

//===----------------------------------------------------------------------===//
// compile
//===----------------------------------------------------------------------===//

int tools::runCompile(const std::vector<std::string> &positional,
               const std::map<std::string, std::string> &flags) {
  if (positional.size() != 1)
    die("compile expects one model definition (MODEL.json, a Hugging Face directory, "
        "MODEL.onnx or MODEL.mlir)");
  std::string out = flag(flags, "-o");
  if (out.empty())
    die("compile needs an output directory: -o DIR");
  compiler::CompileOptions options;
  options.build.target = flag(flags, "--target", "cpu");
  options.build.cxx = flag(flags, "--cxx");
  setDtype(options.build, dtypeFlag(flags, {"f32", "bf16", "int8"}));
  options.train = flags.count("--train") != 0;
  options.emit = orDie(compiler::parseEmit(flag(flags, "--emit", "shared")));
  options.strategy = orDie(FusionStrategy::parse(flag(flags, "--fusion", "none")));
  if (isHuggingFaceDirectory(positional[0]))
    options.sourceDirectory = positional[0];
  if (llvm::Error e = compiler::checkOptions(options))
    die(llvm::toString(std::move(e)));
  bool verify = flags.count("--verify") != 0;
  if (verify && options.emit != compiler::Emit::kShared)
    die("--verify runs the compiled library: use it with --emit shared (the default)");
  double tolerance =
      floatFlag(flags, "--tolerance", 1e-3, [](double v) { return v > 0; }, "a positive number");
  MLIRContext context;
  BuildOptions maxima = buildOptions(flags);
  std::vector<std::string> warnings;
  maxima.warnings = &warnings;
  auto module =
      compiler::loadDefinition(context, positional[0], maxima, options.train, &options.weights);
  for (const std::string &w : warnings)
    llvm::errs() << "transfuse: warning: " << w << "\n";
  if (!module)
    die(llvm::toString(module.takeError()));
  // The reference runs the IR as built: the verification compares the
  // compiled code with the unfused fp64 semantics (with --train, the
  // gradient of the unfused loss).
  OwningOpRef<ModuleOp> original;
  if (verify)
    original = orDie(compiler::referenceModule(**module, options.train));
  auto result = compiler::compile(**module, out, options);
  if (!result)
    die("compiling " + positional[0] + " failed: " + llvm::toString(result.takeError()));
  if (flags.count("--report"))
    llvm::outs() << result->report.format();
  llvm::outs() << "compiled " << positional[0] << " (fusion " << options.strategy.str() << ", "
               << llvm::format("%.1f", result->seconds)
               << " s): " << describe(**module, result->interface)
               << " -> " << out << "/" << result->product << "\n";
  if (!verify)
    return 0;
  uint64_t seed = (uint64_t)intFlag(flags, "--seed", 0, 0, INT64_MAX);
  auto verified = orDie(compiler::verify(*original, result->interface, out, seed));
  bool ok = true;
  for (const compiler::VerifyCase &c : verified.cases) {
    double bound = tolerance * std::max(1.0, c.maxAbsReference);
    bool pass = c.maxAbsError <= bound;
    ok &= pass;
    std::string call = "@" + c.entry + (c.step ? " (cached)" : "");
    llvm::outs() << llvm::format("verify %s B=%lld S=%lld T=%lld: max |compiled - reference| = %.3g "
                                 "(max |reference| %.3g, bound %.3g) %s\n",
                                 call.c_str(), (long long)c.batch, (long long)c.srcLen, (long long)c.tgtLen,
                                 c.maxAbsError, c.maxAbsReference, bound, pass ? "ok" : "FAILED");
  }
  llvm::outs() << "verify " << verified.concurrentRuns << " runs from 4 threads at once: "
               << (verified.concurrentIdentical ? "identical outputs" : "OUTPUTS DIFFER") << "\n";
  if (!verified.concurrentIdentical)
    die("concurrent runs of the compiled model gave different outputs");
  if (!ok)
    die("the compiled model differs from the reference backend beyond --tolerance " +
        flag(flags, "--tolerance", "1e-3") + " (relative to max(1, max |reference|))");
  return 0;
}

//===----------------------------------------------------------------------===//
// run
//===----------------------------------------------------------------------===//

int tools::runRun(const std::vector<std::string> &positional,
           const std::map<std::string, std::string> &flags) {
  if (positional.size() != 1)
    die("run expects one model: a compiled model directory or a Hugging Face directory");
  std::string backend = flag(flags, "--backend", "compiled");
  if (backend != "reference" && backend != "compiled")
    die("--backend " + backend + " is not one of compiled, reference");
  std::string inputsPath = flag(flags, "--inputs"), outputsPath = flag(flags, "--outputs");
  if (inputsPath.empty() || outputsPath.empty())
    die("run needs --inputs IN.safetensors and --outputs OUT.safetensors");
  std::string entry = flag(flags, "--entry", "forward");
  uint64_t seed = (uint64_t)intFlag(flags, "--seed", 0, 0, INT64_MAX);
  rt::SafetensorsFile inputFile = orDie(rt::SafetensorsFile::open(inputsPath));

  const ModelArtifact m =
      modelArtifact(positional[0], flags, intFlag(flags, "--max-batch", 8, 1, 1 << 20));
  if (backend == "compiled") {
    if (flags.count("--f64-outputs"))
      die("--f64-outputs applies to --backend reference");
    llvm::SmallString<256> lib(m.dir);
    llvm::sys::path::append(lib, "libmodel.so");
    if (!llvm::sys::fs::exists(lib))
      die("'" + positional[0] + "' has no libmodel.so (compiled with --emit mlir or cpp?); "
          "compile it for the cpu target or run it with --backend reference");
    rt::LoadOptions load;
    load.weightsPath = m.weights;
    load.seed = seed;
    load.threads = (int)intFlag(flags, "--threads", 0, 0, 256);
    load.deviceOrdinal = (int)intFlag(flags, "--device", 0, 0, 1023);
    auto model = orDie(rt::CompiledModel::load(lib.str().str(), load));
    reference::TensorMap inputs = readInputs(inputFile, orDie(model->inputs(entry)));
    writeOutputs(outputsPath, orDie(model->run(entry, inputs)));
    return 0;
  }
  if (flags.count("--threads"))
    die("--threads applies to --backend compiled");
  llvm::SmallString<256> mlirPath(m.dir);
  llvm::sys::path::append(mlirPath, "model.mlir");
  if (!llvm::sys::fs::exists(mlirPath))
    die("'" + positional[0] + "' is not a compiled model directory (no model.mlir)");
  MLIRContext context;
  auto module = orDie(loadModelDefinition(context, mlirPath, BuildOptions()));
  ModelInterface mi = orDie(extractInterface(*module));
  func::FuncOp func = entryFunc(*module, entry);
  auto ep = llvm::find_if(mi.entryPoints, [&](const EntryPoint &e) { return e.name == entry; });
  if (ep == mi.entryPoints.end())
    die("the model has no entry point '" + entry + "'");
  reference::TensorMap inputs = readInputs(inputFile, ep->inputs);
  reference::TensorMap weights = loadWeights(mi, m.weights, seed);
  writeOutputs(outputsPath,
               orDie(reference::run(func, weights, inputs, flags.count("--f64-outputs") != 0)));
  return 0;
}

//===----------------------------------------------------------------------===//
// stress
//===----------------------------------------------------------------------===//

int tools::runStress(const std::vector<std::string> &positional,
              const std::map<std::string, std::string> &flags) {
  if (positional.empty())
    die("stress expects compiled model directories or model definitions");
  compiler::StressOptions o;
  o.models = positional;
  o.threads = (int)intFlag(flags, "--threads", 8, 1, 256);
  o.runs = intFlag(flags, "--runs", 1000, 0, int64_t{1} << 30);
  o.badEvery = (int)intFlag(flags, "--bad-every", 8, 1, 1 << 20);
  o.lifecycle = intFlag(flags, "--lifecycle", 0, 0, int64_t{1} << 30);
  o.modelThreads = (int)intFlag(flags, "--model-threads", 1, 1, 256);
  o.seed = (uint64_t)intFlag(flags, "--seed", 0, 0, INT64_MAX);
  o.maxBatch = intFlag(flags, "--max-batch", 4, 1, 1 << 16);
  o.maxSeqLen = intFlag(flags, "--max-seq-len", 16, 1, 1 << 20);
  o.build.cxx = flag(flags, "--cxx");
  compiler::StressResult r = orDie(compiler::stressModels(o));
  llvm::outs() << "stress: " << o.models.size() << " model(s) loaded at once, " << r.cases
               << " input cases of mixed sizes\n";
  if (o.runs > 0)
    llvm::outs() << "runs: " << o.threads << " thread(s) x " << o.runs << " in "
                 << llvm::format("%.2f", r.seconds) << " s: " << r.goodRuns
                 << " good runs identical to their serial results, " << r.badRuns
                 << " bad inputs refused naming the tensor\n";
  if (o.lifecycle > 0)
    llvm::outs() << "lifecycle: " << r.cycles
                 << " x (create, run, destroy) and bad weights files refused; resident memory "
                 << llvm::format("%.1f", r.rssWarm / 1048576.0) << " MiB after "
                 << std::max<int64_t>(1, o.lifecycle / 10) << ", "
                 << llvm::format("%.1f", r.rssEnd / 1048576.0) << " MiB at the end\n";
  for (const std::string &f : r.failures)
    llvm::errs() << "transfuse: stress: " << f << "\n";
  if (!r.failures.empty())
    die("the stress test failed (" + llvm::Twine(r.failures.size()) + " problems above)");
  llvm::outs() << "stress: passed\n";
  return 0;
}

//===----------------------------------------------------------------------===//
// demo: the README's main job
//===----------------------------------------------------------------------===//

int tools::runDemo(const std::vector<std::string> &positional,
            const std::map<std::string, std::string> &flags) {
  if (!positional.empty())
    die("demo takes no positional arguments");
  int64_t batch = intFlag(flags, "--batch", 2, 1, 1 << 10),
          srcLen = intFlag(flags, "--src-len", 12, 1, 1 << 16),
          tgtLen = intFlag(flags, "--tgt-len", 10, 1, 1 << 16);
  uint64_t seed = (uint64_t)intFlag(flags, "--seed", 0, 0, INT64_MAX);
  MLIRContext context;
  BuildOptions options;
  options.maxBatch = batch;
  options.maxSeqLen = std::max(srcLen, tgtLen);
  std::string modelPath = flag(flags, "--model");
  if (!modelPath.empty() && !llvm::StringRef(modelPath).ends_with(".json"))
    die("demo runs the built-in architectures: --model takes a JSON config");
  auto t0 = std::chrono::steady_clock::now();
  OwningOpRef<ModuleOp> module;
  if (modelPath.empty()) {
    modelPath = "(embedded) models/transformer-base.json";
    ModelConfig config = orDie(parseModelConfig(kTransformerBaseJson, modelPath));
    module = orDie(buildModel(context, config, options));
  } else {
    module = orDie(loadModelDefinition(context, modelPath, options));
  }
  ModelInterface mi = orDie(extractInterface(*module));
  auto t1 = std::chrono::steady_clock::now();
  llvm::outs() << "model      " << modelPath << "\n"
               << "graph      " << describe(*module, mi) << " (built in "
               << llvm::format("%.3f", std::chrono::duration<double>(t1 - t0).count())
               << " s)\n";

  reference::TensorMap weights = orDie(rt::randomWeights(mi.params, seed));
  const EntryPoint &ep = mi.entryPoints.front();
  // Random tokens; the last sequence of the batch ends in padding where the
  // model masks padding.
  reference::TensorMap inputs =
      orDie(compiler::randomInputs(*module, ep, batch, srcLen, tgtLen, seed, /*pad=*/true));
  for (const auto &[name, t] : inputs)
    llvm::outs() << "input      " << name << " " << rt::dtypeName(t.dtype)
                 << rt::shapeToString(t.shape) << "\n";
  auto t2 = std::chrono::steady_clock::now();
  auto outputs = orDie(reference::run(entryFunc(*module, ep.name), weights, inputs));
  auto t3 = std::chrono::steady_clock::now();
  for (const auto &[name, t] : outputs) {
    const float *p = t.data<float>();
    double maxAbs = 0, sum = 0;
    for (int64_t i = 0; i < t.numElements(); ++i) {
      maxAbs = std::max(maxAbs, (double)std::fabs(p[i]));
      sum += p[i];
    }
    llvm::outs() << "output     " << name << " " << rt::dtypeName(t.dtype)
                 << rt::shapeToString(t.shape) << ": max |x| = " << maxAbs
                 << ", mean = " << sum / std::max<int64_t>(1, t.numElements()) << "\n";
  }
  llvm::outs() << "forward    reference backend (fp64), random weights (seed " << seed
               << "): " << llvm::format("%.3f", std::chrono::duration<double>(t3 - t2).count())
               << " s\n";
  return 0;
}

