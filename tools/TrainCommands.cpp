//===- TrainCommands.cpp - transfuse train and average-checkpoints --------===//
//
// The training driver (docs/training.md) over runtime/host's Trainer: the
// flags; sentences from text (a joint SentencePiece vocabulary trained on
// the fly) or lines of ids, checked and made examples; the config compiled
// with --train and the fusion strategy (or the compiler library's fp64
// reference step); validation per epoch on a decoding artifact that the
// weights are copied into; progress, logs and the final messages. The loop,
// batching, checkpoints and resume are the Trainer's.
//
//===----------------------------------------------------------------------===//

#include "tools/TrainCommands.h"

#include "compiler/Compiler.h"
#include "compiler/ReferenceTrainStep.h"
#include "models/Models.h"
#include "runtime/Json.h"
#include "runtime/Safetensors.h"
#include "runtime/host/Checkpoint.h"
#include "runtime/host/CompiledModel.h"
#include "runtime/host/Corpus.h"
#include "runtime/host/Search.h"
#include "runtime/host/Tokenizer.h"
#include "runtime/host/Trainer.h"
#include "tools/Bleu.h"
#include "tools/Cli.h"
#include "tools/DecodeCommands.h"

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
using Flags = std::map<std::string, std::string>;
using IdLines = std::vector<std::vector<int32_t>>;

/// One example as the model reads it (rt::Example; models/README.md's
/// token conventions).
rt::Example makeExample(const ModelConfig &c, const std::vector<int32_t> &src,
                        const std::vector<int32_t> *tgt) {
  rt::Example e;
  if (c.isDecoderOnly()) {
    std::vector<int32_t> seq;
    if (c.bosId)
      seq.push_back((int32_t)*c.bosId);
    seq.insert(seq.end(), src.begin(), src.end());
    if (c.eosId)
      seq.push_back((int32_t)*c.eosId);
    if (seq.size() >= 2) {
      e.in.assign(seq.begin(), seq.end() - 1);
      e.labels.assign(seq.begin() + 1, seq.end());
    }
    return e;
  }
  const int32_t bos = (int32_t)*c.bosId, eos = (int32_t)*c.eosId;
  if (c.sourceBos)
    e.src.push_back(bos);
  e.src.insert(e.src.end(), src.begin(), src.end());
  e.src.push_back(eos);
  e.in.push_back(bos);
  e.in.insert(e.in.end(), tgt->begin(), tgt->end());
  e.labels.assign(tgt->begin(), tgt->end());
  e.labels.push_back(eos);
  return e;
}

/// The sentences of `path` as ids: lines of ids, or text through the tokenizer.
IdLines sentences(const std::string &path, const std::vector<std::string> &lines,
                  const rt::Tokenizer *tokenizer) {
  IdLines out;
  if (!tokenizer) {
    std::string text;
    for (const std::string &l : lines)
      text += l + "\n";
    return parseIdLines(text, path);
  }
  out.reserve(lines.size());
  for (const std::string &line : lines)
    out.push_back(tokenizer->encode(line));
  return out;
}

void writeTensors(const std::string &path, const std::map<std::string, rt::Tensor> &tensors) {
  std::vector<std::pair<std::string, const rt::Tensor *>> list;
  for (const auto &[name, t] : tensors)
    list.emplace_back(name, &t);
  orDie(rt::writeSafetensors(path, list));
}

/// The whole checkpoints of `dir`, newest first; the others are named on stderr.
std::vector<int64_t> wholeCheckpoints(const std::string &dir) {
  std::vector<std::string> skipped;
  std::vector<int64_t> whole = rt::wholeCheckpoints(dir, &skipped);
  for (const std::string &why : skipped)
    llvm::errs() << "transfuse: skipping a checkpoint that is not whole: " << why << "\n";
  return whole;
}

llvm::json::Object readJsonObject(const std::string &path) {
  auto text = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!text)
    die("cannot read '" + path + "': " + text.getError().message());
  auto value = llvm::json::parse((*text)->getBuffer());
  if (!value)
    die(path + ": " + llvm::toString(value.takeError()));
  if (!value->getAsObject())
    die(path + ": not a JSON object");
  return std::move(*value->getAsObject());
}

llvm::json::Value configJson(const ModelConfig &config) { return llvm::json::Value(toJson(config)); }

