//===- TrainCommands.cpp - transfuse train -------------------------------===//
//
// The minimal training driver (docs/training.md): lines of ids into batches
// by padded tokens, a training build of the config differentiated by
// --transfuse-autodiff, and the reference backend's train step
// (codegen/reference/Train.h, --backend reference) or the compiled train
// step (--backend compiled, the default: the config compiled with --train
// and the fusion strategy, run through tf_model_accumulate_gradients and
// tf_model_apply_gradients) per batch, logged per step as JSON lines; the
// weights written after the last step.
//
//===----------------------------------------------------------------------===//

#include "tools/TrainCommands.h"

#include "codegen/reference/Train.h"
#include "runtime/host/CompiledModel.h"
#include "ir/TransfuseDialect.h"
#include "models/Models.h"
#include "runtime/Safetensors.h"
#include "tools/Cli.h"
#include "tools/DecodeCommands.h"
#include "tools/ModelTools.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <optional>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::tools;
namespace rt = ::transfuse::rt;

namespace {

/// One example as the model reads it (the token conventions of
/// models/README.md): encoder_decoder: [BOS] src EOS, BOS tgt, tgt EOS;
/// decoder_only: [BOS] line as input, the same shifted by one (+ EOS) as labels.
struct Example {
  std::vector<int32_t> src, in, labels;
};

std::vector<Example> examples(const ModelConfig &c, const std::vector<std::vector<int32_t>> &src,
                              const std::vector<std::vector<int32_t>> &tgt) {
  std::vector<Example> out;
  auto need = [&](const std::optional<int64_t> &id, const char *key) {
    if (!id)
      die(llvm::Twine("training needs the config's ") + key);
    return (int32_t)*id;
  };
  for (size_t i = 0; i < src.size(); ++i) {
    Example e;
    if (c.isDecoderOnly()) {
      std::vector<int32_t> seq;
      if (c.bosId)
        seq.push_back((int32_t)*c.bosId);
      seq.insert(seq.end(), src[i].begin(), src[i].end());
      if (c.eosId)
        seq.push_back((int32_t)*c.eosId);
      if (seq.size() < 2)
        die("line " + llvm::Twine(i + 1) + ": fewer than 2 tokens to train on");
      e.in.assign(seq.begin(), seq.end() - 1);
      e.labels.assign(seq.begin() + 1, seq.end());
    } else {
      const int32_t bos = need(c.bosId, "bos_id"), eos = need(c.eosId, "eos_id");
      if (c.sourceBos)
        e.src.push_back(bos);
      e.src.insert(e.src.end(), src[i].begin(), src[i].end());
      e.src.push_back(eos);
      e.in.push_back(bos);
      e.in.insert(e.in.end(), tgt[i].begin(), tgt[i].end());
      e.labels.assign(tgt[i].begin(), tgt[i].end());
      e.labels.push_back(eos);
    }
    out.push_back(std::move(e));
  }
  return out;
}

/// Consecutive examples while the padded tokens (source or target side,
/// whichever is larger) stay within `batchTokens`; an example over it alone.
std::vector<std::pair<size_t, size_t>> batches(const std::vector<Example> &ex, int64_t batchTokens) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0;
  int64_t srcLen = 0, tgtLen = 0;
  for (size_t i = 0; i < ex.size(); ++i) {
    int64_t s = std::max<int64_t>(srcLen, ex[i].src.size()), t = std::max<int64_t>(tgtLen, ex[i].in.size());
    if (i > begin && (int64_t)(i - begin + 1) * std::max(s, t) > batchTokens) {
      out.push_back({begin, i});
      begin = i;
      s = ex[i].src.size();
      t = ex[i].in.size();
    }
    srcLen = s;
    tgtLen = t;
  }
  if (begin < ex.size())
    out.push_back({begin, ex.size()});
  return out;
}

