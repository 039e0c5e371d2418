//===- ModelTools.cpp - compile, verify and benchmark whole models --------===//

#include "tools/ModelTools.h"

#include "codegen/lowering/Lowering.h"
#include "codegen/reference/Interpreter.h"
#include "ir/State.h"
#include "ir/TransfuseDialect.h"
#include "models/Models.h"
#include "passes/Passes.h"
#include "runtime/Safetensors.h"
#include "runtime/WeightBinding.h"
#include "tools/Cli.h"
#include "runtime/host/CompiledModel.h"
#include "runtime/host/Search.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <cmath>
#include <random>
#include <thread>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::tools;
namespace rt = ::transfuse::rt;

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

template <typename T>
llvm::Expected<T> fromStatus(rt::StatusOr<T> value) {
  if (!value.isOk())
    return error(value.status().message());
  return std::move(*value);
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Removes, on destruction, the files of a failed compile (and the
/// directory, when the compile created it).
struct Cleanup {
  std::string dir;
  bool created = false;
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
                          "report.json"})
      llvm::sys::fs::remove(dir + "/" + f);
  }
};

} // namespace

llvm::Expected<TemporaryDirectory> tools::TemporaryDirectory::create(StringRef prefix) {
  llvm::SmallString<128> dir;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory(prefix, dir))
    return error("cannot create a temporary directory: " + ec.message());
  return TemporaryDirectory(dir.str().str());
}

tools::TemporaryDirectory::~TemporaryDirectory() {
  if (!path_.empty())
    llvm::sys::fs::remove_directories(path_);
}

llvm::Expected<Emit> tools::parseEmit(StringRef name) {
  if (name == "mlir") return Emit::kMlir;
  if (name == "kernels") return Emit::kKernels;
  if (name == "cpp") return Emit::kCpp;
  if (name == "shared") return Emit::kShared;
  if (name == "static") return Emit::kStatic;
  if (name == "exe") return Emit::kExecutable;
  return error("--emit " + name + " is not one of mlir, kernels, cpp, shared, static, exe");
}

llvm::Expected<CompileResult> tools::compileModule(ModuleOp module, const FusionStrategy &strategy,
                                                   StringRef dir, Emit emit,
                                                   const emit::BuildOptions &build,
                                                   FusionReport *report, bool train) {
  auto t0 = std::chrono::steady_clock::now();
  PassManager pm(module.getContext());
  buildCompilePipeline(pm, strategy, report, train);
  std::string diagnostics;
  {
    ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error)
        diagnostics += "\n  " + d.str();
      return success();
    });
    if (failed(pm.run(module)))
      return error("the compile pipeline failed:" + diagnostics);
  }
  auto mi = extractInterface(module);
  if (!mi)
    return mi.takeError();
  if (build.bf16) {
    if (train)
      return error("--dtype bf16 builds inference entries: train with f32 (the default)");
    *mi = emit::bf16Interface(std::move(*mi));
  }
  OwningOpRef<ModuleOp> kernels;
  if (emit != Emit::kMlir) {
    auto lowered = lowerToKernels(module, build.target);
    if (!lowered)
      return lowered.takeError();
    kernels = std::move(*lowered);
  }
  const bool existed = llvm::sys::fs::is_directory(dir);
  std::error_code ec = llvm::sys::fs::create_directories(dir);
  if (ec)
    return error("cannot create '" + dir + "': " + ec.message());
  // The files of an earlier compile into DIR go: a stale libmodel.so must
  // not sit beside a new manifest.
  Cleanup cleanup{dir.str(), /*created=*/!existed};
  cleanup.removeAll();
  llvm::json::Value reportJson = report ? report->toJson() : llvm::json::Value(nullptr);
  if (llvm::Error e = writeMlirArtifact(module, kernels ? *kernels : ModuleOp(), *mi, dir,
                                       strategy.str(), std::move(reportJson)))
    return std::move(e);
  if (emit != Emit::kMlir && emit != Emit::kKernels) {
    auto source = emit::generateSource(*kernels, *mi, strategy.str(), build);
    if (!source)
      return source.takeError();
    emit::BuildOptions options = build;
    if (emit == Emit::kCpp) {
      if (llvm::Error e = emit::writeSources(dir, *source, build))
        return std::move(e);
    } else {
      options.kind = emit == Emit::kStatic      ? emit::ArtifactKind::kStatic
                     : emit == Emit::kExecutable ? emit::ArtifactKind::kExecutable
                                                 : emit::ArtifactKind::kShared;
      if (llvm::Error e = emit::buildArtifact(dir, *source, options))
        return std::move(e);
    }
  }
  cleanup.keep = true;
  return CompileResult{std::move(*mi), secondsSince(t0)};
}