/// A compiled decoding artifact of `config` for translation and
/// validation, cached in DIR/artifact-<key>: the key hashes the resolved
/// config, the build options and this compiler (its version and binary),
/// so a new compiler or config compiles afresh. Weights come from the
/// checkpoint at load; the artifact does not depend on them.
std::string decodeArtifact(const ModelConfig &config, const std::string &dir) {
  BuildOptions build;
  build.maxBatch = 32;
  build.maxBeam = 4;
  build.maxSeqLen = config.maxSeqLen;
  std::string configText;
  llvm::raw_string_ostream os(configText);
  os << llvm::json::Value(toJson(config));
  std::string exe = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
  llvm::sys::fs::file_status st;
  std::string compiler = compilerVersion().str();
  if (!llvm::sys::fs::status(exe, st))
    compiler += ":" + std::to_string(st.getSize()) + ":" +
                std::to_string(st.getLastModificationTime().time_since_epoch().count());
  std::string key = configText + "|b32|k4|s" + std::to_string(build.maxSeqLen) + "|all|" + compiler;
  std::string out = joinPath(dir, "artifact-" + llvm::utohexstr(llvm::xxh3_64bits(key), /*LowerCase=*/true));
  if (llvm::sys::fs::exists(joinPath(out, "libmodel.so")))
    return out;
  MLIRContext context;
  auto module = orDie(buildModel(context, config, build));
  auto tmp = orDie(compiler::TemporaryDirectory::create("transfuse-artifact"));
  orDie(compiler::compile(*module, tmp.path(),
                          compiler::CompileOptions{orDie(FusionStrategy::parse("all"))}));
  // Into place in one rename (a concurrent or killed compile leaves none half-written).
  std::string staging = out + ".tmp-" + std::to_string(::getpid());
  llvm::sys::fs::remove_directories(staging);
  if (std::error_code ec = llvm::sys::fs::create_directories(staging))
    die("cannot create '" + staging + "': " + ec.message());
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(tmp.path(), ec), end; it != end && !ec;
       it.increment(ec)) {
    std::string name = llvm::sys::path::filename(it->path()).str();
    if (llvm::sys::fs::is_regular_file(it->path()))
      if (std::error_code c = llvm::sys::fs::copy_file(it->path(), joinPath(staging, name)))
        die("cannot copy '" + it->path() + "': " + c.message());
  }
  if (std::error_code c = llvm::sys::fs::rename(staging, out)) {
    llvm::sys::fs::remove_directories(staging);
    if (!llvm::sys::fs::exists(joinPath(out, "libmodel.so")))
      die("cannot create '" + out + "': " + c.message());
  }
  return out;
}

} // namespace

CheckpointDir tools::openCheckpointDir(const std::string &dir, const std::string &which) {
  CheckpointDir c;
  c.dir = dir;
  std::string configPath = joinPath(dir, rt::kConfigFile);
  auto text = llvm::MemoryBuffer::getFile(configPath, /*IsText=*/true);
  if (!text)
    die("'" + dir + "' is neither a compiled artifact (manifest.json) nor a checkpoint directory (" +
        rt::kConfigFile + ")");
  c.config = orDie(parseModelConfig((*text)->getBuffer(), configPath));
  std::string checkpoint;
  if (which == "averaged") {
    checkpoint = joinPath(dir, "averaged");
  } else if (which == "best" || which == "last") {
    std::vector<int64_t> whole = wholeCheckpoints(dir);
    if (whole.empty())
      die("'" + dir + "' holds no whole checkpoint");
    int64_t step = which == "best" ? orDie(rt::bestCheckpoint(dir, whole)) : -1;
    checkpoint = joinPath(dir, rt::checkpointName(step >= 0 ? step : whole.front()));
  } else {
    checkpoint = joinPath(dir, which);
    if (!llvm::sys::fs::is_directory(checkpoint))
      die("--checkpoint " + which + ": '" + dir +
          "' has no such checkpoint (best, last, averaged or a step-N name)");
  }
  if (rt::Status s = rt::verifyDirectory(checkpoint); !s.isOk())
    die("--checkpoint " + which + ": " + s.message());
  c.weights = joinPath(checkpoint, rt::kWeightsFile);
  if (llvm::sys::fs::exists(joinPath(dir, rt::kTokenizerFile)))
    c.tokenizer = orDie(rt::Tokenizer::load(joinPath(dir, rt::kTokenizerFile)));
  c.artifact = decodeArtifact(c.config, dir);
  return c;
}

