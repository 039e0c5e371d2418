//===- TrainCommands.cpp - transfuse train and average-checkpoints --------===//
//
// The training driver (docs/training.md) over runtime/host's Trainer: what
// it reads (TrainData.h), the config compiled with --train and the fusion
// strategy (or the compiler library's fp64 reference step), validation per
// epoch on a decoding artifact that the weights are copied into, progress,
// logs and the final messages. The loop, batching, checkpoints and resume
// are the Trainer's.
//
//===----------------------------------------------------------------------===//

#include "tools/TrainCommands.h"
#include "tools/TrainData.h"
#include "tools/ImageData.h"

#include "compiler/Compiler.h"
#include "compiler/ReferenceTrainStep.h"
#include "models/HuggingFace.h"
#include "models/Models.h"
#include "runtime/Json.h"
#include "runtime/Safetensors.h"
#include "runtime/host/Checkpoint.h"
#include "runtime/host/CompiledModel.h"
#include "runtime/host/Corpus.h"
#include "runtime/host/ProcessGroup.h"
#include "runtime/host/Search.h"
#include "runtime/host/Tokenizer.h"
#include "runtime/host/Trainer.h"
#include "tools/Bleu.h"
#include "tools/Cli.h"
#include "tools/Commands.h"
#include "tools/DecodeCommands.h"

#ifdef TRANSFUSE_HAVE_MPI
#include "runtime/host/Mpi.h"
#endif

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <optional>
#include <thread>
#include <unistd.h>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::tools;
namespace rt = ::transfuse::rt;
using rt::joinPath;

