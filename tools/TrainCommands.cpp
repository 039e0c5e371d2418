//===- TrainCommands.cpp - transfuse train and average-checkpoints --------===//
//
// The training driver (docs/training.md): sentences from text (a joint
// SentencePiece vocabulary trained on the fly) or lines of ids, batched by
// token count with length bucketing and shuffled per epoch by the seed; the
// config compiled with --train and the fusion strategy (or the fp64
// reference backend's step); Adam at the paper's rate; validation per epoch
// on a decoding artifact that the weights are copied into; checkpoints
// committed atomically (runtime/host/Checkpoint.h), resumed bit for bit,
// pruned and averaged.
//
//===----------------------------------------------------------------------===//

#include "tools/TrainCommands.h"

#include "codegen/emit/Backend.h"

#include "codegen/reference/Train.h"
#include "ir/TransfuseDialect.h"
#include "models/Models.h"
#include "runtime/Safetensors.h"
#include "runtime/host/Checkpoint.h"
#include "runtime/host/CompiledModel.h"
#include "runtime/host/Corpus.h"
#include "runtime/host/Search.h"
#include "runtime/host/Tokenizer.h"
#include "tools/Bleu.h"
#include "tools/Cli.h"
#include "tools/DecodeCommands.h"
#include "compiler/Compiler.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/ADT/StringExtras.h"
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

namespace {

using Clock = std::chrono::steady_clock;

/// One example as the model reads it (the token conventions of
/// models/README.md): encoder_decoder: [BOS] src EOS, BOS tgt, tgt EOS;
/// decoder_only: [BOS] line as input, the same shifted by one (+ EOS) as labels.
struct Example {
  std::vector<int32_t> src, in, labels;
  int64_t line = 0; // in the files, from 1
};

Example makeExample(const ModelConfig &c, const std::vector<int32_t> &src,
                    const std::vector<int32_t> *tgt) {
  Example e;
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

rt::Tensor padded(const std::vector<Example> &ex, const std::vector<int32_t> &rows,
                  std::vector<int32_t> Example::*field, int32_t pad) {
  size_t width = 0;
  for (int32_t i : rows)
    width = std::max(width, (ex[i].*field).size());
  rt::Tensor t = rt::Tensor::zeros(rt::DType::I32, {(int64_t)rows.size(), (int64_t)width});
  int32_t *p = t.data<int32_t>();
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto &row = ex[rows[r]].*field;
    std::fill_n(p + r * width, width, pad);
    std::copy(row.begin(), row.end(), p + r * width);
  }
  return t;
}

std::string join(const std::string &dir, const std::string &name) {
  llvm::SmallString<256> p(dir);
  llvm::sys::path::append(p, name);
  return p.str().str();
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

int64_t intField(const llvm::json::Object &o, llvm::StringRef key, const std::string &path) {
  if (auto v = o.getInteger(key))
    return *v;
  die(path + ": key '" + key + "' is missing or not an integer");
}

/// The sentences of `path` as ids: lines of ids, or text through the tokenizer.
std::vector<std::vector<int32_t>> sentences(const std::string &path,
                                            const std::vector<std::string> &lines,
                                            const rt::Tokenizer *tokenizer) {
  std::vector<std::vector<int32_t>> out;
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

/// What a checkpoint directory holds besides the step-* checkpoints.
constexpr const char *kConfigFile = "config.json";
constexpr const char *kTokenizerFile = "tokenizer.model";
constexpr const char *kStateFile = "state.json";
constexpr const char *kWeightsFile = "model.safetensors";
constexpr const char *kOptimizerFile = "optimizer.safetensors";

void writeTensors(const std::string &path, const std::map<std::string, rt::Tensor> &tensors) {
  std::vector<std::pair<std::string, const rt::Tensor *>> list;
  for (const auto &[name, t] : tensors)
    list.emplace_back(name, &t);
  if (rt::Status st = rt::writeSafetensors(path, list); !st.isOk())
    die(st.message());
}

/// The step-* checkpoints of `dir` that verify, newest first; the others
/// are named on stderr.
std::vector<int64_t> wholeCheckpoints(const std::string &dir) {
  std::vector<int64_t> steps = rt::listCheckpoints(dir), whole;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (rt::Status s = rt::verifyDirectory(join(dir, rt::checkpointName(*it))); !s.isOk()) {
      llvm::errs() << "transfuse: skipping a checkpoint that is not whole: " << s.message() << "\n";
      continue;
    }
    whole.push_back(*it);
  }
  return whole;
}

/// The checkpoint with the lowest valid_loss among `steps` (none: -1).
int64_t bestCheckpoint(const std::string &dir, const std::vector<int64_t> &steps) {
  int64_t best = -1;
  double bestLoss = INFINITY;
  for (int64_t s : steps) {
    std::string path = join(join(dir, rt::checkpointName(s)), kStateFile);
    llvm::json::Object state = readJsonObject(path);
    if (auto loss = state.getNumber("valid_loss"); loss && *loss < bestLoss) {
      bestLoss = *loss;
      best = s;
    }
  }
  return best;
}

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
  std::string out = join(dir, "artifact-" + llvm::utohexstr(llvm::xxh3_64bits(key), /*LowerCase=*/true));
  if (llvm::sys::fs::exists(join(out, "libmodel.so")))
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
      if (std::error_code c = llvm::sys::fs::copy_file(it->path(), join(staging, name)))
        die("cannot copy '" + it->path() + "': " + c.message());
  }
  if (std::error_code c = llvm::sys::fs::rename(staging, out)) {
    llvm::sys::fs::remove_directories(staging);
    if (!llvm::sys::fs::exists(join(out, "libmodel.so")))
      die("cannot create '" + out + "': " + c.message());
  }
  return out;
}

} // namespace