namespace {

/// What `transfuse train`'s flags and files resolve to before anything is
/// trained.
struct TrainRun {
  bool compiled = true;
  std::string ckptDir;
  bool resume = false, resuming = false; // --resume, and a run to resume exists
  std::string configPath;
  ModelConfig config;
  std::string tokenizerKind;
  std::unique_ptr<rt::Tokenizer> tokenizer;
  std::string srcPath, tgtPath, srcValid, tgtValid;
  rt::TrainingData data;
  int64_t maxLen = 1;
  IdLines validSrc, validTgt;
  std::vector<std::string> validRefs; // the raw references, for BLEU
};

/// The flags' combinations, and the config (on --resume the run's, resolved
/// at its first run: the tokenizer's vocabulary and the flags that change it).
TrainRun readTrainFlags(const std::vector<std::string> &positional, const Flags &flags) {
  TrainRun run;
  if (positional.size() != 1)
    die("train expects one config (JSON)");
  const std::string backend = flag(flags, "--backend", "compiled");
  if (backend != "compiled" && backend != "reference")
    die("--backend " + backend + " is not one of compiled, reference");
  run.compiled = backend == "compiled";
  run.tokenizerKind = flag(flags, "--tokenizer", "ids");
  if (run.tokenizerKind != "ids" && run.tokenizerKind != "sentencepiece")
    die("--tokenizer " + run.tokenizerKind + " is not one of ids, sentencepiece");
  if (flags.count("--vocab-size") && run.tokenizerKind != "sentencepiece")
    die("--vocab-size sets the size of the sentencepiece tokenizer (--tokenizer sentencepiece)");
  const std::string target = flag(flags, "--target", "cpu");
  if (!emit::backendNamed(target))
    die("--target " + target + " is not one of " + llvm::join(emit::backendNames(), ", "));
  if (!run.compiled)
    for (const char *f : {"--threads", "--fusion", "--resume", "--keep", "--src-valid",
                          "--save-every", "--valid-bleu", "--target", "--device"})
      if (flags.count(f))
        die(llvm::Twine(f) + " applies to --backend compiled");
  run.ckptDir = flag(flags, "--checkpoint-dir");
  run.resume = flags.count("--resume") != 0;
  for (const char *f : {"--resume", "--keep", "--save-every"})
    if (flags.count(f) && run.ckptDir.empty())
      die(llvm::Twine(f) + " needs --checkpoint-dir");

  run.configPath = positional[0];
  run.resuming = run.resume && llvm::sys::fs::exists(joinPath(run.ckptDir, rt::kConfigFile));
  if (run.resuming)
    run.configPath = joinPath(run.ckptDir, rt::kConfigFile);
  auto text = llvm::MemoryBuffer::getFile(run.configPath, /*IsText=*/true);
  if (!text)
    die("cannot read '" + run.configPath + "': " + text.getError().message());
  run.config = orDie(parseModelConfig((*text)->getBuffer(), run.configPath));
  if (!run.resuming)
    run.config.dropout = floatFlag(flags, "--dropout", run.config.dropout,
                                   [](double v) { return v >= 0 && v < 1; }, "a rate in [0, 1)");
  const bool decoderOnly = run.config.isDecoderOnly();
  if (!decoderOnly)
    for (auto [id, key] : {std::pair{run.config.bosId, "bos_id"}, {run.config.eosId, "eos_id"}})
      if (!id)
        die(run.configPath + ": training needs the config's " + key);

  run.srcPath = flag(flags, "--src-train");
  run.tgtPath = flag(flags, "--tgt-train");
  if (run.srcPath.empty() || (!decoderOnly && run.tgtPath.empty()))
    die(decoderOnly ? "train needs --src-train" : "train needs --src-train and --tgt-train");
  run.srcValid = flag(flags, "--src-valid");
  run.tgtValid = flag(flags, "--tgt-valid");
  if (run.srcValid.empty() != run.tgtValid.empty() || (!run.srcValid.empty() && decoderOnly))
    die(decoderOnly ? "validation (--src-valid) is for encoder_decoder models"
                    : "validation needs both --src-valid and --tgt-valid");
  if (flags.count("--valid-bleu") && run.srcValid.empty())
    die("--valid-bleu needs --src-valid and --tgt-valid");
  return run;
}

/// The tokenizer of a run on text: the resumed run's, or one trained on the
/// training lines (the config's vocabulary sizes follow it).
void startTokenizer(TrainRun &run, const Flags &flags, const std::vector<std::string> &srcLines,
                    const std::vector<std::string> &tgtLines) {
  const std::string saved = joinPath(run.ckptDir, rt::kTokenizerFile);
  if (run.resuming && run.tokenizerKind != "sentencepiece" && llvm::sys::fs::exists(saved))
    die("--resume: '" + run.ckptDir + "' was trained on text: --tokenizer sentencepiece");
  if (run.tokenizerKind != "sentencepiece")
    return;
  ModelConfig &c = run.config;
  if (!c.padId || !c.bosId || !c.eosId || !c.unkId)
    die(run.configPath + ": a sentencepiece tokenizer reserves pad_id, bos_id, eos_id and "
                         "unk_id: the config needs all four");
  if (run.resuming) {
    if (!llvm::sys::fs::exists(saved))
      die("--resume: '" + run.ckptDir + "' was trained on lines of ids (--tokenizer ids)");
    run.tokenizer = orDie(rt::Tokenizer::load(saved));
    return;
  }
  rt::Tokenizer::TrainOptions t;
  t.vocabSize = (int32_t)intFlag(flags, "--vocab-size", 8000, 8, 1 << 20);
  t.specials = {(int32_t)*c.padId, (int32_t)*c.bosId, (int32_t)*c.eosId, (int32_t)*c.unkId};
  t.threads = (int)intFlag(flags, "--threads", 0, 0, 1024);
  if (t.threads == 0)
    t.threads = (int)std::max(1u, std::thread::hardware_concurrency());
  auto t0 = Clock::now();
  run.tokenizer = orDie(rt::Tokenizer::train({&srcLines, &tgtLines}, t));
  llvm::errs() << llvm::formatv("tokenizer: sentencepiece BPE, {0} pieces, trained in {1:f1} s\n",
                                run.tokenizer->vocabSize(),
                                std::chrono::duration<double>(Clock::now() - t0).count());
  c.srcVocabSize = c.tgtVocabSize = run.tokenizer->vocabSize();
}

/// Ids in the vocabulary, and never the padding id, named by file and line.
void checkIds(const TrainRun &run, const IdLines &lines, const std::string &path, int64_t vocab) {
  for (size_t i = 0; i < lines.size(); ++i)
    for (int32_t id : lines[i]) {
      if (id < 0 || id >= vocab)
        die(path + ": line " + llvm::Twine(i + 1) + ": id " + llvm::Twine(id) +
            " is outside the vocabulary [0, " + llvm::Twine(vocab) + ")");
      if (run.config.padId && id == run.data.pad)
        die(path + ": line " + llvm::Twine(i + 1) + " holds the padding id " +
            llvm::Twine(run.data.pad));
    }
}

/// Whether example `e` of line `line` fits max_seq_len; an error naming the
/// line unless --skip-long drops it.
bool fits(const TrainRun &run, const rt::Example &e, size_t line, const std::string &srcPath,
          const std::string &tgtPath, bool skipLong) {
  const int64_t s = e.src.size(), t = e.in.size();
  if (std::max(s, t) <= run.config.maxSeqLen)
    return true;
  if (!skipLong)
    die((s >= t ? srcPath : tgtPath) + ": line " + llvm::Twine(line + 1) + ": " +
        llvm::Twine(std::max(s, t)) + " tokens with the specials, over the config's max_seq_len " +
        llvm::Twine(run.config.maxSeqLen) + " (--skip-long drops such pairs)");
  return false;
}

/// Every file read and checked before anything is trained: the lines (text:
/// a blank line is a sentence missing; ids: an empty list is allowed), the
/// tokenizer, the ids, the examples and the validation pairs.
void readCorpus(TrainRun &run, const Flags &flags) {
  auto readLines = [&](const std::string &path) {
    std::vector<std::string> lines = orDie(rt::readTextLines(path));
    if (run.tokenizerKind == "sentencepiece")
      for (size_t i = 0; i < lines.size(); ++i)
        if (llvm::StringRef(lines[i]).trim().empty())
          die(path + ": line " + llvm::Twine(i + 1) + " is blank (every line is a sentence)");
    return lines;
  };
  auto sameCount = [](const std::string &a, size_t na, const std::string &b, size_t nb) {
    if (na != nb)
      die(a + " has " + llvm::Twine(na) + " lines but " + b + " has " + llvm::Twine(nb));
  };
  const bool decoderOnly = run.config.isDecoderOnly();
  std::vector<std::string> srcLines = readLines(run.srcPath), tgtLines, srcValidLines;
  if (!decoderOnly) {
    tgtLines = readLines(run.tgtPath);
    sameCount(run.srcPath, srcLines.size(), run.tgtPath, tgtLines.size());
  }
  if (!run.srcValid.empty()) {
    srcValidLines = readLines(run.srcValid);
    run.validRefs = readLines(run.tgtValid);
    sameCount(run.srcValid, srcValidLines.size(), run.tgtValid, run.validRefs.size());
  }
  startTokenizer(run, flags, srcLines, tgtLines);

  const ModelConfig &c = run.config;
  run.data.decoderOnly = decoderOnly;
  run.data.pad = c.padId ? (int32_t)*c.padId : -100;
  IdLines src = sentences(run.srcPath, srcLines, run.tokenizer.get()), tgt;
  if (!decoderOnly)
    tgt = sentences(run.tgtPath, tgtLines, run.tokenizer.get());
  checkIds(run, src, run.srcPath, decoderOnly ? c.tgtVocabSize : c.srcVocabSize);
  checkIds(run, tgt, run.tgtPath, c.tgtVocabSize);
  const bool skipLong = flags.count("--skip-long") != 0;
  int64_t skipped = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    rt::Example e = makeExample(c, src[i], decoderOnly ? nullptr : &tgt[i]);
    e.line = (int64_t)i + 1;
    if (decoderOnly && e.in.empty())
      die(run.srcPath + ": line " + llvm::Twine(i + 1) + ": fewer than 2 tokens to train on");
    if (!fits(run, e, i, run.srcPath, run.tgtPath, skipLong)) {
      ++skipped;
      continue;
    }
    run.maxLen = std::max({run.maxLen, (int64_t)e.src.size(), (int64_t)e.in.size()});
    run.data.examples.push_back(std::move(e));
  }
  if (skipped)
    llvm::errs() << "train: --skip-long dropped " << skipped << " of " << src.size()
                 << " pairs over max_seq_len " << c.maxSeqLen << "\n";
  if (run.data.examples.empty())
    die(run.srcPath + ": no pairs left to train on");
  if (run.srcValid.empty())
    return;
  IdLines validSrc = sentences(run.srcValid, srcValidLines, run.tokenizer.get());
  IdLines validTgt = sentences(run.tgtValid, run.validRefs, run.tokenizer.get());
  checkIds(run, validSrc, run.srcValid, c.srcVocabSize);
  checkIds(run, validTgt, run.tgtValid, c.tgtVocabSize);
  // The same length rule as training's (a dropped pair's reference goes too).
  std::vector<std::string> refs;
  for (size_t i = 0; i < validSrc.size(); ++i) {
    if (!fits(run, makeExample(c, validSrc[i], &validTgt[i]), i, run.srcValid, run.tgtValid,
              skipLong))
      continue;
    run.validSrc.push_back(std::move(validSrc[i]));
    run.validTgt.push_back(std::move(validTgt[i]));
    refs.push_back(std::move(run.validRefs[i]));
  }
  if (refs.size() < validSrc.size())
    llvm::errs() << "train: --skip-long dropped " << validSrc.size() - refs.size() << " of "
                 << validSrc.size() << " validation pairs over max_seq_len " << c.maxSeqLen
                 << "\n";
  run.validRefs = std::move(refs);
}

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
  std::optional<compiler::TemporaryDirectory> artifact;
  std::unique_ptr<rt::CompiledModel> model;
  std::unique_ptr<rt::TrainStep> step;
};