rt::Tensor padded(const std::vector<Example> &ex, size_t begin, size_t end,
                  std::vector<int32_t> Example::*field, int32_t pad) {
  size_t width = 0;
  for (size_t i = begin; i < end; ++i)
    width = std::max(width, (ex[i].*field).size());
  rt::Tensor t = rt::Tensor::zeros(rt::DType::I32, {(int64_t)(end - begin), (int64_t)width});
  int32_t *p = t.data<int32_t>();
  for (size_t i = begin; i < end; ++i) {
    const auto &row = ex[i].*field;
    std::fill_n(p + (i - begin) * width, width, pad);
    std::copy(row.begin(), row.end(), p + (i - begin) * width);
  }
  return t;
}

} // namespace

int tools::runTrain(const std::vector<std::string> &positional,
                    const std::map<std::string, std::string> &flags) {
  if (positional.size() != 1)
    die("train expects one config (JSON)");
  const std::string backend = flag(flags, "--backend", "compiled");
  if (backend != "compiled" && backend != "reference")
    die("--backend " + backend + " is not one of compiled, reference");
  const bool compiled = backend == "compiled";
  if (flag(flags, "--tokenizer", "ids") != "ids")
    die("--tokenizer " + flag(flags, "--tokenizer") + " is not supported: lines of ids only ('ids')");
  if (!compiled)
    for (const char *f : {"--threads", "--fusion"})
      if (flags.count(f))
        die(llvm::Twine(f) + " applies to --backend compiled");
  auto text = llvm::MemoryBuffer::getFile(positional[0], /*IsText=*/true);
  if (!text)
    die("cannot read '" + positional[0] + "': " + text.getError().message());
  ModelConfig config = orDie(parseModelConfig((*text)->getBuffer(), positional[0]));
  config.dropout = floatFlag(flags, "--dropout", config.dropout,
                             [](double v) { return v >= 0 && v < 1; }, "a rate in [0, 1)");

  const std::string srcPath = flag(flags, "--src-train"), tgtPath = flag(flags, "--tgt-train");
  if (srcPath.empty() || (!config.isDecoderOnly() && tgtPath.empty()))
    die(config.isDecoderOnly() ? "train needs --src-train (lines of ids)"
                               : "train needs --src-train and --tgt-train (lines of ids)");
  std::vector<std::vector<int32_t>> src = readIdLines(srcPath), tgt;
  if (!config.isDecoderOnly()) {
    tgt = readIdLines(tgtPath);
    if (tgt.size() != src.size())
      die(srcPath + " has " + llvm::Twine(src.size()) + " lines but " + tgtPath + " has " +
          llvm::Twine(tgt.size()));
  }
  if (src.empty())
    die(srcPath + ": no lines to train on");
  const int64_t batchTokens = intFlag(flags, "--batch-tokens", 4096, 1, INT64_MAX);
  const int32_t pad = config.padId ? (int32_t)*config.padId : -100;
  // Ids in the vocabulary, and never the padding id, named by file and line.
  auto checkIds = [&](const std::vector<std::vector<int32_t>> &lines, const std::string &path,
                      int64_t vocab) {
    for (size_t i = 0; i < lines.size(); ++i)
      for (int32_t id : lines[i]) {
        if (id < 0 || id >= vocab)
          die(path + ": line " + llvm::Twine(i + 1) + ": id " + llvm::Twine(id) +
              " is outside the vocabulary [0, " + llvm::Twine(vocab) + ")");
        if (config.padId && id == pad)
          die(path + ": line " + llvm::Twine(i + 1) + " holds the padding id " + llvm::Twine(pad));
      }
  };
  checkIds(src, srcPath, config.isDecoderOnly() ? config.tgtVocabSize : config.srcVocabSize);
  checkIds(tgt, tgtPath, config.tgtVocabSize);
  std::vector<Example> ex = examples(config, src, tgt);
  auto plan = batches(ex, batchTokens);
  int64_t maxBatch = 1, maxLen = 1;
  for (auto [b, e] : plan)
    maxBatch = std::max<int64_t>(maxBatch, e - b);
  for (size_t i = 0; i < ex.size(); ++i) {
    const int64_t s = ex[i].src.size(), t = ex[i].in.size();
    if (std::max(s, t) > config.maxSeqLen)
      die((s >= t ? srcPath : tgtPath) + ": line " + llvm::Twine(i + 1) + ": " +
          llvm::Twine(std::max(s, t)) + " tokens with the specials, over the config's max_seq_len " +
          llvm::Twine(config.maxSeqLen));
    maxLen = std::max({maxLen, s, t});
  }

  BuildOptions build;
  build.training = true;
  build.decoding = false;
  build.maxBatch = maxBatch;
  build.maxSeqLen = maxLen;
  build.labelSmoothing = floatFlag(flags, "--label-smoothing", 0.1,
                                   [](double v) { return v >= 0 && v <= 1; }, "a value in [0, 1]");
  MLIRContext context;
  auto module = orDie(buildModel(context, config, build));
  const uint64_t seed = (uint64_t)intFlag(flags, "--seed", 0, 0, INT64_MAX);
  const std::string initWeights = flag(flags, "--init-weights");
  // The reference: @loss_grad of the unfused loss in fp64. Compiled: the
  // fused graph differentiated and compiled, weights held by the model
  // (the same seeded draw as the reference's without --init-weights).
  func::FuncOp lossGrad;
  std::optional<reference::TrainState> state;
  std::optional<TemporaryDirectory> artifact;
  std::unique_ptr<rt::CompiledModel> model;
  if (compiled) {
    FusionStrategy strategy = orDie(FusionStrategy::parse(flag(flags, "--fusion", "all")));
    artifact.emplace(orDie(TemporaryDirectory::create("transfuse-train")));
    cpu::BuildOptions toolchain;
    orDie(compileModule(*module, strategy, artifact->path(), Emit::kShared, toolchain, nullptr,
                        /*train=*/true));
    rt::LoadOptions load;
    load.weightsPath = initWeights;
    load.seed = seed;
    load.threads = (int)intFlag(flags, "--threads", 0, 0, 1024);
    model = orDie(rt::CompiledModel::load(artifact->path() + "/libmodel.so", load));
  } else {
    PassManager pm(&context);
    pm.addPass(createTransfuseAutodiff());
    buildCleanupPipeline(pm);
    if (failed(pm.run(*module)))
      die("differentiating the loss of '" + positional[0] + "' failed");
    lossGrad = module->lookupSymbol<func::FuncOp>("loss_grad");
    ModelInterface mi = orDie(extractInterface(*module));
    state = reference::startTraining(loadWeights(mi, initWeights, seed));
  }

  reference::AdamOptions adam;
  adam.dModel = config.dModel;
  adam.warmup = intFlag(flags, "--warmup", 4000, 1, INT64_MAX);
  adam.lrFactor = floatFlag(flags, "--lr-factor", 1.0, [](double v) { return v > 0; }, "a number > 0");
  adam.clipNorm = floatFlag(flags, "--clip-norm", 0.0, [](double v) { return v >= 0; }, "a number >= 0");
  adam.weightDecay =
      floatFlag(flags, "--weight-decay", 0.0, [](double v) { return v >= 0; }, "a number >= 0");
  const int64_t accumulate = intFlag(flags, "--accumulate", 1, 1, 1 << 20);
  const int64_t steps = intFlag(flags, "--steps",
                                std::max<int64_t>(1, (int64_t)plan.size() / accumulate), 1, INT64_MAX);

  std::unique_ptr<llvm::raw_fd_ostream> log;
  if (std::string path = flag(flags, "--log-json"); !path.empty()) {
    std::error_code ec;
    log = std::make_unique<llvm::raw_fd_ostream>(path, ec);
    if (ec)
      die("cannot write '" + path + "': " + ec.message());
  }
  for (int64_t s = 1; s <= steps; ++s) {
    // --accumulate consecutive batches of the plan are one step's micro-batches.
    std::vector<reference::MicroBatch> micro;
    int64_t tokens = 0;
    for (int64_t k = 0; k < accumulate; ++k) {
      auto [begin, end] = plan[((s - 1) * accumulate + k) % (int64_t)plan.size()];
      reference::MicroBatch mb;
      if (config.isDecoderOnly()) {
        mb.inputs["tokens"] = padded(ex, begin, end, &Example::in, pad < 0 ? 0 : pad);
      } else {
        mb.inputs["src_tokens"] = padded(ex, begin, end, &Example::src, pad);
        mb.inputs["tgt_tokens"] = padded(ex, begin, end, &Example::in, pad);
      }
      mb.inputs["labels"] = padded(ex, begin, end, &Example::labels, pad);
      for (size_t i = begin; i < end; ++i)
        mb.tokens += (int64_t)ex[i].labels.size();
      tokens += mb.tokens;
      micro.push_back(std::move(mb));
    }
    auto t0 = std::chrono::steady_clock::now();
    // Dropout masks are keyed by (seed, step, site): new each step, the same
    // in the forward and in the backward that regenerates them.
    reference::StepResult r;
    if (compiled && s == 1 && flags.count("--grads-out")) {
      // The first step's gradients, from the same entry the step runs: the
      // micro-batches' gradients weighted as the step weighs them (F32).
      for (size_t b = 0; b < micro.size(); ++b) {
        const double w = reference::microBatchWeight(micro, b);
        for (auto &[name, g] : orDie(model->run("loss_grad", micro[b].inputs))) {
          if (name == "loss")
            continue;
          auto [it, fresh] = r.grads.try_emplace(name, rt::Tensor::zeros(rt::DType::F32, g.shape));
          for (int64_t i = 0; i < g.numElements(); ++i)
            it->second.data<float>()[i] += (float)w * g.data<float>()[i];
        }
      }
    }
    if (compiled) {
      for (size_t b = 0; b < micro.size(); ++b) {
        const double w = reference::microBatchWeight(micro, b);
        r.loss += w * orDie(model->accumulateGradients("loss_grad", micro[b].inputs, w, seed));
      }
      r.lr = reference::learningRate(adam, s);
      rt::CompiledModel::TrainOptions o;
      o.learningRate = r.lr;
      o.beta1 = adam.beta1;
      o.beta2 = adam.beta2;
      o.epsilon = adam.eps;
      o.weightDecay = adam.weightDecay;
      o.maxGradNorm = adam.clipNorm;
      r.gradNorm = orDie(model->applyGradients(o));
    } else {
      r = orDie(reference::trainStep(lossGrad, *state, micro, adam, seed));
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s == 1)
      if (std::string path = flag(flags, "--grads-out"); !path.empty()) {
        std::vector<std::pair<std::string, const rt::Tensor *>> list;
        for (const auto &[name, g] : r.grads)
          list.emplace_back(name, &g);
        if (rt::Status st = rt::writeSafetensors(path, list); !st.isOk())
          die(st.message());
      }
    llvm::json::Object row{{"step", s},
                           {"loss", r.loss},
                           {"lr", r.lr},
                           {"tokens", tokens},
                           {"tokens_per_s", tokens / std::max(seconds, 1e-9)},
                           {"grad_norm", r.gradNorm}};
    if (log)
      *log << llvm::json::Value(std::move(row)) << "\n";
    else
      llvm::outs() << llvm::formatv("step {0}: loss {1:f6} lr {2:e3} tokens {3}\n", s, r.loss,
                                    r.lr, tokens);
  }
  if (std::string dir = flag(flags, "--checkpoint-dir"); !dir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(dir))
      die("cannot create '" + dir + "': " + ec.message());
    std::map<std::string, rt::Tensor> f32;
    if (compiled) {
      for (const auto &p : model->params())
        if (p.role == rt::CompiledModel::ParamRole::kWeight)
          f32.emplace(p.name, orDie(model->readParam(p.name, p.role)));
    } else {
      for (const auto &[name, w] : state->weights) {
        rt::Tensor t = rt::Tensor::zeros(rt::DType::F32, w.shape);
        for (int64_t i = 0; i < w.numElements(); ++i)
          t.data<float>()[i] = (float)w.data<double>()[i];
        f32.emplace(name, std::move(t));
      }
    }
    std::vector<std::pair<std::string, const rt::Tensor *>> list;
    for (const auto &[name, t] : f32)
      list.emplace_back(name, &t);
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, "model.safetensors");
    if (rt::Status st = rt::writeSafetensors(path.str().str(), list); !st.isOk())
      die(st.message());
  }
  return 0;
}