llvm::Expected<std::map<std::string, rt::Tensor>>
tools::randomInputs(ModuleOp module, const EntryPoint &ep, int64_t batch, int64_t srcLen,
                    int64_t tgtLen, uint64_t seed, bool pad) {
  auto func = module.lookupSymbol<func::FuncOp>(ep.name);
  if (!func)
    return error("the model has no entry point '" + ep.name + "'");
  std::mt19937_64 rng(seed);
  std::map<std::string, rt::Tensor> inputs;
  for (auto [i, spec] : llvm::enumerate(ep.inputs)) {
    int64_t len = spec.name == "src_tokens" ? srcLen : tgtLen;
    std::vector<int64_t> shape;
    for (auto [d, size] : llvm::enumerate(spec.shape))
      shape.push_back(size >= 0 ? size : d == 0 ? batch : len);
    for (auto [d, size] : llvm::enumerate(shape))
      if (size > spec.maxShape[d])
        return error("input '" + spec.name + "': size " + llvm::Twine(size) + " of dimension " +
                     llvm::Twine(d) + " is over the compiled maximum " +
                     llvm::Twine(spec.maxShape[d]));
    rt::Tensor t = rt::Tensor::zeros(spec.dtype, shape);
    int64_t n = t.numElements();
    if (spec.dtype == rt::DType::F32) {
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      for (int64_t k = 0; k < n; ++k)
        t.data<float>()[k] = dist(rng);
    } else if (spec.dtype == rt::DType::I32) {
      // The vocabulary: the smallest table this input indexes; padding ids
      // from the masks computed from it.
      Value arg = func.getArgument(i);
      int64_t vocab = INT32_MAX;
      std::optional<int64_t> padId;
      for (Operation *user : arg.getUsers()) {
        if (auto g = dyn_cast<GatherOp>(user))
          vocab = std::min(vocab, g.getTable().getType().getDimSize(0));
        if (auto k = dyn_cast<KeyPaddingMaskOp>(user))
          padId = k.getPadId();
      }
      if (vocab == INT32_MAX)
        vocab = 2;
      std::uniform_int_distribution<int64_t> dist(0, vocab - 1);
      int64_t rows = shape.empty() ? 1 : shape[0], cols = rows ? n / rows : 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          int64_t id = dist(rng);
          if (padId && id == *padId)
            id = (id + 1) % vocab;
          if (pad && padId && r == rows - 1 && rows > 1 && c >= cols - cols / 3)
            id = *padId;
          t.data<int32_t>()[r * cols + c] = (int32_t)id;
        }
    } else if (spec.dtype == rt::DType::Bool) {
      for (int64_t k = 0; k < n; ++k)
        t.data<uint8_t>()[k] = rng() & 1;
    } else {
      return error("input '" + spec.name + "': random " + rt::dtypeName(spec.dtype) +
                   " inputs are not supported");
    }
    inputs[spec.name] = std::move(t);
  }
  return inputs;
}

/// The largest |out - ref| of every output of one call, and of |ref|.
static llvm::Expected<VerifyCase> compareOutputs(const std::map<std::string, rt::Tensor> &got,
                                                 const reference::TensorMap &want,
                                                 VerifyCase c) {
  for (const auto &[name, ref] : want) {
    const rt::Tensor &out = got.at(name);
    if (out.shape != ref.shape)
      return error("output '" + name + "' has shape " + rt::shapeToString(out.shape) +
                   ", the reference " + rt::shapeToString(ref.shape));
    std::vector<float> scratch;  // a bf16 model's outputs as fp32
    const float *outFloats = ref.dtype == rt::DType::F64 ? rt::floatData(out, scratch) : nullptr;
    for (int64_t k = 0; k < ref.numElements(); ++k) {
      double r, o;
      if (ref.dtype == rt::DType::F64) {
        r = ref.data<double>()[k];
        o = outFloats[k];
      } else if (ref.dtype == rt::DType::I32) {
        r = ref.data<int32_t>()[k];
        o = out.data<int32_t>()[k];
      } else {
        r = ref.data<uint8_t>()[k];
        o = out.data<uint8_t>()[k];
      }
      double err = std::isnan(o) != std::isnan(r) ? INFINITY : std::isnan(r) ? 0 : std::fabs(o - r);
      c.maxAbsError = std::max(c.maxAbsError, err);
      c.maxAbsReference = std::max(c.maxAbsReference, std::fabs(r));
    }
  }
  return c;
}

