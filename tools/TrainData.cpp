//===- TrainData.cpp - what transfuse train reads -------------------------===//
//
// See TrainData.h.
//
//===----------------------------------------------------------------------===//

#include "tools/TrainData.h"

#include "tools/Cli.h"
#include "tools/DecodeCommands.h"
#include "runtime/host/Checkpoint.h"
#include "runtime/host/Corpus.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::tools;
namespace rt = ::transfuse::rt;
using rt::joinPath;

namespace {

using Clock = std::chrono::steady_clock;

/// The example of a pair (tgt null: a decoder_only line) by the config's
/// token conventions.
rt::Example makeExample(const ModelConfig &c, const std::vector<int32_t> &src,
                        const std::vector<int32_t> *tgt) {
  rt::TokenIds ids;
  ids.bos = c.bosId ? (int32_t)*c.bosId : -1;
  ids.eos = c.eosId ? (int32_t)*c.eosId : -1;
  ids.sourceBos = c.sourceBos;
  return rt::makeExample(ids, src, c.isDecoderOnly() ? nullptr : tgt);
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

} // namespace

TrainRun tools::readTrainFlags(const std::vector<std::string> &positional, const Flags &flags) {
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
                          "--save-every", "--valid-bleu", "--target", "--device", "--dtype"})
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

namespace {

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
  // One thread: SentencePiece's trainer gives other pieces on other thread
  // counts, and the tokenizer must not depend on --threads or on the ranks
  // of a data-parallel run (each trains the same one; 2 s on Multi30k).
  t.threads = 1;
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

} // namespace

void tools::readCorpus(TrainRun &run, const Flags &flags) {
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