void startBackend(TrainBackend &b, const TrainRun &run, const Flags &flags, int64_t maxBatch,
                  uint64_t seed) {
  BuildOptions build;
  build.training = true;
  build.decoding = false;
  build.maxBatch = maxBatch;
  build.maxSeqLen = run.maxLen;
  build.labelSmoothing = floatFlag(flags, "--label-smoothing", 0.1,
                                   [](double v) { return v >= 0 && v <= 1; }, "a value in [0, 1]");
  auto module = orDie(buildModel(b.context, run.config, build));
  const std::string initWeights = flag(flags, "--init-weights");
  if (!run.compiled) {
    ModelInterface mi = orDie(extractInterface(*module));
    reference::TensorMap weights = loadWeights(mi, initWeights, seed);
    auto step = compiler::ReferenceTrainStep::create(module.release(), weights);
    if (!step)
      die("differentiating the loss of '" + run.configPath + "' failed");
    b.step = std::move(*step);
    return;
  }
  // --target cuda: the train step and Adam run on the GPU (docs/cuda.md).
  compiler::CompileOptions options;
  options.strategy = orDie(FusionStrategy::parse(flag(flags, "--fusion", "all")));
  options.build.target = flag(flags, "--target", "cpu");
  options.train = true;
  if (llvm::Error e = compiler::checkOptions(options))
    die(llvm::toString(std::move(e)));
  b.artifact.emplace(orDie(compiler::TemporaryDirectory::create("transfuse-train")));
  orDie(compiler::compile(*module, b.artifact->path(), options));
  rt::LoadOptions load;
  load.weightsPath = initWeights;
  load.seed = seed;
  load.threads = (int)intFlag(flags, "--threads", 0, 0, 1024);
  load.deviceOrdinal = (int)intFlag(flags, "--device", 0, 0, 1023);
  b.model = orDie(rt::CompiledModel::load(b.artifact->path() + "/libmodel.so", load));
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
    writeLog(llvm::json::Object{{"step", r.step},
                                {"loss", s.loss},
                                {"lr", s.lr},
                                {"tokens", r.tokens},
                                {"tokens_per_s", r.tokens / std::max(r.seconds, 1e-9)},
                                {"grad_norm", s.gradNorm}});
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
    llvm::outs() << llvm::formatv("epoch {0}: valid loss {1:f4} perplexity {2:f2}", epoch, v.loss,
                                  std::exp(v.loss));
    if (v.bleu)
      llvm::outs() << llvm::formatv(" BLEU {0:f2} (greedy)", *v.bleu);
    llvm::outs() << "\n";
    llvm::outs().flush();
    llvm::json::Object row{{"epoch", epoch}, {"step", step}, {"valid_loss", v.loss}};
    if (v.bleu)
      row["valid_bleu"] = *v.bleu;
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

/// The Trainer's options from the flags.
rt::TrainerOptions trainerOptions(const TrainRun &run, const Flags &flags, uint64_t seed) {
  rt::TrainerOptions o;
  o.seed = seed;
  o.batching.seed = seed;
  o.batching.batchTokens = intFlag(flags, "--batch-tokens", 4096, 1, INT64_MAX);
  o.batching.maxRows = intFlag(flags, "--max-sentences", 0, 1, INT64_MAX);
  const std::string batching = flag(flags, "--batching", "bucket");
  if (batching != "bucket" && batching != "file")
    die("--batching " + batching + " is not one of bucket, file");
  o.batching.bucket = batching == "bucket";
  o.adam.dModel = run.config.dModel;
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
  // Checkpoints are the compiled step's (the reference backend writes its
  // final weights only).
  if (run.compiled) {
    o.checkpointDir = run.ckptDir;
    o.keep = intFlag(flags, "--keep", 0, 1, INT64_MAX);
    o.saveEvery = intFlag(flags, "--save-every", 0, 1, INT64_MAX);
  }
  std::string config;
  llvm::raw_string_ostream os(config);
  os << configJson(run.config);
  o.runInfo = rt::JsonValue::object();
  o.runInfo.set("tokenizer", run.tokenizer ? rt::kTokenizerFile : "ids");
  o.runInfo.set("config", orDie(rt::JsonValue::parse(config)));
  o.firstStepGrads = flags.count("--grads-out") != 0;
  return o;
}

} // namespace