CheckpointDir tools::openCheckpointDir(const std::string &dir, const std::string &which) {
  CheckpointDir c;
  c.dir = dir;
  std::string configPath = join(dir, kConfigFile);
  auto text = llvm::MemoryBuffer::getFile(configPath, /*IsText=*/true);
  if (!text)
    die("'" + dir + "' is neither a compiled artifact (manifest.json) nor a checkpoint directory (" +
        kConfigFile + ")");
  c.config = orDie(parseModelConfig((*text)->getBuffer(), configPath));
  std::string checkpoint;
  if (which == "averaged") {
    checkpoint = join(dir, "averaged");
  } else if (which == "best" || which == "last") {
    std::vector<int64_t> whole = wholeCheckpoints(dir);
    if (whole.empty())
      die("'" + dir + "' holds no whole checkpoint");
    int64_t step = which == "best" ? bestCheckpoint(dir, whole) : -1;
    checkpoint = join(dir, rt::checkpointName(step >= 0 ? step : whole.front()));
  } else {
    checkpoint = join(dir, which);
    if (!llvm::sys::fs::is_directory(checkpoint))
      die("--checkpoint " + which + ": '" + dir +
          "' has no such checkpoint (best, last, averaged or a step-N name)");
  }
  if (rt::Status s = rt::verifyDirectory(checkpoint); !s.isOk())
    die("--checkpoint " + which + ": " + s.message());
  c.weights = join(checkpoint, kWeightsFile);
  if (llvm::sys::fs::exists(join(dir, kTokenizerFile)))
    c.tokenizer = orDie(rt::Tokenizer::load(join(dir, kTokenizerFile)));
  c.artifact = decodeArtifact(c.config, dir);
  return c;
}