llvm::Expected<VerifyResult> tools::verifyArtifact(ModuleOp module, const ModelInterface &mi,
                                                   StringRef dir, uint64_t seed) {
  rt::LoadOptions load;
  load.seed = seed;
  auto compiled = fromStatus(rt::CompiledModel::load((dir + "/libmodel.so").str(), load));
  if (!compiled)
    return compiled.takeError();
  auto weights = fromStatus(rt::randomWeights(mi.params, seed));
  if (!weights)
    return weights.takeError();
  // One token, a short batch with padding, and the longest sizes (kept
  // small: the reference backend is a plain fp64 interpreter).
  constexpr size_t kCases = 3;
  auto sizesFor = [](const EntryPoint &ep) {
    int64_t maxB = 1, maxS = 1;
    for (const rt::TensorSpec &s : ep.inputs)
      for (auto [d, size] : llvm::enumerate(s.shape))
        if (size < 0)
          (d == 0 ? maxB : maxS) = std::max(d == 0 ? maxB : maxS, s.maxShape[d]);
    return std::array<std::array<int64_t, 3>, kCases>{
        {{1, 1, 1},
         {std::min<int64_t>(3, maxB), std::min<int64_t>(7, maxS), std::min<int64_t>(5, maxS)},
         {std::min<int64_t>(2, maxB), std::min<int64_t>(16, maxS), std::min<int64_t>(13, maxS)}}};
  };
  // Entries that use state run per case in the interface's order (encode
  // before decode_step, prefill before decode_step) on one state of each
  // backend, sharing the inputs of one name; each one with outputs runs
  // twice, the second time on the cache the calls before it filled, so up
  // to four calls append and targets take at most a quarter of the
  // capacity.
  std::array<std::unique_ptr<rt::ModelState>, kCases> states;
  std::array<std::optional<reference::State>, kCases> refStates;
  std::array<std::map<std::string, rt::Tensor>, kCases> shared;
  VerifyResult result;
  for (const EntryPoint &ep : mi.entryPoints) {
    if (ep.name == kPrepareFunction)
      continue;
    auto func = module.lookupSymbol<func::FuncOp>(ep.name);
    bool stateful = usesState(func);
    auto sizes = sizesFor(ep);
    for (size_t i = 0; i < kCases; ++i) {
      auto [b, s, t] = sizes[i];
      if (stateful)
        t = std::max<int64_t>(1, std::min(t, sizes[2][2] / 4));
      auto inputs = randomInputs(module, ep, b, s, t, seed + b * 31 + s, /*pad=*/true);
      if (!inputs)
        return inputs.takeError();
      rt::ModelState *state = nullptr;
      reference::State *refState = nullptr;
      if (stateful) {
        if (!states[i]) {
          auto created = fromStatus((*compiled)->createState());
          auto ref = reference::createState(module);
          if (!created)
            return created.takeError();
          if (!ref)
            return ref.takeError();
          states[i] = std::move(*created);
          refStates[i] = std::move(*ref);
        }
        state = states[i].get();
        refState = &*refStates[i];
        for (auto &[name, tensor] : *inputs)
          tensor = shared[i].try_emplace(name, tensor).first->second;
      }
      int calls = stateful && !ep.outputs.empty() ? 2 : 1;
      for (int call = 0; call < calls; ++call) {
        auto got = fromStatus((*compiled)->run(ep.name, *inputs, state));
        if (!got)
          return got.takeError();
        auto want = reference::run(func, *weights, *inputs, /*f64Outputs=*/true, refState);
        if (!want)
          return want.takeError();
        if (ep.outputs.empty())
          continue; // what it wrote, the next entry's outputs show
        auto c = compareOutputs(*got, *want, VerifyCase{ep.name, call, b, s, t, 0, 0});
        if (!c)
          return c.takeError();
        result.cases.push_back(*c);
        if (i + 1 != kCases || stateful)
          continue;
        // The largest call again, from 4 threads at once: identical bytes.
        std::vector<std::thread> threads;
        std::atomic<bool> same{true};
        for (int k = 0; k < 4; ++k)
          threads.emplace_back([&] {
            for (int r = 0; r < 3; ++r) {
              auto again = (*compiled)->run(ep.name, *inputs);
              if (!again.isOk())
                same = false;
              else
                for (const auto &[name, tensor] : *again)
                  same = same && tensor.bytes == got->at(name).bytes;
            }
          });
        for (std::thread &th : threads)
          th.join();
        result.concurrentRuns += 12;
        result.concurrentIdentical = result.concurrentIdentical && same;
      }
    }
  }
  return result;
}

