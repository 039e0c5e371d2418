//===- Bench.cpp - fusion strategies and decoding, timed ------------------===//
//
// See Compiler.h: a model compiled once per strategy and its forward pass
// (or train step) timed on random inputs; an encoder_decoder or
// decoder_only compiled with its KV cache and a whole decoding request
// timed, against recomputing the prefix when asked.
//
//===----------------------------------------------------------------------===//

#include "compiler/Compiler.h"
#include "compiler/Support.h"

#include "runtime/host/CompiledModel.h"
#include "runtime/host/Search.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <thread>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::compiler;
namespace rt = ::transfuse::rt;

llvm::Expected<BenchRow> compiler::benchStrategy(StringRef modelPath, const FusionStrategy &strategy,
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
  CompileOptions compileOptions{strategy, Emit::kShared, options.build, options.train};
  auto compiled = compile(**module, dir, compileOptions);
  if (!compiled)
    return compiled.takeError();
  rt::LoadOptions load;
  load.threads = options.threads;
  auto model = fromStatus(rt::CompiledModel::load(dir + "/libmodel.so", load));
  if (!model)
    return model.takeError();
  const std::string timed = options.train ? "loss_grad" : options.entry;
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
  auto flops = fromStatus(
      (*model)->flops(options.train ? "forward" : timed, forwardInputs ? *forwardInputs : *inputs));
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
      return (*model)->runInto(timed, *inputs, outputs);
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

llvm::Expected<DecodeBenchResult> compiler::benchDecode(StringRef modelPath,
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
  auto compiled = compile(**module, dir, CompileOptions{*strategy, Emit::kShared, o.build});
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