namespace {

using Clock = std::chrono::steady_clock;

/// The run directory: the resolved config and the tokenizer, once.
void startRunDirectory(const TrainRun &run) {
  if (run.ckptDir.empty() || run.resuming)
    return;
  if (std::error_code ec = llvm::sys::fs::create_directories(run.ckptDir))
    die("cannot create '" + run.ckptDir + "': " + ec.message());
  if (!rt::listCheckpoints(run.ckptDir).empty())
    die("'" + run.ckptDir + "' holds checkpoints of another run: --resume continues it");
  std::string json;
  llvm::raw_string_ostream os(json);
  os << llvm::formatv("{0:2}", configJson(run.config)) << "\n";
  orDie(rt::writeFileAtomically(joinPath(run.ckptDir, rt::kConfigFile), json));
  if (run.tokenizer)
    orDie(run.tokenizer->save(joinPath(run.ckptDir, rt::kTokenizerFile)));
}

/// The step the Trainer drives: the config compiled for training with the
/// fusion strategy (weights held by the model: the seeded draw, the same as
/// the reference's, or --init-weights), or the fp64 reference step.
struct TrainBackend {
  MLIRContext context;
  OwningOpRef<ModuleOp> module; // the training build (the reference step runs it)
  std::optional<compiler::TemporaryDirectory> artifact;
  std::unique_ptr<rt::CompiledModel> model;
  std::unique_ptr<rt::TrainStep> step;
};

/// A training build compiled with --fusion for --target (cuda: the train
/// step and Adam on the GPU, docs/cuda.md) into a temporary artifact that
/// `artifact` holds, loaded with `weights` (empty: the seeded draw),
/// --threads and --device.
std::unique_ptr<rt::CompiledModel>
compileForTraining(ModuleOp module, const Flags &flags, const std::string &weights, uint64_t seed,
                   std::optional<compiler::TemporaryDirectory> &artifact) {
  compiler::CompileOptions options;
  options.strategy = orDie(FusionStrategy::parse(flag(flags, "--fusion", "all")));
  options.build.target = flag(flags, "--target", "cpu");
  setDtype(options.build, dtypeFlag(flags, {"f32", "bf16"}));
  options.train = true;
  if (llvm::Error e = compiler::checkOptions(options))
    die(llvm::toString(std::move(e)));
  artifact.emplace(orDie(compiler::TemporaryDirectory::create("transfuse-train")));
  orDie(compiler::compile(module, artifact->path(), options));
  rt::LoadOptions load;
  load.weightsPath = weights;
  load.seed = seed;
  load.threads = (int)intFlag(flags, "--threads", 0, 0, 1024);
  load.deviceOrdinal = (int)intFlag(flags, "--device", 0, 0, 1023);
  return orDie(rt::CompiledModel::load(artifact->path() + "/libmodel.so", load));
}

void startBackend(TrainBackend &b, const TrainRun &run, const Flags &flags, int64_t maxBatch,
                  uint64_t seed) {
  BuildOptions build;
  build.training = true;
  build.decoding = false;
  build.maxBatch = maxBatch;
  build.maxSeqLen = run.maxLen;
  build.labelSmoothing = floatFlag(flags, "--label-smoothing", 0.1,
                                   [](double v) { return v >= 0 && v <= 1; }, "a value in [0, 1]");
  b.module = orDie(buildModel(b.context, run.config, build));
  ModuleOp module = *b.module;
  const std::string initWeights = flag(flags, "--init-weights");
  if (!run.compiled) {
    ModelInterface mi = orDie(extractInterface(module));
    reference::TensorMap weights = loadWeights(mi, initWeights, seed);
    auto step = compiler::ReferenceTrainStep::create(module, weights);
    if (!step)
      die(run.configPath + ": " + llvm::toString(step.takeError()));
    b.step = std::move(*step);
    return;
  }
  b.model = compileForTraining(module, flags, initWeights, seed, b.artifact);
  b.step = std::make_unique<rt::CompiledTrainStep>(*b.model);
}

/// Validation: the weights copied into a decoding artifact; the loss is
/// the mean negative log-likelihood of the references' tokens (EOS
/// included, no label smoothing), perplexity its exp; with --valid-bleu,
/// greedy translations against the raw references.
class Validator {
public:
  Validator(const TrainRun &run, const Flags &flags) : run_(run) {
    bleu_ = flags.count("--valid-bleu") != 0;
    std::string where = run.ckptDir;
    if (where.empty()) {
      scratch_.emplace(orDie(compiler::TemporaryDirectory::create("transfuse-valid")));
      where = scratch_->path();
    }
    std::string dir = decodeArtifact(run.config, where);
    rt::LoadOptions load;
    load.threads = (int)intFlag(flags, "--threads", 0, 0, 1024);
    decoder_ = orDie(rt::CompiledModel::load(joinPath(dir, "libmodel.so"), load));
    translator_ = orDie(
        rt::Translator::create(*decoder_, orDie(rt::readTokenIds(joinPath(dir, "manifest.json")))));
  }

  rt::StatusOr<rt::Validation> operator()(const rt::TrainStep &step) {
    std::map<std::string, rt::Tensor> weights = orDie(step.weights());
    for (const auto &[name, w] : weights)
      orDie(decoder_->writeParam(name, rt::CompiledModel::ParamRole::kWeight, w));
    double nll = 0;
    int64_t tokens = 0;
    const size_t n = run_.validSrc.size(), batch = std::min<int64_t>(32, translator_->rows());
    for (size_t first = 0; first < n; first += batch) {
      size_t end = std::min(n, first + batch);
      auto scored = translator_->score({run_.validSrc.begin() + first, run_.validSrc.begin() + end},
                                       {run_.validTgt.begin() + first, run_.validTgt.begin() + end},
                                       (int64_t)first);
      if (!scored.isOk())
        return rt::Status::error(run_.srcValid + ": " + scored.status().message());
      for (const rt::Hypothesis &h : *scored) {
        nll -= h.logProb;
        tokens += (int64_t)h.tokenLogProbs.size();
      }
    }
    rt::Validation v;
    v.loss = nll / std::max<int64_t>(1, tokens);
    if (!bleu_)
      return v;
    std::vector<std::string> hyps;
    for (size_t first = 0; first < n; first += batch) {
      size_t end = std::min(n, first + batch);
      auto result = translator_->translate(
          {run_.validSrc.begin() + first, run_.validSrc.begin() + end}, rt::SearchOptions(),
          nullptr, (int64_t)first);
      if (!result.isOk())
        return rt::Status::error(run_.srcValid + ": " + result.status().message());
      for (const auto &h : *result) {
        std::string text;
        if (run_.tokenizer)
          text = run_.tokenizer->decode(h.front().ids);
        else
          for (int32_t id : h.front().ids)
            text += (text.empty() ? "" : " ") + std::to_string(id);
        hyps.push_back(text);
      }
    }
    v.bleu = corpusBleu(hyps, run_.validRefs);
    return v;
  }

private:
  const TrainRun &run_;
  bool bleu_ = false;
  std::optional<compiler::TemporaryDirectory> scratch_;
  std::unique_ptr<rt::CompiledModel> decoder_;
  std::unique_ptr<rt::Translator> translator_;
};

/// What each step prints: a progress bar on a terminal, else a log line;
/// with --log-json, one JSON object per step and per validation.
class TrainReporter {
public:
  TrainReporter(const Flags &flags, bool append)
      : bar_(::isatty(2) && !flags.count("--no-progress")) {
    if (std::string path = flag(flags, "--log-json"); !path.empty()) {
      std::error_code ec;
      log_ = std::make_unique<llvm::raw_fd_ostream>(
          path, ec, append ? llvm::sys::fs::OF_Append : llvm::sys::fs::OF_None);
      if (ec)
        die("cannot write '" + path + "': " + ec.message());
    }
  }
  ~TrainReporter() { endBar(); }

