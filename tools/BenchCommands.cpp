//===- BenchCommands.cpp - bench and export-kernel ------------------------===//
//
// `transfuse bench gemm|attention|model|train|decode` (kernels against the
// FMA peak probed in the same run; fusion strategies and train steps through
// compiler::benchStrategy; decode in DecodeCommands.cpp) and `transfuse
// export-kernel` (codegen/cpu/KernelExport.h). Their flags are in
// Commands.cpp.
//
//===----------------------------------------------------------------------===//

#include "tools/Commands.h"

#include "bench/lib/AttentionBench.h"
#include "bench/lib/GemmBench.h"
#include "codegen/cpu/KernelExport.h"
#include "compiler/Compiler.h"
#include "runtime/ThreadPool.h"
#include "runtime/host/Checkpoint.h"
#include "runtime/kernels/Int8Gemm.h"
#include "runtime/kernels/Targets.h"
#include "tools/Cli.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::tools;
namespace rt = ::transfuse::rt;
namespace tk = ::transfuse::kernels;

namespace {

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
        name != "--isa" && name != "--keep-artifacts" && !(!train && name == "--entry") &&
        name != "--dtype" &&
        !(train && (name == "--batch-tokens" || name == "--seq-len")))
      die("flag " + name + " does not apply to '" + command + "'");
  compiler::BenchOptions o;
  o.train = train;
  o.batch = intFlag(flags, "--batch", 8, 1, 1 << 12);
  o.srcLen = intFlag(flags, "--src-len", 64, 1, 1 << 16);
  o.tgtLen = intFlag(flags, "--tgt-len", 64, 1, 1 << 16);
  o.entry = flag(flags, "--entry", "forward");
  if (train) {  // a batch of --batch-tokens padded tokens of --seq-len each side
    if (flags.count("--batch") || flags.count("--src-len") || flags.count("--tgt-len"))
      die("bench train sizes its batch with --batch-tokens and --seq-len");
    o.srcLen = o.tgtLen = intFlag(flags, "--seq-len", 32, 1, 1 << 16);
    o.batch = std::max<int64_t>(1, intFlag(flags, "--batch-tokens", 3000, 1, 1 << 24) / o.srcLen);
  }
  o.threads = (int)intFlag(flags, "--threads", 0, 0, 256);
  o.build.cxx = flag(flags, "--cxx");
  setDtype(o.build, train ? dtypeFlag(flags, {"f32", "bf16"})
                          : dtypeFlag(flags, {"f32", "bf16", "int8"}));
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
                 << tk::bestTargetName()
                 << dtypePaths(o.build) << "\n"
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
                           {"dtype", dtypeName(o.build)},
                           {"rows", std::move(rows)}};
    llvm::outs() << llvm::json::Value(std::move(out)) << "\n";
  }
  return 0;
}

} // namespace

int tools::runBench(const std::vector<std::string> &positional,
             const std::map<std::string, std::string> &flags) {
  if (auto it = flags.find("--isa"); it != flags.end()) {
    if (rt::Status s = tk::forceTarget(it->second); !s.isOk())
      die("flag --isa: " + s.message());
    // The artifacts benchmarked apply it when they load (their own kernels).
    ::setenv("TRANSFUSE_ISA", it->second.c_str(), 1);
  }
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
    only({"--m", "--n", "--k", "--epilogue", "--pack-per-call", "--dtype"});
    tk::GemmBenchOptions o;
    o.m = intFlag(flags, "--m", 1024, 1, 1 << 16);
    o.n = intFlag(flags, "--n", 1024, 1, 1 << 16);
    o.k = intFlag(flags, "--k", 1024, 1, 1 << 16);
    o.epilogue = flag(flags, "--epilogue", "none");
    o.packPerCall = flags.count("--pack-per-call");
    o.dtype = flag(flags, "--dtype", "f32");
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

int tools::runExportKernel(const std::vector<std::string> &positional,
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