int tools::runTrain(const std::vector<std::string> &positional, const Flags &flags) {
  const auto started = Clock::now();
  TrainRun run = readTrainFlags(positional, flags);
  readCorpus(run, flags);
  const uint64_t seed = (uint64_t)intFlag(flags, "--seed", 0, 0, INT64_MAX);
  rt::TrainerOptions options = trainerOptions(run, flags, seed);
  options.started = started;
  startRunDirectory(run);
  TrainBackend backend;
  startBackend(backend, run, flags, rt::maxBatchRows(run.data, options.batching), seed);

  std::optional<Validator> validator;
  if (!run.validSrc.empty())
    validator.emplace(run, flags);
  TrainReporter reporter(flags, run.resuming);
  const std::string gradsOut = flag(flags, "--grads-out");
  rt::TrainerCallbacks callbacks;
  callbacks.onStep = [&](const rt::StepReport &r) {
    if (r.step == 1 && !gradsOut.empty())
      writeTensors(gradsOut, r.result->grads);
    reporter.step(r);
  };
  if (validator) {
    callbacks.validate = [&] { return (*validator)(*backend.step); };
    callbacks.onValidation = [&](int64_t epoch, int64_t step, const rt::Validation &v) {
      reporter.validation(epoch, step, v);
    };
  }
  rt::Trainer trainer(*backend.step, run.data, options, std::move(callbacks));
  if (run.resume) {
    rt::ResumePoint point = orDie(trainer.resume());
    for (const std::string &why : point.skipped)
      llvm::errs() << "transfuse: skipping a checkpoint that is not whole: " << why << "\n";
    if (point.checkpoint.empty())
      llvm::errs() << "train: --resume: no checkpoint in '" << run.ckptDir << "' yet; starting\n";
    else
      llvm::errs() << "train: resumed from " << point.checkpoint << " (step " << point.step
                   << ", epoch " << point.epoch + 1 << ")\n";
  }
  orDie(trainer.run());
  reporter.endBar();
  if (run.compiled || run.ckptDir.empty())
    return 0;
  // The reference backend writes the final weights (F32) only.
  if (std::error_code ec = llvm::sys::fs::create_directories(run.ckptDir))
    die("cannot create '" + run.ckptDir + "': " + ec.message());
  writeTensors(joinPath(run.ckptDir, rt::kWeightsFile), orDie(backend.step->weights()));
  return 0;
}