  void step(const rt::StepReport &r) {
    const rt::StepResult &s = *r.result;
    llvm::json::Object row{{"step", r.step},
                           {"loss", s.loss},
                           {"lr", s.lr},
                           {"tokens", r.tokens},
                           {"tokens_per_s", r.tokens / std::max(r.seconds, 1e-9)},
                           {"grad_norm", s.gradNorm}};
    if (s.reduceSeconds > 0) // a data-parallel step's gradient sum across ranks
      row["reduce_s"] = s.reduceSeconds;
    writeLog(std::move(row));
    if (!bar_) {
      llvm::outs() << llvm::formatv("step {0}: loss {1:f6} lr {2:e3} tokens {3}\n", r.step, s.loss,
                                    s.lr, r.tokens);
      llvm::outs().flush();
      return;
    }
    llvm::errs() << llvm::formatv("\repoch {0} step {1} loss {2:f4} lr {3:e2} {4:f0} tok/s",
                                  r.epoch + 1, r.step, s.loss, s.lr, r.tokensPerSecond);
    if (r.etaSeconds >= 0)
      llvm::errs() << llvm::formatv(" ETA {0}:{1:d2}  ", (int64_t)r.etaSeconds / 60,
                                    (int64_t)r.etaSeconds % 60);
    llvm::errs().flush();
    barShown_ = true;
  }

  void validation(int64_t epoch, int64_t step, const rt::Validation &v) {
    endBar();
    llvm::outs() << llvm::formatv("epoch {0}: valid loss {1:f4}", epoch, v.loss);
    if (v.accuracy)
      llvm::outs() << llvm::formatv(" accuracy {0:f2}%", 100 * *v.accuracy);
    else
      llvm::outs() << llvm::formatv(" perplexity {0:f2}", std::exp(v.loss));
    if (v.bleu)
      llvm::outs() << llvm::formatv(" BLEU {0:f2} (greedy)", *v.bleu);
    llvm::outs() << "\n";
    llvm::outs().flush();
    llvm::json::Object row{{"epoch", epoch}, {"step", step}, {"valid_loss", v.loss}};
    if (v.bleu)
      row["valid_bleu"] = *v.bleu;
    if (v.accuracy)
      row["valid_accuracy"] = *v.accuracy;
    writeLog(std::move(row));
  }

  void endBar() {
    if (barShown_)
      llvm::errs() << "\n";
    barShown_ = false;
  }

private:
  void writeLog(llvm::json::Object row) {
    if (!log_)
      return;
    *log_ << llvm::json::Value(std::move(row)) << "\n";
    log_->flush();
  }