llvm::Expected<BenchRow> tools::benchStrategy(StringRef modelPath, const FusionStrategy &strategy,
                                              const BenchOptions &options) {
  MLIRContext context;
  ::mlir::transfuse::BuildOptions build;
  build.maxBatch = options.batch;
  build.maxSeqLen = std::max(options.srcLen, options.tgtLen);
  build.training = options.train;
  build.decoding = !options.train;
  auto module = loadModelDefinition(context, modelPath, build);
  if (!module)
    return module.takeError();
  std::optional<TemporaryDirectory> temp;
  std::string dir;
  if (options.keepDir.empty()) {
    auto made = TemporaryDirectory::create("transfuse-bench");
    if (!made)
      return made.takeError();
    temp.emplace(std::move(*made));
    dir = temp->path();
  } else {
    dir = options.keepDir + "/" + strategy.str();
    if (std::error_code ec = llvm::sys::fs::create_directories(dir))
      return error("cannot create " + dir + ": " + ec.message());
  }
  auto compiled = compileModule(**module, strategy, dir, Emit::kShared, options.build, nullptr,
                                options.train);
  if (!compiled)
    return compiled.takeError();
  rt::LoadOptions load;
  load.threads = options.threads;
  auto model = fromStatus(rt::CompiledModel::load(dir + "/libmodel.so", load));
  if (!model)
    return model.takeError();
  const std::string timed = options.train ? "loss_grad" : "forward";
  auto inputsOf = [&](StringRef name) -> llvm::Expected<std::map<std::string, rt::Tensor>> {
    for (const EntryPoint &e : compiled->interface.entryPoints)
      if (e.name == name)
        return randomInputs(**module, e, options.batch, options.srcLen, options.tgtLen, 1,
                            /*pad=*/false);
    return error(modelPath + " has no " + name + " entry point");
  };
  auto inputs = inputsOf(timed);
  if (!inputs)
    return inputs.takeError();
  std::optional<std::map<std::string, rt::Tensor>> forwardInputs; // FLOPs: forward's
  if (options.train) {
    auto f = inputsOf("forward");
    if (!f)
      return f.takeError();
    forwardInputs = std::move(*f);
  }
  BenchRow row;
  row.strategy = strategy.str();
  row.compileSeconds = compiled->seconds;
  row.arenaBytes = (*model)->arenaBytes(timed);
  row.kernelCalls = (*model)->kernelCalls(timed);
  auto flops = fromStatus((*model)->flops("forward", forwardInputs ? *forwardInputs : *inputs));
  if (!flops)
    return flops.takeError();
  row.gflop = (options.train ? 3.0 : 1.0) * *flops / 1e9;
  // Outputs are allocated once, as a serving loop would; two warm-up runs
  // touch the arena and the outputs. A train step at a small rate (the
  // weights change, the work does not).
  std::map<std::string, rt::Tensor> outputs;
  rt::CompiledModel::TrainOptions adam;
  adam.learningRate = 1e-4;
  auto once = [&]() -> rt::Status {
    if (!options.train)
      return (*model)->runInto("forward", *inputs, outputs);
    auto loss = (*model)->accumulateGradients(timed, *inputs, 1.0, 1);
    if (!loss.isOk())
      return loss.status();
    auto norm = (*model)->applyGradients(adam);
    return norm.isOk() ? rt::Status::ok() : norm.status();
  };
  for (int i = 0; i < 2; ++i)
    if (rt::Status s = once(); !s.isOk())
      return error(s.message());
  std::vector<double> ms;
  auto start = std::chrono::steady_clock::now();
  while ((int)ms.size() < options.minRuns || secondsSince(start) < options.minSeconds) {
    auto t0 = std::chrono::steady_clock::now();
    rt::Status s = once();
    ms.push_back(secondsSince(t0) * 1e3);
    if (!s.isOk())
      return error(s.message());
  }
  std::sort(ms.begin(), ms.end());
  row.runs = (int64_t)ms.size();
  row.minMs = ms.front();
  row.medianMs = ms[ms.size() / 2];
  return row;
}