int tools::runAverageCheckpoints(const std::vector<std::string> &positional,
                                 const std::map<std::string, std::string> &flags) {
  if (positional.size() != 1)
    die("average-checkpoints expects one checkpoint directory");
  const std::string &dir = positional[0];
  const std::string out = flag(flags, "-o");
  if (out.empty())
    die("average-checkpoints needs an output: -o DIR (e.g. " + dir + "/averaged)");
  const int64_t last = intFlag(flags, "--last", 5, 1, 1 << 20);
  std::vector<int64_t> whole = wholeCheckpoints(dir);
  if (whole.empty())
    die("'" + dir + "' holds no whole checkpoint");
  if ((int64_t)whole.size() < last)
    die("--last " + llvm::Twine(last) + ": '" + dir + "' holds " + llvm::Twine(whole.size()) +
        " whole checkpoints");
  std::vector<std::string> paths;
  llvm::json::Array steps;
  for (int64_t i = last - 1; i >= 0; --i) {
    paths.push_back(joinPath(joinPath(dir, rt::checkpointName(whole[i])), rt::kWeightsFile));
    steps.push_back(whole[i]);
  }
  std::map<std::string, rt::Tensor> mean = orDie(rt::averageSafetensors(paths));
  std::string newest = joinPath(joinPath(dir, rt::checkpointName(whole.front())), rt::kStateFile);
  llvm::json::Object st = readJsonObject(newest);
  llvm::json::Object state{{"averaged_steps", std::move(steps)}};
  if (auto *c = st.getObject("config"))
    state["config"] = llvm::json::Object(*c);
  rt::Status s = rt::commitDirectory(out, [&](const std::string &tmp) {
    writeTensors(joinPath(tmp, rt::kWeightsFile), mean);
    std::error_code ec;
    llvm::raw_fd_ostream os(joinPath(tmp, rt::kStateFile), ec);
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(state))) << "\n";
    os.close();
    return ec || os.has_error() ? rt::Status::error("cannot write " + joinPath(tmp, rt::kStateFile))
                                : rt::Status::ok();
  });
  if (!s.isOk())
    die(s.message());
  llvm::outs() << "averaged " << last << " checkpoints (steps " << whole[last - 1] << " to "
               << whole.front() << ") into " << out << "\n";
  return 0;
}