  bool bar_, barShown_ = false; // the bar's line is open on stderr
  std::unique_ptr<llvm::raw_fd_ostream> log_;
};

/// The optimizer's and the stopping flags (every kind of training run).
void commonTrainerOptions(rt::TrainerOptions &o, const Flags &flags, uint64_t seed,
                          int64_t dModel) {
  o.seed = seed;
  o.dtype = dtypeFlag(flags, {"f32", "bf16"});
  o.batching.seed = seed;
  o.adam.dModel = dModel;
  o.adam.warmup = intFlag(flags, "--warmup", 4000, 1, INT64_MAX);
  o.adam.lrFactor =
      floatFlag(flags, "--lr-factor", 1.0, [](double v) { return v > 0; }, "a number > 0");
  o.adam.clipNorm =
      floatFlag(flags, "--clip-norm", 0.0, [](double v) { return v >= 0; }, "a number >= 0");
  o.adam.weightDecay =
      floatFlag(flags, "--weight-decay", 0.0, [](double v) { return v >= 0; }, "a number >= 0");
  o.accumulate = intFlag(flags, "--accumulate", 1, 1, 1 << 20);
  // When to stop: --steps (the run's total), --epochs, --time-limit
  // (minutes of wall time since the start, tokenizer and compile included);
  // none of them: one epoch.
  o.maxSteps = intFlag(flags, "--steps", 0, 1, INT64_MAX);
  o.maxEpochs = intFlag(flags, "--epochs", 0, 1, INT64_MAX);
  o.timeLimitMinutes =
      floatFlag(flags, "--time-limit", 0.0, [](double v) { return v > 0; }, "minutes > 0");
  o.firstStepGrads = flags.count("--grads-out") != 0;
}

/// The checkpointing flags, for a run in `dir`.
void checkpointOptions(rt::TrainerOptions &o, const Flags &flags, const std::string &dir) {
  o.checkpointDir = dir;
  o.keep = intFlag(flags, "--keep", 0, 1, INT64_MAX);
  o.saveEvery = intFlag(flags, "--save-every", 0, 1, INT64_MAX);
}

/// The Trainer's options from the flags.
rt::TrainerOptions trainerOptions(const TrainRun &run, const Flags &flags, uint64_t seed) {
  rt::TrainerOptions o;
  commonTrainerOptions(o, flags, seed, run.config.dModel);
  o.batching.batchTokens = intFlag(flags, "--batch-tokens", 4096, 1, INT64_MAX);
  o.batching.maxRows = intFlag(flags, "--max-sentences", 0, 1, INT64_MAX);
  const std::string batching = flag(flags, "--batching", "bucket");
  if (batching != "bucket" && batching != "file")
    die("--batching " + batching + " is not one of bucket, file");
  o.batching.bucket = batching == "bucket";
  // Checkpoints are the compiled step's (the reference backend writes its
  // final weights only).
  if (run.compiled)
    checkpointOptions(o, flags, run.ckptDir);
  std::string config;
  llvm::raw_string_ostream os(config);
  os << configJson(run.config);
  o.runInfo = rt::JsonValue::object();
  o.runInfo.set("tokenizer", run.tokenizer ? rt::kTokenizerFile : "ids");
  o.runInfo.set("config", orDie(rt::JsonValue::parse(config)));
  return o;
}

} // namespace