int tools::runTrain(const std::vector<std::string> &positional,
                    const std::map<std::string, std::string> &flags) {
  const auto started = Clock::now();
  if (positional.size() != 1)
    die("train expects one config (JSON)");
  const std::string backend = flag(flags, "--backend", "compiled");
  if (backend != "compiled" && backend != "reference")
    die("--backend " + backend + " is not one of compiled, reference");
  const bool compiled = backend == "compiled";
  const std::string tokenizerKind = flag(flags, "--tokenizer", "ids");
  if (tokenizerKind != "ids" && tokenizerKind != "sentencepiece")
    die("--tokenizer " + tokenizerKind + " is not one of ids, sentencepiece");
  if (flags.count("--vocab-size") && tokenizerKind != "sentencepiece")
    die("--vocab-size sets the size of the sentencepiece tokenizer (--tokenizer sentencepiece)");
  const std::string targetName = flag(flags, "--target", "cpu");
  const emit::Backend *target = emit::backendNamed(targetName);
  if (!target)
    die("--target " + targetName + " is not one of " + llvm::join(emit::backendNames(), ", "));
  const int deviceOrdinal = (int)intFlag(flags, "--device", 0, 0, 1023);
  if (!compiled)
    for (const char *f : {"--threads", "--fusion", "--resume", "--keep", "--src-valid",
                          "--save-every", "--valid-bleu", "--target", "--device"})
      if (flags.count(f))
        die(llvm::Twine(f) + " applies to --backend compiled");
  const std::string ckptDir = flag(flags, "--checkpoint-dir");
  const bool resume = flags.count("--resume") != 0;
  for (const char *f : {"--resume", "--keep", "--save-every"})
    if (flags.count(f) && ckptDir.empty())
      die(llvm::Twine(f) + " needs --checkpoint-dir");
  const int64_t keep = intFlag(flags, "--keep", 0, 1, INT64_MAX);
  const int64_t saveEvery = intFlag(flags, "--save-every", 0, 1, INT64_MAX);

  // The config: on --resume the checkpoint directory's (resolved at the
  // first run: the tokenizer's vocabulary and the flags that change it).
  std::string configPath = positional[0];
  const bool resuming = resume && llvm::sys::fs::exists(join(ckptDir, kConfigFile));
  if (resuming)
    configPath = join(ckptDir, kConfigFile);
  auto text = llvm::MemoryBuffer::getFile(configPath, /*IsText=*/true);
  if (!text)
    die("cannot read '" + configPath + "': " + text.getError().message());
  ModelConfig config = orDie(parseModelConfig((*text)->getBuffer(), configPath));
  if (!resuming)
    config.dropout = floatFlag(flags, "--dropout", config.dropout,
                               [](double v) { return v >= 0 && v < 1; }, "a rate in [0, 1)");
  if (!config.isDecoderOnly())
    for (auto [id, key] : {std::pair{config.bosId, "bos_id"}, {config.eosId, "eos_id"}})
      if (!id)
        die(configPath + ": training needs the config's " + key);

  const std::string srcPath = flag(flags, "--src-train"), tgtPath = flag(flags, "--tgt-train");
  if (srcPath.empty() || (!config.isDecoderOnly() && tgtPath.empty()))
    die(config.isDecoderOnly() ? "train needs --src-train" : "train needs --src-train and --tgt-train");
  const std::string srcValid = flag(flags, "--src-valid"), tgtValid = flag(flags, "--tgt-valid");
  if (srcValid.empty() != tgtValid.empty() || (!srcValid.empty() && config.isDecoderOnly()))
    die(config.isDecoderOnly() ? "validation (--src-valid) is for encoder_decoder models"
                               : "validation needs both --src-valid and --tgt-valid");
  if (flags.count("--valid-bleu") && srcValid.empty())
    die("--valid-bleu needs --src-valid and --tgt-valid");

  // Text first: every file read and checked before anything is trained.
  // Text: a blank line is a sentence missing (ids: an empty list is allowed).
  auto readLines = [&](const std::string &path) {
    std::vector<std::string> lines = orDie(rt::readTextLines(path));
    if (tokenizerKind == "sentencepiece")
      for (size_t i = 0; i < lines.size(); ++i)
        if (llvm::StringRef(lines[i]).trim().empty())
          die(path + ": line " + llvm::Twine(i + 1) + " is blank (every line is a sentence)");
    return lines;
  };
  std::vector<std::string> srcLines = readLines(srcPath), tgtLines, srcValidLines, tgtValidLines;
  auto sameCount = [](const std::string &a, size_t na, const std::string &b, size_t nb) {
    if (na != nb)
      die(a + " has " + llvm::Twine(na) + " lines but " + b + " has " + llvm::Twine(nb));
  };
  if (!config.isDecoderOnly()) {
    tgtLines = readLines(tgtPath);
    sameCount(srcPath, srcLines.size(), tgtPath, tgtLines.size());
  }
  if (!srcValid.empty()) {
    srcValidLines = readLines(srcValid);
    tgtValidLines = readLines(tgtValid);
    sameCount(srcValid, srcValidLines.size(), tgtValid, tgtValidLines.size());
  }

  std::unique_ptr<rt::Tokenizer> tokenizer;
  if (resuming && tokenizerKind != "sentencepiece" &&
      llvm::sys::fs::exists(join(ckptDir, kTokenizerFile)))
    die("--resume: '" + ckptDir + "' was trained on text: --tokenizer sentencepiece");
  if (tokenizerKind == "sentencepiece") {
    if (!config.padId || !config.bosId || !config.eosId || !config.unkId)
      die(configPath + ": a sentencepiece tokenizer reserves pad_id, bos_id, eos_id and unk_id: "
                       "the config needs all four");
    if (resuming) {
      if (!llvm::sys::fs::exists(join(ckptDir, kTokenizerFile)))
        die("--resume: '" + ckptDir + "' was trained on lines of ids (--tokenizer ids)");
      tokenizer = orDie(rt::Tokenizer::load(join(ckptDir, kTokenizerFile)));
    } else {
      rt::Tokenizer::TrainOptions t;
      t.vocabSize = (int32_t)intFlag(flags, "--vocab-size", 8000, 8, 1 << 20);
      t.specials = {(int32_t)*config.padId, (int32_t)*config.bosId, (int32_t)*config.eosId,
                    (int32_t)*config.unkId};
      t.threads = (int)intFlag(flags, "--threads", 0, 0, 1024);
      if (t.threads == 0)
        t.threads = (int)std::max(1u, std::thread::hardware_concurrency());
      auto t0 = Clock::now();
      tokenizer = orDie(rt::Tokenizer::train({&srcLines, &tgtLines}, t));
      llvm::errs() << llvm::formatv(
          "tokenizer: sentencepiece BPE, {0} pieces, trained in {1:f1} s\n", tokenizer->vocabSize(),
          std::chrono::duration<double>(Clock::now() - t0).count());
      config.srcVocabSize = config.tgtVocabSize = tokenizer->vocabSize();
    }
  }

  std::vector<std::vector<int32_t>> src = sentences(srcPath, srcLines, tokenizer.get()), tgt;
  if (!config.isDecoderOnly())
    tgt = sentences(tgtPath, tgtLines, tokenizer.get());
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
  // Examples; over-long pairs are an error naming the line, or dropped
  // with --skip-long.
  const bool skipLong = flags.count("--skip-long") != 0;
  std::vector<Example> ex;
  std::vector<rt::ExampleLength> lengths;
  int64_t skipped = 0, maxLen = 1;
  for (size_t i = 0; i < src.size(); ++i) {
    Example e = makeExample(config, src[i], config.isDecoderOnly() ? nullptr : &tgt[i]);
    e.line = (int64_t)i + 1;
    if (config.isDecoderOnly() && e.in.empty())
      die(srcPath + ": line " + llvm::Twine(i + 1) + ": fewer than 2 tokens to train on");
    const int64_t s = e.src.size(), t = e.in.size();
    if (std::max(s, t) > config.maxSeqLen) {
      if (skipLong) {
        ++skipped;
        continue;
      }
      die((s >= t ? srcPath : tgtPath) + ": line " + llvm::Twine(i + 1) + ": " +
          llvm::Twine(std::max(s, t)) + " tokens with the specials, over the config's max_seq_len " +
          llvm::Twine(config.maxSeqLen) + " (--skip-long drops such pairs)");
    }
    maxLen = std::max({maxLen, s, t});
    lengths.push_back({(int32_t)s, (int32_t)t});
    ex.push_back(std::move(e));
  }
  if (skipped)
    llvm::errs() << "train: --skip-long dropped " << skipped << " of " << src.size()
                 << " pairs over max_seq_len " << config.maxSeqLen << "\n";
  if (ex.empty())
    die(srcPath + ": no pairs left to train on");
  std::vector<std::vector<int32_t>> validSrc, validTgt;
  if (!srcValid.empty()) {
    validSrc = sentences(srcValid, srcValidLines, tokenizer.get());
    validTgt = sentences(tgtValid, tgtValidLines, tokenizer.get());
    checkIds(validSrc, srcValid, config.srcVocabSize);
    checkIds(validTgt, tgtValid, config.tgtVocabSize);
    // The same length rule as training's: an error naming the line, or
    // with --skip-long the pair dropped (its reference too).
    std::vector<std::vector<int32_t>> keptSrc, keptTgt;
    std::vector<std::string> keptRefs;
    for (size_t i = 0; i < validSrc.size(); ++i) {
      Example e = makeExample(config, validSrc[i], &validTgt[i]);
      const int64_t s = e.src.size(), t = e.in.size();
      if (std::max(s, t) > config.maxSeqLen) {
        if (!skipLong)
          die((s >= t ? srcValid : tgtValid) + ": line " + llvm::Twine(i + 1) + ": " +
              llvm::Twine(std::max(s, t)) + " tokens with the specials, over the config's " +
              "max_seq_len " + llvm::Twine(config.maxSeqLen) + " (--skip-long drops such pairs)");
        continue;
      }
      keptSrc.push_back(std::move(validSrc[i]));
      keptTgt.push_back(std::move(validTgt[i]));
      keptRefs.push_back(std::move(tgtValidLines[i]));
    }
    if (keptSrc.size() < validSrc.size())
      llvm::errs() << "train: --skip-long dropped " << validSrc.size() - keptSrc.size() << " of "
                   << validSrc.size() << " validation pairs over max_seq_len " << config.maxSeqLen
                   << "\n";
    validSrc = std::move(keptSrc);
    validTgt = std::move(keptTgt);
    tgtValidLines = std::move(keptRefs);
  }

  const int64_t batchTokens = intFlag(flags, "--batch-tokens", 4096, 1, INT64_MAX);
  const int64_t maxRows = intFlag(flags, "--max-sentences", 0, 1, INT64_MAX);
  const std::string bucketing = flag(flags, "--batching", "bucket");
  if (bucketing != "bucket" && bucketing != "file")
    die("--batching " + bucketing + " is not one of bucket, file");
  const uint64_t seed = (uint64_t)intFlag(flags, "--seed", 0, 0, INT64_MAX);
  // An epoch's batches: bucketed by length and shuffled by (seed, epoch),
  // or consecutive in file order (--batching file, every epoch alike).
  auto epochPlan = [&](int64_t epoch) {
    return rt::epochBatches(lengths, batchTokens, maxRows, seed, epoch, bucketing == "bucket");
  };
  int64_t maxBatch = bucketing == "bucket" ? rt::maxBatchRows(lengths, batchTokens, maxRows) : 1;
  if (bucketing == "file")
    for (const auto &b : epochPlan(0))
      maxBatch = std::max<int64_t>(maxBatch, b.size());

  // The run directory: the resolved config and the tokenizer, once.
  if (!ckptDir.empty() && !resuming) {
    if (std::error_code ec = llvm::sys::fs::create_directories(ckptDir))
      die("cannot create '" + ckptDir + "': " + ec.message());
    if (!rt::listCheckpoints(ckptDir).empty())
      die("'" + ckptDir + "' holds checkpoints of another run: --resume continues it");
    std::string json;
    llvm::raw_string_ostream os(json);
    os << llvm::formatv("{0:2}", llvm::json::Value(toJson(config))) << "\n";
    if (rt::Status s = rt::writeFileAtomically(join(ckptDir, kConfigFile), json); !s.isOk())
      die(s.message());
    if (tokenizer)
      if (rt::Status s = tokenizer->save(join(ckptDir, kTokenizerFile)); !s.isOk())
        die(s.message());
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
  const std::string initWeights = flag(flags, "--init-weights");
  const int threads = (int)intFlag(flags, "--threads", 0, 0, 1024);
  // The reference: @loss_grad of the unfused loss in fp64. Compiled: the
  // fused graph differentiated and compiled, weights held by the model
  // (the same seeded draw as the reference's without --init-weights).
  func::FuncOp lossGrad;
  std::optional<reference::TrainState> state;
  std::optional<compiler::TemporaryDirectory> artifact;
  std::unique_ptr<rt::CompiledModel> model;
  if (compiled) {
    FusionStrategy strategy = orDie(FusionStrategy::parse(flag(flags, "--fusion", "all")));
    artifact.emplace(orDie(compiler::TemporaryDirectory::create("transfuse-train")));
    // --target cuda: the train step and Adam run on the GPU (docs/cuda.md).
    emit::BuildOptions artifactOptions;
    artifactOptions.target = targetName;
    if (llvm::Error e = target->available())
      die(llvm::toString(std::move(e)));
    orDie(compiler::compile(*module, artifact->path(),
                            compiler::CompileOptions{strategy, compiler::Emit::kShared,
                                                     artifactOptions, /*train=*/true}));
    rt::LoadOptions load;
    load.weightsPath = initWeights;
    load.seed = seed;
    load.threads = threads;
    load.deviceOrdinal = deviceOrdinal;
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

  // Where the data stream stands: the epoch and its next batch.
  int64_t step = 0, epoch = 0, position = 0;
  double bestLoss = INFINITY;
  if (resume) {
    std::vector<int64_t> whole = wholeCheckpoints(ckptDir);
    if (whole.empty()) {
      llvm::errs() << "train: --resume: no checkpoint in '" << ckptDir << "' yet; starting\n";
    } else {
      std::string dir = join(ckptDir, rt::checkpointName(whole.front()));
      std::string statePath = join(dir, kStateFile);
      llvm::json::Object st = readJsonObject(statePath);
      step = intField(st, "step", statePath);
      epoch = intField(st, "epoch", statePath);
      position = intField(st, "batch", statePath);
      if ((uint64_t)intField(st, "seed", statePath) != seed)
        die("--seed " + llvm::Twine(seed) + " differs from the run's seed in " + statePath);
      if (auto b = st.getNumber("best_valid_loss"))
        bestLoss = *b;
      rt::SafetensorsFile weights = orDie(rt::SafetensorsFile::open(join(dir, kWeightsFile)));
      rt::SafetensorsFile moments = orDie(rt::SafetensorsFile::open(join(dir, kOptimizerFile)));
      for (const auto &p : model->params()) {
        std::string name = p.role == rt::CompiledModel::ParamRole::kWeight ? p.name
                           : p.role == rt::CompiledModel::ParamRole::kAdamM ? "adam_m." + p.name
                                                                            : "adam_v." + p.name;
        const rt::SafetensorsFile &file =
            p.role == rt::CompiledModel::ParamRole::kWeight ? weights : moments;
        if (!file.has(name))
          die(file.path() + ": no tensor '" + name + "'");
        orDie(model->writeParam(p.name, p.role, orDie(file.read(name))));
      }
      orDie(model->setTrainSteps(intField(st, "train_steps", statePath)));
      llvm::errs() << "train: resumed from " << dir << " (step " << step << ", epoch " << epoch + 1
                   << ")\n";
    }
  }

  reference::AdamOptions adam;
  adam.dModel = config.dModel;
  adam.warmup = intFlag(flags, "--warmup", 4000, 1, INT64_MAX);
  adam.lrFactor = floatFlag(flags, "--lr-factor", 1.0, [](double v) { return v > 0; }, "a number > 0");
  adam.clipNorm = floatFlag(flags, "--clip-norm", 0.0, [](double v) { return v >= 0; }, "a number >= 0");
  adam.weightDecay =
      floatFlag(flags, "--weight-decay", 0.0, [](double v) { return v >= 0; }, "a number >= 0");
  const int64_t accumulate = intFlag(flags, "--accumulate", 1, 1, 1 << 20);
  // When to stop: --steps (the run's total), --epochs, --time-limit
  // (minutes of wall time since the start, tokenizer and compile included);
  // none of them: one epoch.
  const int64_t maxSteps = intFlag(flags, "--steps", 0, 1, INT64_MAX);
  const int64_t maxEpochs = intFlag(flags, "--epochs", maxSteps || flags.count("--time-limit") ? 0 : 1,
                                    1, INT64_MAX);
  const double timeLimit = floatFlag(flags, "--time-limit", 0.0, [](double v) { return v > 0; },
                                     "minutes > 0");

  // Validation: the weights copied into a decoding artifact; the loss is
  // the mean negative log-likelihood of the references' tokens (EOS
  // included, no label smoothing), perplexity its exp; with --valid-bleu,
  // greedy translations against the raw references.
  std::unique_ptr<rt::CompiledModel> decoder;
  std::unique_ptr<rt::Translator> translator;
  if (!validSrc.empty()) {
    std::optional<compiler::TemporaryDirectory> scratch;
    std::string where = ckptDir;
    if (where.empty()) {
      scratch.emplace(orDie(compiler::TemporaryDirectory::create("transfuse-valid")));
      where = scratch->path();
    }
    std::string dir = decodeArtifact(config, where);
    rt::LoadOptions load;
    load.threads = threads;
    decoder = orDie(rt::CompiledModel::load(join(dir, "libmodel.so"), load));
    translator = orDie(rt::Translator::create(*decoder, orDie(rt::readTokenIds(join(dir, "manifest.json")))));
  }
  auto validate = [&]() {
    for (const auto &p : model->params())
      if (p.role == rt::CompiledModel::ParamRole::kWeight)
        orDie(decoder->writeParam(p.name, p.role, orDie(model->readParam(p.name, p.role))));
    double nll = 0;
    int64_t tokens = 0;
    const int64_t batch = std::min<int64_t>(32, translator->rows());
    for (size_t first = 0; first < validSrc.size(); first += batch) {
      size_t end = std::min(validSrc.size(), first + (size_t)batch);
      auto scored = translator->score({validSrc.begin() + first, validSrc.begin() + end},
                                      {validTgt.begin() + first, validTgt.begin() + end}, (int64_t)first);
      if (!scored.isOk())
        die(srcValid + ": " + scored.status().message());
      for (const rt::Hypothesis &h : *scored) {
        nll -= h.logProb;
        tokens += (int64_t)h.tokenLogProbs.size();
      }
    }
    std::optional<double> bleu;
    if (flags.count("--valid-bleu")) {
      rt::SearchOptions o;
      std::vector<std::string> hyps;
      for (size_t first = 0; first < validSrc.size(); first += batch) {
        size_t end = std::min(validSrc.size(), first + (size_t)batch);
        auto result = translator->translate({validSrc.begin() + first, validSrc.begin() + end}, o,
                                            nullptr, (int64_t)first);
        if (!result.isOk())
          die(srcValid + ": " + result.status().message());
        for (const auto &h : *result) {
          std::string text;
          if (tokenizer) {
            text = tokenizer->decode(h.front().ids);
          } else {
            for (int32_t id : h.front().ids)
              text += (text.empty() ? "" : " ") + std::to_string(id);
          }
          hyps.push_back(text);
        }
      }
      bleu = corpusBleu(hyps, tgtValidLines);
    }
    return std::pair{nll / std::max<int64_t>(1, tokens), bleu};
  };

  std::unique_ptr<llvm::raw_fd_ostream> log;
  if (std::string path = flag(flags, "--log-json"); !path.empty()) {
    std::error_code ec;
    log = std::make_unique<llvm::raw_fd_ostream>(path, ec,
                                                 resuming ? llvm::sys::fs::OF_Append : llvm::sys::fs::OF_None);
    if (ec)
      die("cannot write '" + path + "': " + ec.message());
  }
  const bool progressBar = ::isatty(2) && !flags.count("--no-progress");
  bool barShown = false; // the bar's line is open on stderr
  auto endBar = [&] {
    if (barShown)
      llvm::errs() << "\n";
    barShown = false;
  };
  std::optional<double> lastValid;

  auto save = [&](bool epochEnd) {
    if (ckptDir.empty())
      return;
    llvm::json::Object st{{"step", step},
                          {"epoch", epoch},
                          {"batch", position},
                          {"seed", (int64_t)seed},
                          {"train_steps", model->trainSteps()},
                          {"rng", "counter-based: batches keyed by (seed, epoch), dropout by "
                                  "(seed, step); the seed is the whole state"},
                          {"tokenizer", tokenizer ? kTokenizerFile : "ids"},
                          {"config", toJson(config)}};
    if (epochEnd && lastValid)
      st["valid_loss"] = *lastValid;
    if (std::isfinite(bestLoss))
      st["best_valid_loss"] = bestLoss;
    std::map<std::string, rt::Tensor> weights, moments;
    for (const auto &p : model->params()) {
      rt::Tensor t = orDie(model->readParam(p.name, p.role));
      if (p.role == rt::CompiledModel::ParamRole::kWeight)
        weights.emplace(p.name, std::move(t));
      else
        moments.emplace((p.role == rt::CompiledModel::ParamRole::kAdamM ? "adam_m." : "adam_v.") +
                            p.name,
                        std::move(t));
    }
    std::string path = join(ckptDir, rt::checkpointName(step));
    rt::Status s = rt::commitDirectory(path, [&](const std::string &tmp) {
      writeTensors(join(tmp, kWeightsFile), weights);
      writeTensors(join(tmp, kOptimizerFile), moments);
      std::string json;
      llvm::raw_string_ostream os(json);
      os << llvm::formatv("{0:2}", llvm::json::Value(std::move(st))) << "\n";
      std::error_code ec;
      llvm::raw_fd_ostream out(join(tmp, kStateFile), ec);
      out << json;
      out.close();
      return ec || out.has_error() ? rt::Status::error("cannot write " + join(tmp, kStateFile))
                                   : rt::Status::ok();
    });
    if (!s.isOk())
      die(s.message());
    // --keep N: the last N and the best by validation loss.
    if (keep > 0) {
      std::vector<int64_t> all = rt::listCheckpoints(ckptDir);
      int64_t best = bestCheckpoint(ckptDir, wholeCheckpoints(ckptDir));
      for (size_t i = 0; i + keep < all.size(); ++i)
        if (all[i] != best)
          if (rt::Status r = rt::removeDirectory(join(ckptDir, rt::checkpointName(all[i]))); !r.isOk())
            die(r.message());
    }
  };

  std::vector<std::vector<int32_t>> plan = epochPlan(epoch);
  int64_t stepsThisRun = 0, tokensThisRun = 0;
  auto trainStart = Clock::now();
  auto elapsedMinutes = [&] { return std::chrono::duration<double>(Clock::now() - started).count() / 60; };
  bool savedLast = false;
  for (;;) {
    if ((maxSteps && step >= maxSteps) || (maxEpochs && epoch >= maxEpochs) ||
        (timeLimit > 0 && elapsedMinutes() >= timeLimit))
      break;
    std::vector<reference::MicroBatch> micro;
    int64_t tokens = 0;
    bool epochEnds = false;
    // A step's micro-batches are the next --accumulate batches of the
    // epoch; an epoch's last step takes what is left of it.
    for (int64_t k = 0; k < accumulate && !epochEnds; ++k) {
      const std::vector<int32_t> &rows = plan[position++];
      reference::MicroBatch mb;
      if (config.isDecoderOnly()) {
        mb.inputs["tokens"] = padded(ex, rows, &Example::in, pad < 0 ? 0 : pad);
      } else {
        mb.inputs["src_tokens"] = padded(ex, rows, &Example::src, pad);
        mb.inputs["tgt_tokens"] = padded(ex, rows, &Example::in, pad);
      }
      mb.inputs["labels"] = padded(ex, rows, &Example::labels, pad);
      for (int32_t i : rows)
        mb.tokens += (int64_t)ex[i].labels.size();
      tokens += mb.tokens;
      micro.push_back(std::move(mb));
      if (position == (int64_t)plan.size())
        epochEnds = true;
    }
    ++step;
    auto t0 = Clock::now();
    // Dropout masks are keyed by (seed, step, site): new each step, the same
    // in the forward and in the backward that regenerates them.
    reference::StepResult r;
    if (compiled && step == 1 && flags.count("--grads-out")) {
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
      r.lr = reference::learningRate(adam, step);
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
    double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    ++stepsThisRun;
    tokensThisRun += tokens;
    if (step == 1)
      if (std::string path = flag(flags, "--grads-out"); !path.empty())
        writeTensors(path, r.grads);
    llvm::json::Object row{{"step", step},
                           {"loss", r.loss},
                           {"lr", r.lr},
                           {"tokens", tokens},
                           {"tokens_per_s", tokens / std::max(seconds, 1e-9)},
                           {"grad_norm", r.gradNorm}};
    if (log) {
      *log << llvm::json::Value(std::move(row)) << "\n";
      log->flush();
    }
    double rate = tokensThisRun / std::max(1e-9, std::chrono::duration<double>(Clock::now() - trainStart).count());
    if (progressBar) {
      // The ETA of whichever limit is set: steps, epochs or time.
      double eta = -1;
      double perStep = std::chrono::duration<double>(Clock::now() - trainStart).count() / stepsThisRun;
      if (maxSteps)
        eta = perStep * (maxSteps - step);
      else if (maxEpochs)
        eta = perStep * ((double)(maxEpochs - epoch) * plan.size() - position) / accumulate;
      if (timeLimit > 0)
        eta = eta < 0 ? (timeLimit - elapsedMinutes()) * 60 : std::min(eta, (timeLimit - elapsedMinutes()) * 60);
      llvm::errs() << llvm::formatv("\repoch {0} step {1} loss {2:f4} lr {3:e2} {4:f0} tok/s", epoch + 1,
                                    step, r.loss, r.lr, rate);
      if (eta >= 0)
        llvm::errs() << llvm::formatv(" ETA {0}:{1:d2}  ", (int64_t)eta / 60, (int64_t)eta % 60);
      llvm::errs().flush();
      barShown = true;
    } else {
      llvm::outs() << llvm::formatv("step {0}: loss {1:f6} lr {2:e3} tokens {3}\n", step, r.loss,
                                    r.lr, tokens);
      llvm::outs().flush();
    }
    savedLast = false;
    if (epochEnds) {
      // The stream moves to the next epoch here, so that a checkpoint
      // resumes at its start.
      ++epoch;
      position = 0;
      plan = epochPlan(epoch);
      lastValid.reset();
      if (translator) {
        auto [loss, bleu] = validate();
        lastValid = loss;
        bestLoss = std::min(bestLoss, loss);
        endBar();
        llvm::outs() << llvm::formatv("epoch {0}: valid loss {1:f4} perplexity {2:f2}", epoch, loss,
                                      std::exp(loss));
        if (bleu)
          llvm::outs() << llvm::formatv(" BLEU {0:f2} (greedy)", *bleu);
        llvm::outs() << "\n";
        llvm::outs().flush();
        if (log) {
          llvm::json::Object v{{"epoch", epoch}, {"step", step}, {"valid_loss", loss}};
          if (bleu)
            v["valid_bleu"] = *bleu;
          *log << llvm::json::Value(std::move(v)) << "\n";
          log->flush();
        }
      }
      if (compiled) {
        save(true);
        savedLast = true;
      }
    }
    if (compiled && saveEvery && step % saveEvery == 0 && !savedLast) {
      save(false);
      savedLast = true;
    }
  }
  endBar();
  if (ckptDir.empty())
    return 0;
  if (compiled) {
    if (!savedLast)
      save(false);
    return 0;
  }
  // The reference backend writes the final weights (F32) only.
  if (std::error_code ec = llvm::sys::fs::create_directories(ckptDir))
    die("cannot create '" + ckptDir + "': " + ec.message());
  std::map<std::string, rt::Tensor> f32;
  for (const auto &[name, w] : state->weights) {
    rt::Tensor t = rt::Tensor::zeros(rt::DType::F32, w.shape);
    for (int64_t i = 0; i < w.numElements(); ++i)
      t.data<float>()[i] = (float)w.data<double>()[i];
    f32.emplace(name, std::move(t));
  }
  writeTensors(join(ckptDir, kWeightsFile), f32);
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
    paths.push_back(join(join(dir, rt::checkpointName(whole[i])), kWeightsFile));
    steps.push_back(whole[i]);
  }
  std::map<std::string, rt::Tensor> mean = orDie(rt::averageSafetensors(paths));
  std::string newest = join(join(dir, rt::checkpointName(whole.front())), kStateFile);
  llvm::json::Object st = readJsonObject(newest);
  llvm::json::Object state{{"averaged_steps", std::move(steps)}};
  if (auto *c = st.getObject("config"))
    state["config"] = llvm::json::Object(*c);
  rt::Status s = rt::commitDirectory(out, [&](const std::string &tmp) {
    writeTensors(join(tmp, kWeightsFile), mean);
    std::error_code ec;
    llvm::raw_fd_ostream os(join(tmp, kStateFile), ec);
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(state))) << "\n";
    os.close();
    return ec || os.has_error() ? rt::Status::error("cannot write " + join(tmp, kStateFile))
                                : rt::Status::ok();
  });
  if (!s.isOk())
    die(s.message());
  llvm::outs() << "averaged " << last << " checkpoints (steps " << whole[last - 1] << " to "
               << whole.front() << ") into " << out << "\n";
  return 0;
}
