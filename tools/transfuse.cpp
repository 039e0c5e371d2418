//===- transfuse.cpp - the transfuse driver --------------------------------===//
//
//   transfuse compile MODEL -o DIR [--emit mlir|kernels] [--fusion STRATEGY] [--report]
//                     [--max-batch N] [--max-seq-len N]
//   transfuse run DIR --inputs IN --outputs OUT [--backend reference] [--weights W] [--seed S]
//                 [--f64-outputs]
//   transfuse bench gemm|attention [--m M --n N --k K --epilogue E | --batch B --heads H
//                   --seq S --kv-seq S2 --head-dim D --causal --unfused] --threads T [--json]
//   transfuse stress DIR|MODEL... [--threads T] [--runs N] [--lifecycle N]
//   transfuse demo [--model MODEL] [--batch B] [--src-len S] [--tgt-len T] [--seed S]
//
// Errors: one message naming the file, tensor or flag, exit code 1, and no
// output file left behind.
//
//===----------------------------------------------------------------------===//

#include "codegen/Interface.h"
#include "codegen/cpu/KernelExport.h"
#include "codegen/reference/Interpreter.h"
#include "runtime/ThreadPool.h"
#include "runtime/host/CompiledModel.h"
#include "runtime/kernels/Targets.h"
#include "tools/Cli.h"
#include "compiler/Compiler.h"
#include "compiler/Stress.h"
#include "tools/DecodeCommands.h"
#include "tools/TrainCommands.h"
#include "models/Models.h"
#include "passes/Passes.h"
#include "runtime/Safetensors.h"
#include "bench/lib/AttentionBench.h"
#include "bench/lib/GemmBench.h"
#include "runtime/WeightBinding.h"
#include "runtime/host/Checkpoint.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <map>

#include "tools/EmbeddedModels.h"

using namespace mlir;
using namespace mlir::transfuse;
namespace rt = ::transfuse::rt;
namespace tk = ::transfuse::kernels;
using namespace mlir::transfuse::tools;

namespace {

void printHelp(const Command &c) {
  llvm::outs() << "usage: transfuse " << c.usage << "\n\n" << c.summary << "\n\noptions:\n";
  for (const FlagSpec &f : c.flags) {
    std::string left = std::string("  ") + f.name + (f.metavar ? std::string(" ") + f.metavar : "");
    llvm::outs() << llvm::left_justify(left, 26) << " " << f.help << "\n";
  }
  llvm::outs() << llvm::left_justify("  --help", 26) << " show this help\n";
}

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
  return o;
}

func::FuncOp entryFunc(ModuleOp module, llvm::StringRef name) {
  auto func = module.lookupSymbol<func::FuncOp>(name);
  if (!func)
    die("the model has no entry point '" + name + "'");
  return func;
}


//===----------------------------------------------------------------------===//
// compile
//===----------------------------------------------------------------------===//