namespace {

/// The Trainer over `step` and `data`, reporting each step and validation
/// (TrainReporter), --grads-out written at step 1, resumed first with
/// --resume; exits with the error of a failed step.
void trainWithReports(rt::TrainStep &step, const rt::Dataset &data,
                      const rt::TrainerOptions &options, const Flags &flags, bool resume,
                      bool resuming, const std::string &ckptDir,
                      std::function<rt::StatusOr<rt::Validation>()> validate) {
  // A data-parallel run's rank 0 reports; the other ranks say nothing.
  const bool leader = !options.group || options.group->rank() == 0;
  TrainReporter reporter(leader ? flags : Flags{{"--no-progress", ""}}, resuming);
  const std::string gradsOut = flag(flags, "--grads-out");
  rt::TrainerCallbacks callbacks;
  if (leader)
    callbacks.onStep = [&](const rt::StepReport &r) {
      if (r.step == 1 && !gradsOut.empty())
        writeTensors(gradsOut, r.result->grads);
      reporter.step(r);
    };
  if (validate) {
    callbacks.validate = std::move(validate);
    callbacks.onValidation = [&](int64_t epoch, int64_t s, const rt::Validation &v) {
      reporter.validation(epoch, s, v);
    };
  }
  rt::Trainer trainer(step, data, options, std::move(callbacks));
  if (resume) {
    rt::ResumePoint point = orDie(trainer.resume());
    if (leader) { // rank 0 says where the run resumed
      for (const std::string &why : point.skipped)
        llvm::errs() << "transfuse: skipping a checkpoint that is not whole: " << why << "\n";
      if (point.checkpoint.empty())
        llvm::errs() << "train: --resume: no checkpoint in '" << ckptDir << "' yet; starting\n";
      else
        llvm::errs() << "train: resumed from " << point.checkpoint << " (step " << point.step
                     << ", epoch " << point.epoch + 1 << ")\n";
    }
  }
  orDie(trainer.run());
  reporter.endBar();
}

/// config.json's label2id (empty when it has none).
std::map<std::string, int32_t> labelIds(const std::string &configPath) {
  auto text = llvm::MemoryBuffer::getFile(configPath, /*IsText=*/true);
  if (!text)
    die("cannot read '" + configPath + "': " + text.getError().message());
  auto json = rt::JsonValue::parse((*text)->getBuffer().str());
  if (!json.isOk())
    die(configPath + ": " + json.status().message());
  std::map<std::string, int32_t> ids;
  if (const rt::JsonValue *m = json->find("label2id"); m && m->isObject())
    for (const auto &[name, id] : m->members()) {
      if (!id.isInteger())
        die(configPath + ": key 'label2id': '" + name + "' is not an integer id");
      ids[name] = static_cast<int32_t>(id.asInt64());
    }
  return ids;
}

/// Validation of an image classifier: the mean cross-entropy of its
/// `classify` logits (no label smoothing) and the fraction labelled right,
/// on the training model itself (its weights are the step's).
rt::Validation validateImages(rt::CompiledModel &model, const ImageData &valid, int64_t batch) {
  double nll = 0;
  int64_t right = 0;
  for (size_t first = 0; first < valid.size(); first += batch) {
    std::vector<int32_t> rows;
    for (size_t i = first; i < std::min(valid.size(), first + batch); ++i)
      rows.push_back(static_cast<int32_t>(i));
    rt::MicroBatch mb = valid.batch(rows);
    auto out = orDie(model.run("classify", {{"pixel_values", mb.inputs.at("pixel_values")}}));
    const rt::Tensor &logits = out.at("logits");
    const int64_t labels = logits.shape[1];
    for (size_t r = 0; r < rows.size(); ++r) {
      const float *row = logits.data<float>() + r * labels;
      const int64_t best = std::max_element(row, row + labels) - row;
      double sum = 0;
      for (int64_t j = 0; j < labels; ++j)
        sum += std::exp(static_cast<double>(row[j]) - row[best]);
      const int32_t label = valid.label(rows[r]);
      nll += std::log(sum) - (static_cast<double>(row[label]) - row[best]);
      right += best == label;
    }
  }
  rt::Validation v;
  v.loss = nll / valid.size();
  v.accuracy = static_cast<double>(right) / valid.size();
  return v;
}

/// `train VIT_DIR --images FOLDER|CSV`: a Hugging Face image classifier
/// fine-tuned from its own weights, by the same Trainer, checkpoints,
/// progress and logs as text training. The run's directory is itself a
/// Hugging Face directory at the end (config.json, preprocessor_config.json,
/// model.safetensors with ViTForImageClassification's names).
int runTrainImages(const std::vector<std::string> &positional, const Flags &flags) {
  const auto started = Clock::now();
  if (positional.size() != 1 || !isHuggingFaceDirectory(positional[0]))
    die("train --images expects one model: a Hugging Face image classifier's directory");
  if (rt::launchedRanks() > 1 || flags.count("--shards"))
    die("train --images runs in one process (data-parallel training, mpirun and --shards, "
        "takes sentence pairs or lines)");
  for (const char *f : {"--src-train", "--tgt-train", "--src-valid", "--tgt-valid", "--valid-bleu",
                        "--tokenizer", "--vocab-size", "--skip-long", "--batch-tokens",
                        "--max-sentences", "--batching", "--dropout", "--backend"})
    if (flags.count(f))
      die(llvm::Twine(f) + " applies to training on text, not on --images");
  const std::string dir = positional[0];
  const std::string prepPath = joinPath(dir, "preprocessor_config.json");
  if (!llvm::sys::fs::exists(prepPath))
    die("'" + dir + "' has no preprocessor_config.json (how its images are resized and "
        "normalized)");
  const rt::ImagePreprocessing prep = orDie(rt::readPreprocessorConfig(prepPath));
  const int64_t batch = intFlag(flags, "--batch", 8, 1, 4096);
  const uint64_t seed = (uint64_t)intFlag(flags, "--seed", 0, 0, INT64_MAX);
  const std::string ckptDir = flag(flags, "--checkpoint-dir");
  const bool resume = flags.count("--resume") != 0;
  for (const char *f : {"--resume", "--keep", "--save-every"})
    if (flags.count(f) && ckptDir.empty())
      die(llvm::Twine(f) + " needs --checkpoint-dir");

  // The training build of the directory, at --batch images.
  MLIRContext context;
  BuildOptions build;
  build.training = true;
  build.decoding = false;
  build.maxBatch = batch;
  build.labelSmoothing = floatFlag(flags, "--label-smoothing", 0.0,
                                   [](double v) { return v >= 0 && v <= 1; }, "a value in [0, 1]");
  std::vector<std::string> warnings;
  build.warnings = &warnings;
  OwningOpRef<ModuleOp> module = orDie(loadModelDefinition(context, dir, build));
  for (const std::string &w : warnings)
    llvm::errs() << "transfuse: warning: " << w << "\n";
  auto config = cast<StringAttr>((*module)->getAttr(kConfigAttr)).getValue();
  rt::JsonValue configJson = orDie(rt::JsonValue::parse(config.str()));
  const rt::JsonValue *labels = configJson.find("num_labels"), *hidden = configJson.find("hidden_size");
  if (!labels || !hidden)
    die("'" + dir + "' is not an image classifier (no classifier head)");

  // Every image read before anything compiles.
  const std::map<std::string, int32_t> label2id = labelIds(joinPath(dir, "config.json"));
  const ImageData data =
      ImageData::read(flag(flags, "--images"), prep, label2id, labels->asInt64());
  std::optional<ImageData> valid;
  if (std::string v = flag(flags, "--valid-images"); !v.empty())
    valid = ImageData::read(v, prep, label2id, labels->asInt64());

  const bool resuming = resume && llvm::sys::fs::exists(joinPath(ckptDir, rt::kConfigFile));
  if (!ckptDir.empty() && !resuming) {
    if (std::error_code ec = llvm::sys::fs::create_directories(ckptDir))
      die("cannot create '" + ckptDir + "': " + ec.message());
    if (!rt::listCheckpoints(ckptDir).empty())
      die("'" + ckptDir + "' holds checkpoints of another run: --resume continues it");
    for (const char *f : {"config.json", "preprocessor_config.json"})
      if (std::error_code ec = llvm::sys::fs::copy_file(joinPath(dir, f), joinPath(ckptDir, f)))
        die("cannot write '" + joinPath(ckptDir, f) + "': " + ec.message());
  }

  std::optional<compiler::TemporaryDirectory> artifact;
  auto model = compileForTraining(*module, flags, flag(flags, "--init-weights", dir), seed, artifact);
  rt::CompiledTrainStep step(*model);

  rt::TrainerOptions o;
  commonTrainerOptions(o, flags, seed, hidden->asInt64());
  o.started = started;
  o.batching.batchTokens = batch; // every image counts 1
  o.batching.maxRows = batch;
  checkpointOptions(o, flags, ckptDir);
  o.runInfo = rt::JsonValue::object();
  o.runInfo.set("images", flag(flags, "--images"));
  o.runInfo.set("config", configJson);

  std::function<rt::StatusOr<rt::Validation>()> validate;
  if (valid)
    validate = [&]() -> rt::StatusOr<rt::Validation> {
      return validateImages(*model, *valid, batch);
    };
  trainWithReports(step, data, o, flags, resume, resuming, ckptDir, std::move(validate));
  if (ckptDir.empty())
    return 0;
  // The run's directory as a Hugging Face directory: the final weights with
  // ViTForImageClassification's names (the encoder under `vit.`).
  std::map<std::string, rt::Tensor> named;
  for (auto &[name, w] : orDie(step.weights()))
    named[llvm::StringRef(name).starts_with("classifier.") ? name : "vit." + name] = w;
  writeTensors(joinPath(ckptDir, rt::kWeightsFile), named);
  return 0;
}

/// The ranks of a data-parallel run when mpirun started this process (one
/// shard each; --shards, if given, must say as many), else none.
std::unique_ptr<rt::ProcessGroup> joinRanks(const Flags &flags) {
  const int ranks = rt::launchedRanks();
  if (ranks <= 1)
    return nullptr;
#ifdef TRANSFUSE_HAVE_MPI
  std::unique_ptr<rt::ProcessGroup> group = orDie(rt::MpiGroup::join());
  if (flags.count("--shards") && intFlag(flags, "--shards", 1, 1, 4096) != group->size())
    die("--shards " + flag(flags, "--shards") + " under mpirun with " +
        std::to_string(group->size()) + " ranks: a data-parallel run has one shard per rank");
  return group;
#else
  (void)flags;
  die("this transfuse was built without MPI, and mpirun started " + std::to_string(ranks) +
      " of it: install Open MPI (libopenmpi-dev, openmpi-bin) and rebuild for data-parallel "
      "training (docs/distributed.md)");
#endif
}

} // namespace

