//===- Compiler.cpp - the compiler library in Python -----------------------===//
//
// _compile: a definition (a config, MLIR text, a Hugging Face directory or
// an ONNX file, by path) into an artifact directory, as `transfuse compile`
// does, optionally verified against the fp64 reference backend; the result
// (report, interface, verification) as data. _bench_model: one fusion
// strategy timed (compiler::benchStrategy). The GIL is released while the
// compiler works.
//
//===----------------------------------------------------------------------===//

#include "python/src/Bindings.h"

#include "bench/lib/FmaPeak.h"
#include "compiler/Compiler.h"
#include "models/HuggingFace.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Targets.h"

#include "mlir/IR/MLIRContext.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace transfuse::python {
namespace {

using namespace mlir::transfuse;

template <class T>
T checkLlvm(llvm::Expected<T> value) {
  if (!value) throw CompileError(llvm::toString(value.takeError()));
  return std::move(*value);
}
void checkLlvm(llvm::Error e) {
  if (e) throw CompileError(llvm::toString(std::move(e)));
}

nb::dict compile(const std::string& path, const std::string& dir, const std::string& fusion,
                 const std::string& target, const std::string& emit, int64_t maxBatch,
                 int64_t maxSeqLen, int64_t maxBeam, const std::map<std::string, int64_t>& dims,
                 bool train, bool verify, uint64_t seed, double tolerance,
                 const std::string& dtype) {
  compiler::CompileOptions options;
  options.build.target = target;
  if (dtype != "f32" && dtype != "bf16" && dtype != "int8")
    throw CompileError("dtype '" + dtype + "' is not one of f32, bf16, int8");
  options.build.bf16 = dtype == "bf16";
  options.build.int8 = dtype == "int8";
  options.train = train;
  options.emit = checkLlvm(compiler::parseEmit(emit));
  options.strategy = checkLlvm(FusionStrategy::parse(fusion));
  if (isHuggingFaceDirectory(path)) options.sourceDirectory = path;
  checkLlvm(compiler::checkOptions(options));
  if (verify && options.emit != compiler::Emit::kShared)
    throw CompileError("verify runs the compiled library: use it with emit='shared'");
  BuildOptions maxima;
  maxima.maxBatch = maxBatch;
  maxima.maxSeqLen = maxSeqLen;
  maxima.maxBeam = maxBeam;
  maxima.dims = dims;
  std::vector<std::string> warnings;
  maxima.warnings = &warnings;

  nb::dict result;
  std::optional<compiler::Artifact> artifact;
  std::optional<compiler::VerifyResult> verified;
  std::string error;
  {
    nb::gil_scoped_release released;
    mlir::MLIRContext context;
    auto run = [&]() -> llvm::Error {
      auto module = compiler::loadDefinition(context, path, maxima, train, &options.weights);
      if (!module) return module.takeError();
      mlir::OwningOpRef<mlir::ModuleOp> original;
      if (verify) {
        auto ref = compiler::referenceModule(**module, train);
        if (!ref) return ref.takeError();
        original = std::move(*ref);
      }
      auto a = compiler::compile(**module, dir, options);
      if (!a) return a.takeError();
      artifact = std::move(*a);
      if (verify) {
        auto v = compiler::verify(*original, artifact->interface, dir, seed);
        if (!v) return v.takeError();
        verified = std::move(*v);
      }
      return llvm::Error::success();
    };
    if (llvm::Error e = run()) error = llvm::toString(std::move(e));
  }
  if (!error.empty()) throw CompileError("compiling " + path + " failed: " + error);
  result["dir"] = artifact->dir;
  result["product"] = artifact->product;
  result["seconds"] = artifact->seconds;
  result["warnings"] = warnings;
  if (verified) {
    nb::list cases;
    bool ok = true;
    for (const compiler::VerifyCase& c : verified->cases) {
      const double bound = tolerance * std::max(1.0, c.maxAbsReference);
      nb::dict d;
      d["entry"] = c.entry;
      d["step"] = c.step;
      d["batch"] = c.batch;
      d["src_len"] = c.srcLen;
      d["tgt_len"] = c.tgtLen;
      d["max_abs_error"] = c.maxAbsError;
      d["max_abs_reference"] = c.maxAbsReference;
      d["bound"] = bound;
      d["ok"] = c.maxAbsError <= bound;
      ok &= c.maxAbsError <= bound;
      cases.append(d);
    }
    result["verify"] = cases;
    result["concurrent_runs"] = verified->concurrentRuns;
    result["concurrent_identical"] = verified->concurrentIdentical;
    result["verified"] = ok && verified->concurrentIdentical;
  }
  return result;
}

nb::dict benchModel(const std::string& path, const std::string& fusion, int64_t batch,
                    int64_t srcLen, int64_t tgtLen, const std::string& entry, int threads,
                    bool train, double minSeconds, std::optional<std::string> keepDir) {
  compiler::BenchOptions o;
  o.batch = batch;
  o.srcLen = srcLen;
  o.tgtLen = tgtLen;
  o.entry = entry;
  o.threads = threads;
  o.train = train;
  o.minSeconds = minSeconds;
  o.keepDir = keepDir.value_or("");
  FusionStrategy strategy = checkLlvm(FusionStrategy::parse(fusion));
  std::optional<compiler::BenchRow> row;
  std::string error;
  {
    nb::gil_scoped_release released;
    auto r = compiler::benchStrategy(path, strategy, o);
    if (r)
      row = std::move(*r);
    else
      error = llvm::toString(r.takeError());
  }
  if (!error.empty()) throw CompileError(error);
  raisePendingSignals();
  nb::dict d;
  d["strategy"] = row->strategy;
  d["median_ms"] = row->medianMs;
  d["min_ms"] = row->minMs;
  d["compile_seconds"] = row->compileSeconds;
  d["gflop"] = row->gflop;
  d["gflops"] = row->gflop / (row->medianMs / 1e3);
  d["arena_bytes"] = row->arenaBytes;
  d["kernel_calls"] = row->kernelCalls;
  d["runs"] = row->runs;
  d["threads"] = threads > 0 ? threads : rt::ThreadPool::hardwareThreads();
  d["target"] = ::transfuse::kernels::bestTargetName();
  return d;
}

}  // namespace

void bindCompiler(nb::module_& m) {
  m.def("_compile", &compile, nb::arg("path"), nb::arg("dir"), nb::arg("fusion"),
        nb::arg("target"), nb::arg("emit"), nb::arg("max_batch"), nb::arg("max_seq_len"),
        nb::arg("max_beam"), nb::arg("dims"), nb::arg("train"), nb::arg("verify"),
        nb::arg("seed"), nb::arg("tolerance"), nb::arg("dtype"));
  m.def("_bench_model", &benchModel, nb::arg("path"), nb::arg("fusion"), nb::arg("batch"),
        nb::arg("src_len"), nb::arg("tgt_len"), nb::arg("entry"), nb::arg("threads"),
        nb::arg("train"), nb::arg("min_seconds"), nb::arg("keep_dir").none());
  m.def(
      "_fma_peak",
      [] {
        nb::gil_scoped_release released;
        return ::transfuse::kernels::measureFmaPeak().gflops;
      },
      "The FMA peak of one thread in GFLOP/s, probed now (bench/lib/FmaPeak).");
  m.def("_is_huggingface_directory", [](const std::string& p) { return isHuggingFaceDirectory(p); });
}

}  // namespace transfuse::python