int runCompile(const std::vector<std::string> &positional,
               const std::map<std::string, std::string> &flags) {
  if (positional.size() != 1)
    die("compile expects one model definition (MODEL.json or MODEL.mlir)");
  std::string out = flag(flags, "-o");
  if (out.empty())
    die("compile needs an output directory: -o DIR");
  compiler::CompileOptions options;
  options.build.target = flag(flags, "--target", "cpu");
  options.build.cxx = flag(flags, "--cxx");
  const std::string dtype = flag(flags, "--dtype", "f32");
  if (dtype != "f32" && dtype != "bf16")
    die("--dtype " + dtype + " is not one of f32, bf16");
  options.build.bf16 = dtype == "bf16";
  options.train = flags.count("--train") != 0;
  options.emit = orDie(compiler::parseEmit(flag(flags, "--emit", "shared")));
  options.strategy = orDie(FusionStrategy::parse(flag(flags, "--fusion", "none")));
  if (llvm::Error e = compiler::checkOptions(options))
    die(llvm::toString(std::move(e)));
  bool verify = flags.count("--verify") != 0;
  if (verify && options.emit != compiler::Emit::kShared)
    die("--verify runs the compiled library: use it with --emit shared (the default)");
  double tolerance =
      floatFlag(flags, "--tolerance", 1e-3, [](double v) { return v > 0; }, "a positive number");
  MLIRContext context;
  auto module =
      orDie(compiler::loadDefinition(context, positional[0], buildOptions(flags), options.train));
  // The reference runs the IR as built: the verification compares the
  // compiled code with the unfused fp64 semantics (with --train, the
  // gradient of the unfused loss).
  OwningOpRef<ModuleOp> original;
  if (verify)
    original = orDie(compiler::referenceModule(*module, options.train));
  auto result = compiler::compile(*module, out, options);
  if (!result)
    die("compiling " + positional[0] + " failed: " + llvm::toString(result.takeError()));
  if (flags.count("--report"))
    llvm::outs() << result->report.format();
  llvm::outs() << "compiled " << positional[0] << " (fusion " << options.strategy.str() << ", "
               << llvm::format("%.1f", result->seconds) << " s): " << describe(*module, result->interface)
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

int runRun(const std::vector<std::string> &positional,
           const std::map<std::string, std::string> &flags) {
  if (positional.size() != 1)
    die("run expects one compiled model directory");
  std::string backend = flag(flags, "--backend", "compiled");
  if (backend != "reference" && backend != "compiled")
    die("--backend " + backend + " is not one of compiled, reference");
  std::string inputsPath = flag(flags, "--inputs"), outputsPath = flag(flags, "--outputs");
  if (inputsPath.empty() || outputsPath.empty())
    die("run needs --inputs IN.safetensors and --outputs OUT.safetensors");
  std::string entry = flag(flags, "--entry", "forward");
  uint64_t seed = (uint64_t)intFlag(flags, "--seed", 0, 0, INT64_MAX);
  rt::SafetensorsFile inputFile = orDie(rt::SafetensorsFile::open(inputsPath));

  if (backend == "compiled") {
    if (flags.count("--f64-outputs"))
      die("--f64-outputs applies to --backend reference");
    llvm::SmallString<256> lib(positional[0]);
    llvm::sys::path::append(lib, "libmodel.so");
    if (!llvm::sys::fs::exists(lib))
      die("'" + positional[0] + "' has no libmodel.so (compiled with --emit mlir or cpp?); "
          "compile it for the cpu target or run it with --backend reference");
    rt::LoadOptions load;
    load.weightsPath = flag(flags, "--weights");
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
  llvm::SmallString<256> mlirPath(positional[0]);
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
  reference::TensorMap weights = loadWeights(mi, flag(flags, "--weights"), seed);
  writeOutputs(outputsPath,
               orDie(reference::run(func, weights, inputs, flags.count("--f64-outputs") != 0)));
  return 0;
}

//===----------------------------------------------------------------------===//
// stress
//===----------------------------------------------------------------------===//

int runStress(const std::vector<std::string> &positional,
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
// bench: kernels on their own (benchmarks of models come with codegen)
//===----------------------------------------------------------------------===//

/// `bench model MODEL`: one row per fusion strategy, compiled and timed in
/// this run, side by side.
int runBenchModel(const std::vector<std::string> &positional,
                  const std::map<std::string, std::string> &flags) {
  const bool train = positional[0] == "train";
  const std::string command = "bench " + positional[0];
  if (positional.size() != 2)
    die(command + " expects one model definition: " + command + " MODEL.json");
  for (const auto &[name, value] : flags)
    if (name != "--json" && name != "--threads" && name != "--min-seconds" && name != "--batch" &&
        name != "--src-len" && name != "--tgt-len" && name != "--fusion" && name != "--cxx" &&
        name != "--isa" && name != "--keep-artifacts" &&
        !(train && (name == "--batch-tokens" || name == "--seq-len")))
      die("flag " + name + " does not apply to '" + command + "'");
  compiler::BenchOptions o;
  o.train = train;
  o.batch = intFlag(flags, "--batch", 8, 1, 1 << 12);
  o.srcLen = intFlag(flags, "--src-len", 64, 1, 1 << 16);
  o.tgtLen = intFlag(flags, "--tgt-len", 64, 1, 1 << 16);
  if (train) {  // a batch of --batch-tokens padded tokens of --seq-len each side
    if (flags.count("--batch") || flags.count("--src-len") || flags.count("--tgt-len"))
      die("bench train sizes its batch with --batch-tokens and --seq-len");
    o.srcLen = o.tgtLen = intFlag(flags, "--seq-len", 32, 1, 1 << 16);
    o.batch = std::max<int64_t>(1, intFlag(flags, "--batch-tokens", 3000, 1, 1 << 24) / o.srcLen);
  }
  o.threads = (int)intFlag(flags, "--threads", 0, 0, 256);
  o.build.cxx = flag(flags, "--cxx");
  o.keepDir = flag(flags, "--keep-artifacts");
  o.minSeconds = floatFlag(flags, "--min-seconds", o.minSeconds, [](double v) { return v >= 0; },
                           "a number >= 0");
  llvm::SmallVector<llvm::StringRef> names;
  std::string list = flag(flags, "--fusion", "none,attention,layernorm,epilogue,projections,all");
  llvm::StringRef(list).split(names, ',');
  std::vector<FusionStrategy> strategies;
  for (llvm::StringRef n : names)
    strategies.push_back(orDie(FusionStrategy::parse(n.trim())));
  bool json = flags.count("--json") != 0;
  int threads = o.threads > 0 ? o.threads : rt::ThreadPool::hardwareThreads();
  if (!json)
    llvm::outs() << command << " " << positional[1] << ": B=" << o.batch << " S=" << o.srcLen
                 << " T=" << o.tgtLen << ", " << threads << " thread(s), "
                 << tk::bestTargetName() << "\n"
                 << llvm::format("%-28s %10s %10s %10s %8s %9s %9s %9s%s\n", "strategy",
                                 "median ms", "min ms", "arena MB", "kernels", "GFLOP",
                                 "GFLOP/s", "compile s", train ? "  tokens/s" : "");
  llvm::json::Array rows;
  for (const FusionStrategy &strategy : strategies) {
    compiler::BenchRow r = orDie(compiler::benchStrategy(positional[1], strategy, o));
    double gflops = r.gflop / (r.medianMs / 1e3);
    // Training throughput: target tokens (B·T, no padding) per second.
    double tokensPerSecond = double(o.batch * o.tgtLen) / (r.medianMs / 1e3);
    if (json) {
      rows.push_back(llvm::json::Object{{"strategy", r.strategy},
                                        {"tokens_per_s", train ? tokensPerSecond : 0.0},
                                        {"median_ms", r.medianMs},
                                        {"min_ms", r.minMs},
                                        {"arena_bytes", r.arenaBytes},
                                        {"kernel_calls", r.kernelCalls},
                                        {"gflop", r.gflop},
                                        {"gflops", gflops},
                                        {"runs", r.runs},
                                        {"compile_seconds", r.compileSeconds}});
      continue;
    }
    llvm::outs() << llvm::format("%-28s %10.2f %10.2f %10.1f %8lld %9.2f %9.1f %9.1f",
                                 r.strategy.c_str(), r.medianMs, r.minMs, r.arenaBytes / 1048576.0,
                                 (long long)r.kernelCalls, r.gflop, gflops, r.compileSeconds);
    if (train)
      llvm::outs() << llvm::format(" %9.0f", tokensPerSecond);
    llvm::outs() << "\n";
    llvm::outs().flush();
  }
  if (json) {
    llvm::json::Object out{{"model", positional[1]},
                           {"batch", o.batch},
                           {"src_len", o.srcLen},
                           {"tgt_len", o.tgtLen},
                           {"threads", threads},
                           {"target", tk::bestTargetName()},
                           {"rows", std::move(rows)}};
    llvm::outs() << llvm::json::Value(std::move(out)) << "\n";
  }
  return 0;
}

int runBench(const std::vector<std::string> &positional,
             const std::map<std::string, std::string> &flags) {
  if (auto it = flags.find("--isa"); it != flags.end())
    if (rt::Status s = tk::forceTarget(it->second); !s.isOk())
      die("flag --isa: " + s.message());
  if (!positional.empty() && (positional[0] == "model" || positional[0] == "train"))
    return runBenchModel(positional, flags);
  if (!positional.empty() && positional[0] == "decode")
    return runBenchDecode(positional, flags);
  if (positional.size() != 1 || (positional[0] != "gemm" && positional[0] != "attention"))
    die("bench expects gemm, attention, model MODEL or decode MODEL");
  bool json = flags.count("--json") != 0;
  int threads = (int)intFlag(flags, "--threads", 1, 1, 256);
  auto only = [&](std::initializer_list<const char *> allowed) {
    for (const auto &[name, value] : flags)
      if (name != "--json" && name != "--threads" && name != "--min-seconds" && name != "--isa" &&
          llvm::none_of(allowed, [&](const char *a) { return name == a; }))
        die("flag " + name + " does not apply to 'bench " + positional[0] + "'");
  };
  double minSeconds = floatFlag(flags, "--min-seconds", 0.5, [](double v) { return v > 0; },
                                "a positive number");
  if (positional[0] == "gemm") {
    only({"--m", "--n", "--k", "--epilogue", "--pack-per-call"});
    tk::GemmBenchOptions o;
    o.m = intFlag(flags, "--m", 1024, 1, 1 << 16);
    o.n = intFlag(flags, "--n", 1024, 1, 1 << 16);
    o.k = intFlag(flags, "--k", 1024, 1, 1 << 16);
    o.epilogue = flag(flags, "--epilogue", "none");
    o.packPerCall = flags.count("--pack-per-call");
    o.threads = threads;
    o.minSeconds = minSeconds;
    tk::GemmBenchResult r = orDie(tk::runGemmBench(o));
    llvm::outs() << (json ? tk::gemmBenchJson(r) : tk::gemmBenchText(r)) << "\n";
    return 0;
  }
  only({"--batch", "--heads", "--seq", "--kv-seq", "--head-dim", "--causal", "--unfused"});
  tk::AttentionBenchOptions o;
  o.batch = intFlag(flags, "--batch", 1, 1, 1 << 10);
  o.heads = intFlag(flags, "--heads", 8, 1, 1 << 10);
  o.seq = intFlag(flags, "--seq", 512, 1, 1 << 16);
  o.kvSeq = intFlag(flags, "--kv-seq", 0, 1, 1 << 16);
  o.headDim = intFlag(flags, "--head-dim", 64, 1, 1 << 12);
  o.causal = flags.count("--causal") != 0;
  o.unfused = flags.count("--unfused") != 0;
  o.threads = threads;
  o.minSeconds = minSeconds;
  tk::AttentionBenchResult r = tk::runAttentionBench(o);
  if (!r.status.isOk())
    die(r.status.message());
  if (json) {
    llvm::outs() << tk::attentionBenchJson(r) << "\n";
  } else {
    llvm::outs() << "attention B=" << o.batch << " H=" << o.heads << " Sq=" << o.seq
                 << " Sk=" << (o.kvSeq ? o.kvSeq : o.seq) << " D=" << o.headDim
                 << (o.causal ? " causal" : "") << (o.unfused ? " unfused" : " fused") << ", "
                 << threads << " thread(s), " << r.target << ": "
                 << llvm::format("%.1f GFLOP/s", r.gflops);
    if (r.peakGflops > 0)
      llvm::outs() << llvm::format(", %.1f%% of peak (%.1f GFLOP/s)", 100 * r.fractionOfPeak,
                                   r.peakGflops);
    llvm::outs() << "\n";
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// export-kernel: one kernel as a source pair (codegen/cpu/KernelExport.h)
//===----------------------------------------------------------------------===//

int runExportKernel(const std::vector<std::string> &positional,
                    const std::map<std::string, std::string> &flags) {
  if (positional.size() != 1)
    die("export-kernel needs one kernel (" + llvm::join(exportableKernels(), ", ") + ")");
  KernelExportSpec spec;
  spec.kind = positional[0];
  if (!llvm::is_contained(exportableKernels(), spec.kind))
    die("export-kernel: unknown kernel '" + spec.kind + "' (one of " +
        llvm::join(exportableKernels(), ", ") + ")");
  // -o, --name and --dtype go with every kind; the others as the kind says.
  llvm::ArrayRef<llvm::StringRef> taken = exportKernelFlags(spec.kind);
  for (const auto &[name, value] : flags)
    if (name != "-o" && name != "--name" && name != "--dtype" && !llvm::is_contained(taken, name))
      die("export-kernel: " + name + " does not apply to " + spec.kind + " (it takes " +
          llvm::join(taken, ", ") + ")");
  std::string dir = flag(flags, "-o");
  if (dir.empty())
    die("export-kernel needs -o DIR");
  // A size left at 0 is refused by the exporter, naming its flag.
  auto size = [&](const char *name, int64_t fallback) { return intFlag(flags, name, fallback, 0); };
  spec.name = flag(flags, "--name");
  spec.dtype = flag(flags, "--dtype", "f32");
  spec.batch = size("--batch", 1);
  spec.heads = size("--heads", 1);
  spec.seqQ = size("--seq-q", 0);
  spec.seqK = size("--seq-k", spec.seqQ);
  spec.headDim = size("--head-dim", 0);
  spec.causal = flags.count("--causal");
  spec.mask = flag(flags, "--mask", "none");
  spec.rows = size("--rows", 0);
  spec.cols = size("--cols", 0);
  spec.k = size("--k", 0);
  spec.n = size("--n", 0);
  spec.epsilon = floatFlag(flags, "--epsilon", 1e-5, [](double) { return true; }, "a number");
  std::string epilogue = flag(flags, "--epilogue");
  llvm::SmallVector<llvm::StringRef> items;
  llvm::StringRef(epilogue).split(items, ',');
  for (llvm::StringRef item : items)
    if (!item.trim().empty())
      spec.epilogue.push_back(item.trim().str());
  std::string command = "transfuse export-kernel " + spec.kind;
  for (const auto &[name, value] : flags)
    command += " " + name + (value.empty() ? "" : " " + value);
  std::vector<ExportedFile> files = orDie(exportKernel(spec, command));
  // Everything is checked above: only I/O can fail from here on.
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    die("cannot create " + dir + ": " + ec.message());
  for (const ExportedFile &file : files) {
    std::string path = dir + "/" + file.name;
    if (rt::Status st = rt::writeFileAtomically(path, file.text); !st)
      die(st.message());
    llvm::outs() << "wrote " << path << "\n";
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// demo: the README's main job
//===----------------------------------------------------------------------===//

int runDemo(const std::vector<std::string> &positional,
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

} // namespace

int main(int argc, char **argv) {
  if (rt::Status s = tk::forceTargetFromEnvironment(); !s.isOk())
    die(s.message());
  std::vector<Command> commands = {
      {"compile", "compile MODEL.json|MODEL.mlir -o DIR [options]",
       "Builds or parses a model definition, runs the fusion strategy, and writes\n"
       "DIR/model.mlir, DIR/manifest.json and DIR/report.json.",
       {{"-o", "DIR", "output directory (created if missing)"},
        {"--target", "NAME", "cpu (default) or cuda (sm_80 and sm_90 with nvcc; "
                             "inference and --train; docs/cuda.md)"},
        {"--dtype", "T", "f32 (default), or bf16 with --target cuda: tensors and weights "
                         "stored as bf16, arithmetic in fp32 (inference)"},
        {"--emit", "KIND", "shared (default: libmodel.so), static (libmodel.a), exe, cpp, kernels or mlir"},
        {"--cxx", "PATH", "C++ compiler for the artifact (default: $TRANSFUSE_CXX, else clang++-22)"},
        {"--verify", nullptr, "run the compiled model against the reference backend, random "
                              "weights and padded inputs; exit 1 past the tolerance"},
        {"--tolerance", "X", "--verify: max |error| / max(1, max |reference|) (default 1e-3)"},
        {"--seed", "N", "--verify: seed of weights and inputs (default 0)"},
        {"--fusion", "STRATEGY", "none (default), attention, layernorm, epilogue, projections, "
                                 "elementwise or all; combine with '+'"},
        {"--report", nullptr, "print what fused and why the rest did not (also DIR/report.json)"},
        {"--train", nullptr, "a training build: @loss and its gradient @loss_grad (the fused "
                             "backward), for tf_model_train_step"},
        {"--max-batch", "N", "maximum batch size (default 8; MLIR input: its own)"},
        {"--max-seq-len", "N", "maximum sequence length (default: the config's max_seq_len)"},
        {"--max-beam", "K", "decoding entries: beams per sentence the cache holds (default 4; "
                            "its rows are max-batch · max-beam)"}},
       runCompile},
      {"run", "run DIR --inputs IN.safetensors --outputs OUT.safetensors [options]",
       "Runs an entry point of a compiled model on named input tensors.",
       {{"--inputs", "FILE", "input tensors (safetensors), named as in manifest.json"},
        {"--outputs", "FILE", "where to write the output tensors (safetensors)"},
        {"--backend", "NAME", "compiled (default): DIR/libmodel.so; reference: the fp64 interpreter"},
        {"--threads", "T", "compiled: threads (default: one per hardware thread)"},
        {"--device", "N", "a model compiled with --target cuda: the GPU it runs on (default 0)"},
        {"--weights", "FILE", "weights (safetensors); random from --seed when absent"},
        {"--seed", "N", "seed of the random weights (default 0)"},
        {"--entry", "NAME", "entry point (default forward)"},
        {"--f64-outputs", nullptr, "write float outputs as F64, as the reference backend computes them"}},
       runRun},
      {"bench", "bench gemm|attention|model MODEL|train MODEL|decode MODEL [options]",
       "Measures a kernel: GFLOP/s and the fraction of this machine's FMA peak, probed in\n"
       "the same run. Attention counts 4·B·H·Sq·Sk·D flops, halved when causal.\n"
       "`bench model MODEL` compiles the model once per fusion strategy and times its\n"
       "forward pass: median and min latency, arena, kernel calls, GFLOP/s (all matmul\n"
       "FLOPs, causal attention counted in full). `bench train MODEL` times the compiled\n"
       "train step (forward, loss, backward, Adam) per strategy on --batch-tokens of\n"
       "--seq-len sequences: tokens/s and GFLOP/s (3x forward's). `bench decode MODEL` compiles an\n"
       "encoder_decoder with its KV cache and times translating random sources: exactly\n"
       "--new-tokens per sentence (EOS ignored), tokens/s of the whole request, encode included.",
       {{"--m", "M", "gemm: rows of A and C (default 1024)"},
        {"--n", "N", "gemm: columns of B and C (default 1024)"},
        {"--k", "K", "gemm: the contraction (default 1024)"},
        {"--epilogue", "E", "gemm: none, bias, relu, gelu, gelu_tanh, silu or residual"},
        {"--pack-per-call", nullptr, "gemm: pack B in every timed call (a product of two "
                                     "activations) instead of once (a weight)"},
        {"--batch", "B", "attention, decode: batch (default 1); model: batch (default 8)"},
        {"--new-tokens", "N", "decode: tokens generated per sentence (default 32)"},
        {"--beam", "K", "decode: beam size (default 1)"},
        {"--recompute", nullptr, "decode: also time greedy by recomputing the prefix each step"},
        {"--weights", "FILE", "decode: weights (safetensors; default random)"},
        {"--src-len", "S", "model: source length (default 64); decode: source ids (default 24)"},
        {"--tgt-len", "T", "model: target length (default 64)"},
        {"--fusion", "LIST", "model: strategies, comma-separated (default "
                             "none,attention,layernorm,epilogue,projections,all); decode: one "
                             "(default all)"},
        {"--cxx", "PATH", "model: C++ compiler for the artifacts"},
        {"--keep-artifacts", "DIR", "model, train: keep each strategy's artifact in DIR/STRATEGY "
                                    "(to profile what was timed)"},
        {"--batch-tokens", "N", "train: padded tokens per batch (default 3000)"},
        {"--seq-len", "L", "train: source and target length (default 32)"},
        {"--heads", "H", "attention: heads (default 8)"},
        {"--seq", "S", "attention: query length (default 512)"},
        {"--kv-seq", "S2", "attention: key length (default: --seq)"},
        {"--head-dim", "D", "attention: head size (default 64)"},
        {"--causal", nullptr, "attention: causal mask, bottom-right aligned"},
        {"--unfused", nullptr, "attention: QKᵀ GEMM, masked softmax, ·V GEMM instead of fused"},
        {"--threads", "T", "threads (default 1; model: one per hardware thread)"},
        {"--min-seconds", "S", "measure for at least this long (default 0.5; model: 2)"},
        {"--isa", "TARGET", "dispatch to this Highway target instead of the best (AVX3, AVX2, "
                            "SSE4, ...; also $TRANSFUSE_ISA)"},
        {"--json", nullptr, "print one JSON object (with a gflops field)"}},
       runBench},
      {"train", "train CONFIG.json --src-train F [--tgt-train F] [options]",
       "Trains a built-in architecture on sentence pairs (decoder_only: lines): text through\n"
       "a joint SentencePiece BPE vocabulary trained first, or lines of ids; plain or .gz.\n"
       "Batches of at most --batch-tokens padded tokens, bucketed by length and shuffled\n"
       "per epoch by the seed; cross-entropy with label smoothing, Adam at the paper's\n"
       "rate; compiled with the fusion strategy (or on the fp64 reference backend).\n"
       "Validation and a checkpoint at each epoch's end; docs/training.md.",
       {{"--src-train", "FILE", "sources (decoder_only: the lines), one sentence per line"},
        {"--tgt-train", "FILE", "targets, one per source (encoder_decoder)"},
        {"--src-valid", "FILE", "validation sources: loss and perplexity at each epoch's end"},
        {"--tgt-valid", "FILE", "validation targets, one per source"},
        {"--valid-bleu", nullptr, "also greedy BLEU on the validation set (13a, as sacreBLEU)"},
        {"--tokenizer", "KIND", "sentencepiece (text; trained on the training data) or ids "
                                "(lines of ids; the default)"},
        {"--vocab-size", "N", "sentencepiece: pieces (default 8000); the config's vocabulary "
                              "sizes follow it"},
        {"--skip-long", nullptr, "drop pairs over max_seq_len (and say how many) instead of "
                                 "failing"},
        {"--init-weights", "FILE", "initial weights (safetensors); random from --seed when absent"},
        {"--epochs", "N", "train N epochs (default 1 when neither --steps nor --time-limit)"},
        {"--steps", "N", "stop at step N (the run's total, resumed runs included)"},
        {"--time-limit", "MIN", "stop after MIN minutes of wall time since the start"},
        {"--batch-tokens", "N", "padded tokens per batch, source or target side (default 4096)"},
        {"--max-sentences", "N", "at most N sentences per batch (default: no limit)"},
        {"--batching", "HOW", "bucket (by length, shuffled per epoch: the default) or file "
                              "(consecutive lines, every epoch alike)"},
        {"--accumulate", "K", "K consecutive batches are the micro-batches of one step: the loss "
                              "and gradients are their tokens' mean (default 1)"},
        {"--warmup", "N", "warmup steps of the learning rate (default 4000)"},
        {"--lr-factor", "X", "factor of the learning rate (default 1)"},
        {"--label-smoothing", "X", "label smoothing (default 0.1)"},
        {"--dropout", "X", "dropout rate (default: the config's)"},
        {"--clip-norm", "X", "clip the gradients' global norm to X (default: no clipping)"},
        {"--weight-decay", "X", "AdamW's decoupled weight decay (default 0)"},
        {"--seed", "S", "seed of the random weights, the batches and the dropout masks "
                        "(default 0)"},
        {"--log-json", "FILE", "one JSON object per step (step, loss, lr, tokens, tokens_per_s, "
                               "grad_norm) and per validation (epoch, valid_loss, valid_bleu)"},
        {"--no-progress", nullptr, "plain log lines even on a terminal"},
        {"--grads-out", "FILE", "the first step's gradients (safetensors, grad.<name>: F64 from "
                                "the reference, F32 compiled)"},
        {"--checkpoint-dir", "DIR", "the run's directory: config, tokenizer, a checkpoint at each "
                                    "epoch's end and at the last step (reference backend: "
                                    "DIR/model.safetensors)"},
        {"--save-every", "N", "also a checkpoint every N steps"},
        {"--keep", "N", "keep the last N checkpoints (and the best by validation loss)"},
        {"--resume", nullptr, "continue the run in --checkpoint-dir from its newest whole "
                              "checkpoint, bit for bit"},
        {"--backend", "B", "compiled (default: the compiled train step) or reference (fp64)"},
        {"--fusion", "STRATEGY", "compiled: the fusion strategy of forward and backward "
                                 "(default all)"},
        {"--threads", "N", "compiled: threads (default: one per core)"},
        {"--target", "NAME", "compiled: cpu (default) or cuda (the train step and Adam on a GPU)"},
        {"--device", "N", "--target cuda: the GPU it runs on (default 0)"}},
       runTrain},
      {"average-checkpoints", "average-checkpoints DIR --last N -o OUT",
       "Averages the weights of the last N whole checkpoints of a training run's directory\n"
       "(the paper's last 5 or 20) into the checkpoint OUT; `translate DIR --checkpoint\n"
       "averaged` reads DIR/averaged.",
       {{"--last", "N", "how many (default 5)"},
        {"-o", "OUT", "the averaged checkpoint (a directory, replaced atomically)"}},
       runAverageCheckpoints},
      {"translate", "translate DIR [options] < SOURCES",
       "Translates with a compiled encoder_decoder's KV cache: one source of space-separated\n"
       "ids per line (stdin by default, without BOS/EOS: the config's conventions add them),\n"
       "one output of ids per line. DIR may be a training run's checkpoint directory: then\n"
       "text in and out through its tokenizer, the model compiled on first use and cached\n"
       "there. Greedy by default; beam search with the paper's length penalty; sampling.\n"
       "Every line is translated before anything is printed.",
       {{"--checkpoint", "WHICH", "checkpoint directories: best (by validation loss; the "
                                  "default), last, averaged, or a checkpoint's name"},
        {"--weights", "FILE", "weights (safetensors); random from --weights-seed when absent"},
        {"--weights-seed", "N", "seed of the random weights (default 0)"},
        {"--input", "FILE", "sources (default: stdin)"},
        {"--beam", "K", "beam size (default 1: greedy)"},
        {"--alpha", "A", "length penalty ((5 + len) / 6)^A (default 0: none; the paper: 0.6)"},
        {"--max-len", "N", "at most N output tokens, EOS not counted (default: source length + 50, "
                           "capped by the cache)"},
        {"--min-len", "N", "no EOS before N output tokens (default 0)"},
        {"--n-best", "N", "print 'i ||| ids ||| score' for the N best (score: normalized "
                          "log-probability)"},
        {"--scores", nullptr, "n-best format with the raw log-probability appended"},
        {"--prefix-ids", "FILE", "forced output prefixes, one line of ids per source"},
        {"--no-repeat-ngram", "N", "never repeat an n-gram of N tokens"},
        {"--repetition-penalty", "X", "divide (or multiply, when negative) logits of output "
                                      "tokens by X"},
        {"--sample", nullptr, "sample instead of searching (beam 1)"},
        {"--temperature", "T", "--sample: softmax temperature (default 1)"},
        {"--top-k", "K", "--sample: the K likeliest tokens only (default: all)"},
        {"--top-p", "P", "--sample: the smallest set with probability P (default 1)"},
        {"--seed", "S", "--sample: seed; with the line index it keys the draws (default 0)"},
        {"--batch-size", "B", "sources per batch (default: what the artifact's rows allow, "
                              "up to 32)"},
        {"--threads", "T", "threads (default: one per hardware thread)"},
        {"--device", "N", "a model compiled with --target cuda: the GPU it runs on (default 0)"}},
       runTranslate},
      {"generate", "generate DIR (--prompt-ids \"IDS\" | --prompt-file FILE) --max-new N [options]",
       "Continues prompts with a compiled decoder_only model's KV cache: one prompt of\n"
       "space-separated ids (used as given) per line, the new ids per line. Greedy by default,\n"
       "sampling with --sample, beams with --beam. Prompts decode in batches of one length.",
       {{"--weights", "FILE", "weights (safetensors); random from --weights-seed when absent"},
        {"--weights-seed", "N", "seed of the random weights (default 0)"},
        {"--prompt-ids", "IDS", "one prompt"},
        {"--prompt-file", "FILE", "prompts, one per line"},
        {"--max-new", "N", "tokens to generate per prompt (at most; EOS ends one early)"},
        {"--eos-id", "E", "end of sequence (default: the config's eos_id; none: exactly N)"},
        {"--min-len", "N", "no EOS before N new tokens"},
        {"--beam", "K", "beam size (default 1: greedy)"},
        {"--alpha", "A", "beam search's length penalty exponent (default 0)"},
        {"--n-best", "N", "continuations per prompt (one line each; default 1)"},
        {"--no-repeat-ngram", "N", "never repeat an n-gram of N tokens"},
        {"--repetition-penalty", "X", "divide (or multiply, when negative) logits of tokens "
                                      "already output by X"},
        {"--sample", nullptr, "sample instead of searching (beam 1)"},
        {"--temperature", "T", "--sample: softmax temperature (default 1)"},
        {"--top-k", "K", "--sample: the K likeliest tokens only (default: all)"},
        {"--top-p", "P", "--sample: the smallest set with probability P (default 1)"},
        {"--seed", "S", "--sample: seed; with the line index it keys the draws (default 0)"},
        {"--batch-size", "B", "prompts per batch (default: what the artifact's rows allow, "
                              "up to 32)"},
        {"--threads", "T", "threads (default: one per hardware thread)"},
        {"--device", "N", "a model compiled with --target cuda: the GPU it runs on (default 0)"}},
       runGenerate},
      {"score", "score DIR --input SRC --targets TGT [options]",
       "Forced decoding: for each source and target (lines of ids without BOS/EOS), the\n"
       "total log-probability of the target with its EOS, then each token's:\n"
       "'total ||| lp1 lp2 ... lpEOS'.",
       {{"--input", "FILE", "sources"},
        {"--targets", "FILE", "targets, one per source"},
        {"--weights", "FILE", "weights (safetensors); random from --weights-seed when absent"},
        {"--weights-seed", "N", "seed of the random weights (default 0)"},
        {"--batch-size", "B", "pairs per batch (default: up to 32)"},
        {"--threads", "T", "threads (default: one per hardware thread)"},
        {"--device", "N", "a model compiled with --target cuda: the GPU it runs on (default 0)"}},
       runScore},
      {"stress", "stress DIR|MODEL... [options]",
       "Runs compiled models (directories, or definitions compiled first with fusion all)\n"
       "from many threads at once on inputs of mixed sizes with bad inputs interleaved:\n"
       "every good result must equal the serial one bit for bit, every bad input must be\n"
       "refused naming the tensor, and the models must work afterwards.",
       {{"--threads", "T", "threads running at once (default 8)"},
        {"--runs", "N", "runs per thread (default 1000)"},
        {"--bad-every", "K", "about one run in K has a bad input (default 8)"},
        {"--lifecycle", "N", "then create, run and destroy the first model N times, and load a "
                             "bad weights file N times (default 0)"},
        {"--model-threads", "T", "each model's own threads (default 1)"},
        {"--seed", "N", "seed of weights, inputs and the runs' order (default 0)"},
        {"--max-batch", "N", "definitions: maximum batch (default 4)"},
        {"--max-seq-len", "N", "definitions: maximum sequence length (default 16)"},
        {"--cxx", "PATH", "definitions: C++ compiler for the artifacts"}},
       runStress},
      {"export-kernel",
       "export-kernel attention|decode_attention|add_layer_norm|linear|gemm|softmax [options] -o DIR",
       "Writes one kernel of the library, specialized to a shape and options, as a source\n"
       "pair an app embeds: DIR/NAME.h (a C function, its formula, shapes, layout and\n"
       "threading), DIR/NAME.cc (the kernel library's own code; needs only Highway) and\n"
       "DIR/NAME_test.cc (checks it against a scalar reference). docs/export.md.",
       {{"-o", "DIR", "output directory (created if missing)"},
        {"--name", "NAME", "C symbol and file stem (default tf_KIND)"},
        {"--dtype", "TYPE", "f32 (the only one so far)"},
        {"--batch", "B", "attention kinds: batch (default 1)"},
        {"--heads", "H", "attention kinds: heads (default 1)"},
        {"--seq-q", "S", "attention kinds: queries per sequence"},
        {"--seq-k", "S", "attention: keys (default --seq-q); decode_attention: the cache's "
                         "capacity (the call gives the keys cached so far)"},
        {"--head-dim", "D", "attention kinds: head dimension (1..256)"},
        {"--causal", nullptr, "attention kinds: query i sees keys j <= i + Sk - Sq"},
        {"--mask", "KIND", "attention kinds: none (default), key_padding (lengths per batch "
                           "row) or additive (attention: added to the scores)"},
        {"--rows", "N", "add_layer_norm, softmax: rows; gemm, linear: M"},
        {"--cols", "N", "add_layer_norm, softmax: row width"},
        {"--k", "K", "gemm, linear: the inner dimension"},
        {"--n", "N", "gemm, linear: output columns"},
        {"--epilogue", "LIST", "gemm, linear: bias, relu|gelu|gelu_tanh|silu, residual (comma-separated)"},
        {"--epsilon", "X", "add_layer_norm: epsilon (default 1e-5)"}},
       runExportKernel},
      {"demo", "demo [options]",
       "Builds the paper's base Transformer (embedded config), draws random weights and\n"
       "tokens, and runs one forward pass on the reference backend, printing what it did.",
       {{"--model", "FILE", "another model definition instead of the base Transformer"},
        {"--batch", "B", "batch size (default 2)"},
        {"--src-len", "S", "source length (default 12)"},
        {"--tgt-len", "T", "target length (default 10)"},
        {"--seed", "N", "seed of weights and tokens (default 0)"}},
       runDemo},
  };
  auto topHelp = [&](llvm::raw_ostream &os) {
    os << "usage: transfuse COMMAND [options]   (transfuse COMMAND --help for details)\n\n"
          "commands:\n";
    for (const Command &c : commands)
      os << "  " << llvm::left_justify(c.name, 10) << llvm::StringRef(c.summary).split('\n').first
         << "\n";
  };
  if (argc < 2) {
    topHelp(llvm::errs());
    return 1;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    topHelp(llvm::outs());
    return 0;
  }
  auto cmd = llvm::find_if(commands, [&](const Command &c) { return name == c.name; });
  if (cmd == commands.end())
    die("unknown command '" + name + "' (try transfuse --help)");

  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      printHelp(*cmd);
      return 0;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    std::string value;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto spec = llvm::find_if(cmd->flags, [&](const FlagSpec &f) { return arg == f.name; });
    if (spec == cmd->flags.end())
      die("unknown flag '" + arg + "' for '" + name + "' (try transfuse " + name + " --help)");
    if (spec->metavar && value.empty()) {
      if (i + 1 >= argc)
        die("flag " + arg + " needs a value (" + spec->metavar + ")");
      value = argv[++i];
    }
    flags[arg] = value;
  }
  return cmd->run(positional, flags);
}