int tools::runTrain(const std::vector<std::string> &positional, const Flags &flags) {
  if (flags.count("--images"))
    return runTrainImages(positional, flags);
  const auto started = Clock::now();
  std::unique_ptr<rt::ProcessGroup> group = joinRanks(flags);
  const bool leader = !group || group->rank() == 0;
  TrainRun run = readTrainFlags(positional, flags);
  readCorpus(run, flags);
  const uint64_t seed = (uint64_t)intFlag(flags, "--seed", 0, 0, INT64_MAX);
  rt::TrainerOptions options = trainerOptions(run, flags, seed);
  options.started = started;
  options.shards = group ? group->size() : (int)intFlag(flags, "--shards", 1, 1, 4096);
  options.group = group.get();
  if (options.shards > 1 && !run.compiled)
    die("--shards and mpirun train the compiled step (--backend compiled)");
  if (leader)
    startRunDirectory(run);
  if (group)  // the run's directory exists before any rank reads it
    orDie(group->barrier());
  TrainBackend backend;
  startBackend(backend, run, flags, rt::maxBatchRows(run.data, options.batching), seed);

  std::optional<Validator> validator;
  if (!run.validSrc.empty() && leader)
    validator.emplace(run, flags);
  std::function<rt::StatusOr<rt::Validation>()> validate;
  if (validator)
    validate = [&] { return (*validator)(*backend.step); };
  trainWithReports(*backend.step, run.data, options, flags, run.resume, run.resuming, run.ckptDir,
                   std::move(validate));
  if (run.compiled || run.ckptDir.empty())
    return 0;
  // The reference backend writes the final weights (F32) only.
  if (std::error_code ec = llvm::sys::fs::create_directories(run.ckptDir))
    die("cannot create '" + run.ckptDir + "': " + ec.message());
  writeTensors(joinPath(run.ckptDir, rt::kWeightsFile), orDie(backend.step->weights()));
  return 0;
}