llvm::Expected<DecodeBenchResult> tools::benchDecode(StringRef modelPath,
                                                     const DecodeBenchOptions &o) {
  MLIRContext context;
  ::mlir::transfuse::BuildOptions build;
  build.maxBatch = o.batch;
  build.maxBeam = o.beam;
  build.maxSeqLen = std::max(o.srcLen + 2, o.newTokens + 1);
  auto module = loadModelDefinition(context, modelPath, build);
  if (!module)
    return module.takeError();
  if ((**module).lookupSymbol<func::FuncOp>("prefill")) { // the prompt and the new tokens
    build.maxSeqLen = o.srcLen + o.newTokens;
    module = loadModelDefinition(context, modelPath, build);
    if (!module)
      return module.takeError();
  }
  auto strategy = FusionStrategy::parse(o.fusion);
  if (!strategy)
    return strategy.takeError();
  auto temp = TemporaryDirectory::create("transfuse-bench-decode");
  if (!temp)
    return temp.takeError();
  const std::string &dir = temp->path();
  auto compiled = compileModule(**module, *strategy, dir, Emit::kShared, o.build, nullptr);
  if (!compiled)
    return compiled.takeError();
  rt::LoadOptions load;
  load.threads = o.threads;
  load.weightsPath = o.weightsPath;
  auto model = fromStatus(rt::CompiledModel::load(dir + "/libmodel.so", load));
  if (!model)
    return model.takeError();
  auto ids = fromStatus(rt::readTokenIds(dir + "/manifest.json"));
  if (!ids)
    return ids.takeError();
  // encoder_decoder: the Translator on random sources; decoder_only: the
  // Generator on random prompts of srcLen ids.
  const bool decoderOnly = !ids->srcVocab;
  const int32_t configEos = ids->eos;
  std::unique_ptr<rt::Translator> translator;
  std::unique_ptr<rt::Generator> generator;
  if (decoderOnly) {
    ids->eos = -1; // exactly newTokens
    auto g = fromStatus(rt::Generator::create(**model, *ids));
    if (!g)
      return g.takeError();
    generator = std::move(*g);
  } else {
    auto t = fromStatus(rt::Translator::create(**model, *ids));
    if (!t)
      return t.takeError();
    translator = std::move(*t);
  }
  // Sources of words only: no special id.
  const int32_t pad = ids->pad, bos = ids->bos, eos = configEos;
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> any(
      0, (int32_t)(decoderOnly ? ids->tgtVocab : ids->srcVocab) - 1);
  std::vector<std::vector<int32_t>> sources(o.batch);
  for (auto &s : sources)
    while ((int64_t)s.size() < o.srcLen)
      if (int32_t w = any(rng); w != pad && w != bos && w != eos)
        s.push_back(w);
  rt::SearchOptions search;
  search.beam = o.beam;
  search.maxLen = (int)o.newTokens;
  search.ignoreEos = true;
  DecodeBenchResult result;
  result.threads = (*model)->threads();
  auto measure = [&](auto request) -> llvm::Expected<std::vector<double>> {
    for (int i = 0; i < 1; ++i) // warm-up: arenas, outputs, the state's pages
      if (llvm::Error e = request())
        return std::move(e);
    std::vector<double> ms;
    auto start = std::chrono::steady_clock::now();
    while ((int)ms.size() < o.minRuns || secondsSince(start) < o.minSeconds) {
      auto t0 = std::chrono::steady_clock::now();
      if (llvm::Error e = request())
        return std::move(e);
      ms.push_back(secondsSince(t0) * 1e3);
    }
    std::sort(ms.begin(), ms.end());
    return ms;
  };
  auto cached = measure([&]() -> llvm::Error {
    auto out = decoderOnly ? generator->generate(sources, search)
                           : translator->translate(sources, search);
    if (!out.isOk())
      return error(out.status().message());
    for (auto &h : *out)
      if (h.empty() || (int64_t)h[0].ids.size() != o.newTokens)
        return error("a decode did not produce exactly " + std::to_string(o.newTokens) + " tokens");
    return llvm::Error::success();
  });
  if (!cached)
    return cached.takeError();
  result.runs = (int64_t)cached->size();
  result.minMs = cached->front();
  result.medianMs = (*cached)[cached->size() / 2];
  result.tokensPerSecond = (double)(o.batch * o.newTokens) / (result.medianMs / 1e3);
  if (!o.recompute)
    return result;
  if (o.beam != 1)
    return error("--recompute times greedy decoding: use it with --beam 1");
  if (decoderOnly)
    return error("--recompute times encoder_decoder models");
  // The full prefix through forward every step, the last position's argmax
  // (EOS and padding excluded, as the search excludes them).
  rt::Tensor src = rt::Tensor::zeros(rt::DType::I32, {o.batch, o.srcLen + 2});
  for (int64_t b = 0; b < o.batch; ++b) {
    std::vector<int32_t> row;
    if (ids->sourceBos)
      row.push_back(ids->bos);
    row.insert(row.end(), sources[b].begin(), sources[b].end());
    row.push_back(ids->eos);
    row.resize(o.srcLen + 2, ids->pad);
    std::copy(row.begin(), row.end(), src.data<int32_t>() + b * (o.srcLen + 2));
  }
  auto again = measure([&]() -> llvm::Error {
    std::vector<std::vector<int32_t>> prefix(o.batch, std::vector<int32_t>{ids->bos});
    std::map<std::string, rt::Tensor> outputs;
    for (int64_t step = 0; step < o.newTokens; ++step) {
      int64_t t = step + 1;
      rt::Tensor tgt = rt::Tensor::zeros(rt::DType::I32, {o.batch, t});
      for (int64_t b = 0; b < o.batch; ++b)
        std::copy(prefix[b].begin(), prefix[b].end(), tgt.data<int32_t>() + b * t);
      if (rt::Status s = (*model)->runInto("forward", {{"src_tokens", src}, {"tgt_tokens", tgt}},
                                           outputs);
          !s.isOk())
        return error(s.message());
      const rt::Tensor &logits = outputs.at("logits");
      int64_t v = logits.shape[2];
      std::vector<float> scratch;
      const float *all = rt::floatData(logits, scratch);
      for (int64_t b = 0; b < o.batch; ++b) {
        const float *row = all + ((b * t) + t - 1) * v;
        int32_t best = -1;
        for (int32_t j = 0; j < v; ++j)
          if (j != ids->eos && j != ids->pad && (best < 0 || row[j] > row[best]))
            best = j;
        prefix[b].push_back(best);
      }
    }
    return llvm::Error::success();
  });
  if (!again)
    return again.takeError();
  result.recomputeMs = (*again)[again->size() / 2];
  result.recomputeTokensPerSecond = (double)(o.batch * o.newTokens) / (result.recomputeMs / 1e3);
  return result;
}

reference::TensorMap tools::loadWeights(const ModelInterface &mi, const std::string &path,
                                        uint64_t seed) {
  if (path.empty())
    return orDie(rt::randomWeights(mi.params, seed));
  rt::SafetensorsFile file = orDie(rt::SafetensorsFile::open(path));
  std::vector<std::string> warnings;
  reference::TensorMap weights = orDie(rt::bindWeights(mi.params, mi.rules, file, &warnings));
  for (const std::string &w : warnings)
    llvm::errs() << "transfuse: warning: " << w << "\n";
  return weights;
}
