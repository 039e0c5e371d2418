//===- DecodeCommands.cpp - translate, score and bench decode --------------===//

#include "tools/DecodeCommands.h"

#include "runtime/host/CompiledModel.h"
#include "runtime/host/DirectoryTokenizer.h"
#include "runtime/host/HfTokenizer.h"
#include "runtime/host/Tokenizer.h"
#include "runtime/host/Search.h"
#include "tools/Cli.h"
#include "tools/Commands.h"
#include "compiler/Compiler.h"
#include "tools/TrainCommands.h"
#include "runtime/kernels/Int8Gemm.h"
#include "runtime/kernels/Targets.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>

using namespace mlir::transfuse::tools;

/// Lines of space-separated ids; an empty line is an empty list. Anything
/// else is an error naming `name` (the file or flag) and the line.
std::vector<std::vector<int32_t>> mlir::transfuse::tools::parseIdLines(llvm::StringRef text, const std::string &name) {
  std::vector<std::vector<int32_t>> lines;
  if (text.ends_with("\n"))
    text = text.drop_back();
  if (text.empty())
    return lines;
  llvm::SmallVector<llvm::StringRef> rows;
  text.split(rows, '\n');
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<int32_t> ids;
    llvm::SmallVector<llvm::StringRef> words;
    rows[i].rtrim("\r").split(words, ' ', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef w : words) {
      int64_t id;
      if (w.getAsInteger(10, id) || id < 0 || id > INT32_MAX)
        die(name + ": line " + llvm::Twine(i + 1) + ": '" + w + "' is not a token id");
      ids.push_back((int32_t)id);
    }
    lines.push_back(std::move(ids));
  }
  return lines;
}

/// The id lines of `path` ("" or "-": stdin).
std::vector<std::vector<int32_t>> mlir::transfuse::tools::readIdLines(const std::string &path) {
  std::string name = path.empty() || path == "-" ? "<stdin>" : path;
  auto buffer = path.empty() || path == "-" ? llvm::MemoryBuffer::getSTDIN()
                                            : llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    die("cannot read '" + name + "': " + buffer.getError().message());
  return parseIdLines((*buffer)->getBuffer(), name);
}

namespace {

std::string joinIds(const std::vector<int32_t> &ids) {
  std::string s;
  for (int32_t id : ids)
    s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

struct Artifact {
  std::string dir;  // the compiled artifact's directory
  std::unique_ptr<rt::CompiledModel> model;
  rt::TokenIds ids;
  // Text in and out (null: ids): a checkpoint directory's tokenizer, or the
  // Marian tokenizer an artifact carries.
  std::unique_ptr<rt::TextTokenizer> tokenizer;
};

/// DIR's library with weights (--weights, else random from --weights-seed)
/// and --threads, and its token conventions.
Artifact loadArtifact(const std::vector<std::string> &positional,
                      const std::map<std::string, std::string> &flags, const char *command) {
  if (positional.size() != 1)
    die(llvm::Twine(command) + " expects one compiled model directory");
  std::string dir = positional[0];
  rt::LoadOptions load;
  load.weightsPath = flag(flags, "--weights");
  Artifact a;
  if (!llvm::sys::fs::is_directory(dir))
    die("'" + dir + "': no such directory (a compiled artifact or a checkpoint directory)");
  // A training run's checkpoint directory (config.json, step-*) is told
  // from a compiled artifact (manifest.json) by its contents.
  if (!llvm::sys::fs::exists(dir + "/manifest.json")) {
    if (load.weightsPath.size() || flags.count("--weights-seed"))
      die("'" + dir + "' is a checkpoint directory: its weights are chosen with --checkpoint");
    CheckpointDir c = openCheckpointDir(dir, flag(flags, "--checkpoint", "best"),
                                        dtypeFlag(flags, {"f32", "bf16", "int8"}));
    dir = c.artifact;
    load.weightsPath = c.weights;
    a.tokenizer = std::move(c.tokenizer);
  } else if (flags.count("--checkpoint") || flags.count("--dtype")) {
    die(std::string(flags.count("--checkpoint") ? "--checkpoint" : "--dtype") +
        " applies to checkpoint directories (compile an artifact with --dtype); '" + dir +
        "' is a compiled artifact");
  }
  std::string lib = dir + "/libmodel.so";
  if (!llvm::sys::fs::exists(lib))
    die("'" + dir + "' has no libmodel.so (compile the model first)");
  load.seed = (uint64_t)intFlag(flags, "--weights-seed", 0, 0, INT64_MAX);
  load.threads = (int)intFlag(flags, "--threads", 0, 0, 256);
  load.deviceOrdinal = (int)intFlag(flags, "--device", 0, 0, 1023);
  a.model = orDie(rt::CompiledModel::load(lib, load));
  a.ids = orDie(rt::readTokenIds(dir + "/manifest.json"));
  a.dir = dir;
  if (!a.tokenizer && llvm::sys::fs::exists(dir + "/source.spm"))
    a.tokenizer = orDie(rt::MarianTokenizer::load(dir));
  if (flags.count("--ids"))
    a.tokenizer.reset();
  return a;
}

} // namespace

namespace {
/// The search flags translate and generate share.
rt::SearchOptions searchOptions(const std::map<std::string, std::string> &flags) {
  rt::SearchOptions o;
  o.beam = (int)intFlag(flags, "--beam", 1, 1, 1024);
  o.alpha = floatFlag(flags, "--alpha", 0.0, [](double v) { return v >= 0; }, "a number >= 0");
  o.minLen = (int)intFlag(flags, "--min-len", 0, 0, 1 << 20);
  o.nBest = (int)intFlag(flags, "--n-best", 1, 1, 1024);
  if (o.nBest > o.beam)
    die("flag --n-best " + llvm::Twine(o.nBest) + " is over the beam size " + llvm::Twine(o.beam));
  o.noRepeatNgram = (int)intFlag(flags, "--no-repeat-ngram", 0, 0, 1024);
  o.repetitionPenalty = floatFlag(flags, "--repetition-penalty", 1.0,
                                  [](double v) { return v > 0; }, "a number > 0");
  o.sample = flags.count("--sample") != 0;
  for (const char *f : {"--temperature", "--top-k", "--top-p", "--seed"})
    if (flags.count(f) && !o.sample)
      die(llvm::Twine("flag ") + f + " applies to --sample");
  if (o.sample && o.beam != 1)
    die("flag --sample draws one hypothesis per input: use it with --beam 1");
  o.temperature = floatFlag(flags, "--temperature", 1.0, [](double v) { return v > 0; }, "a number > 0");
  o.topK = (int)intFlag(flags, "--top-k", 0, 0, 1 << 24);
  o.topP = floatFlag(flags, "--top-p", 1.0, [](double v) { return v > 0 && v <= 1; },
                     "a number in (0, 1]");
  o.seed = (uint64_t)intFlag(flags, "--seed", 0, 0, INT64_MAX);
  return o;
}
} // namespace

int mlir::transfuse::tools::runTranslate(const std::vector<std::string> &positional,
                                         const std::map<std::string, std::string> &flags) {
  rt::SearchOptions o = searchOptions(flags);
  o.maxLen = (int)intFlag(flags, "--max-len", 0, 1, 1 << 20);
  bool nbestFormat = flags.count("--n-best") || flags.count("--scores");
  bool raw = flags.count("--scores") != 0;

  Artifact a = loadArtifact(positional, flags, "translate");
  auto translator = orDie(rt::Translator::create(*a.model, a.ids));
  int64_t batch = intFlag(flags, "--batch-size", std::max<int64_t>(1, std::min<int64_t>(32, translator->rows() / o.beam)),
                          1, 1 << 20);
  if (batch * o.beam > translator->rows())
    die("flag --batch-size " + llvm::Twine(batch) + " with --beam " + llvm::Twine(o.beam) +
        " needs " + llvm::Twine(batch * o.beam) + " rows; the artifact has " +
        llvm::Twine(translator->rows()) + " (compile with a larger --max-batch or --max-beam)");
  // Text through the checkpoint's tokenizer, or lines of ids.
  std::vector<std::vector<int32_t>> sources;
  const std::string input = flag(flags, "--input");
  if (a.tokenizer) {
    std::string name = input.empty() || input == "-" ? "<stdin>" : input;
    auto buffer = input.empty() || input == "-" ? llvm::MemoryBuffer::getSTDIN()
                                                : llvm::MemoryBuffer::getFile(input, /*IsText=*/true);
    if (!buffer)
      die("cannot read '" + name + "': " + buffer.getError().message());
    llvm::StringRef text = (*buffer)->getBuffer();
    if (text.ends_with("\n"))
      text = text.drop_back();
    llvm::SmallVector<llvm::StringRef> rows;
    if (!text.empty())
      text.split(rows, '\n');
    for (llvm::StringRef row : rows)
      sources.push_back(a.tokenizer->encode(row.rtrim("\r").str()));
  } else {
    sources = readIdLines(input);
  }
  auto render = [&](const std::vector<int32_t> &ids) {
    return a.tokenizer ? a.tokenizer->decode(ids) : joinIds(ids);
  };
  std::vector<std::vector<int32_t>> prefixes;
  if (flags.count("--prefix-ids")) {
    prefixes = readIdLines(flag(flags, "--prefix-ids"));
    if (prefixes.size() != sources.size())
      die("--prefix-ids has " + llvm::Twine(prefixes.size()) + " lines for " +
          llvm::Twine(sources.size()) + " sources");
  }
  // Everything is translated before anything is printed: a bad line later
  // in the input leaves no partial output.
  std::string out;
  for (size_t first = 0; first < sources.size(); first += batch) {
    size_t end = std::min(sources.size(), first + (size_t)batch);
    std::vector<std::vector<int32_t>> part(sources.begin() + first, sources.begin() + end);
    std::vector<std::vector<int32_t>> partPrefixes;
    if (!prefixes.empty())
      partPrefixes.assign(prefixes.begin() + first, prefixes.begin() + end);
    auto result = translator->translate(part, o, prefixes.empty() ? nullptr : &partPrefixes,
                                        (int64_t)first);
    if (!result.isOk())
      die(flag(flags, "--input", "<stdin>") + ": " + result.status().message());
    for (size_t i = 0; i < result->size(); ++i)
      for (const rt::Hypothesis &h : (*result)[i]) {
        if (!nbestFormat) {
          out += render(h.ids) + "\n";
          continue;
        }
        out += std::to_string(first + i) + " ||| " + render(h.ids) + " ||| " +
               llvm::formatv("{0:F6}", h.score).str();
        if (raw)
          out += " ||| " + llvm::formatv("{0:F6}", h.logProb).str();
        out += "\n";
      }
  }
  llvm::outs() << out;
  return 0;
}

int mlir::transfuse::tools::runGenerate(const std::vector<std::string> &positional,
                                        const std::map<std::string, std::string> &flags) {
  rt::SearchOptions o = searchOptions(flags);
  if (!flags.count("--max-new"))
    die("generate needs --max-new N (the tokens to generate per prompt)");
  o.maxLen = (int)intFlag(flags, "--max-new", 0, 1, 1 << 20);
  const char *inputs[] = {"--prompt", "--prompt-file", "--prompt-ids", "--prompt-ids-file"};
  int given = 0;
  for (const char *f : inputs)
    given += flags.count(f) ? 1 : 0;
  if (given != 1)
    die("generate needs one of --prompt \"TEXT\", --prompt-file FILE, --prompt-ids \"IDS\" or "
        "--prompt-ids-file FILE");
  const bool text = flags.count("--prompt") || flags.count("--prompt-file");
  const bool file = flags.count("--prompt-file") || flags.count("--prompt-ids-file");
  const bool stream = flags.count("--stream") != 0;
  if (stream && (o.beam != 1 || o.nBest != 1))
    die("--stream prints tokens as they are chosen: use --beam 1 (greedy or --sample)");
  Artifact a = loadArtifact(positional, flags, "generate");
  if (flags.count("--eos-id"))
    a.ids.eos = (int32_t)intFlag(flags, "--eos-id", -1, 0, INT32_MAX);
  // Text goes through the tokenizer the artifact carries (compiled from a
  // Hugging Face directory that has one).
  std::optional<rt::DirectoryTokenizer> tokenizer;
  if (text) {
    if (!llvm::sys::fs::exists(a.dir + "/tokenizer.model") &&
        !llvm::sys::fs::exists(a.dir + "/tokenizer.json"))
      die("'" + a.dir + "' carries no tokenizer.json or tokenizer.model (compile a Hugging Face "
          "directory that has one, or give ids with --prompt-ids)");
    tokenizer = orDie(rt::DirectoryTokenizer::load(a.dir));
  }
  // EOS as given, or every id the directory says ends a sequence.
  if (!flags.count("--eos-id") && a.ids.eos >= 0)
    o.stopIds = rt::stopIds(a.dir, tokenizer ? &*tokenizer : nullptr, a.ids.eos);
  auto generator = orDie(rt::Generator::create(*a.model, a.ids));
  const char *source = file ? (text ? "--prompt-file" : "--prompt-ids-file")
                            : (text ? "--prompt" : "--prompt-ids");
  std::string name = file ? flag(flags, source) : source;
  std::vector<std::vector<int32_t>> prompts;
  if (text) {
    std::vector<std::string> lines;
    if (file) {
      auto buffer = llvm::MemoryBuffer::getFile(name, /*IsText=*/true);
      if (!buffer)
        die("cannot read '" + name + "': " + buffer.getError().message());
      llvm::SmallVector<llvm::StringRef> rows;
      llvm::StringRef all = (*buffer)->getBuffer();
      if (all.ends_with("\n"))
        all = all.drop_back();
      all.split(rows, '\n');
      for (llvm::StringRef row : rows)
        lines.push_back(row.rtrim("\r").str());
    } else {
      lines.push_back(flag(flags, "--prompt"));
    }
    for (size_t i = 0; i < lines.size(); ++i) {
      auto encoded = tokenizer->encode(lines[i]);
      if (!encoded.isOk())
        die(name + (file ? ": line " + llvm::Twine(i + 1) : llvm::Twine("")) + ": " +
            encoded.status().message());
      prompts.push_back(std::move(*encoded));
    }
  } else {
    prompts = file ? readIdLines(name) : parseIdLines(flag(flags, "--prompt-ids"), name);
  }
  auto render = [&](const std::vector<int32_t> &ids) {
    return tokenizer ? tokenizer->decode(ids) : joinIds(ids);
  };
  int64_t batch = intFlag(flags, "--batch-size",
                          std::max<int64_t>(1, std::min<int64_t>(32, generator->rows() / o.beam)), 1,
                          1 << 20);
  if (batch * o.beam > generator->rows())
    die("flag --batch-size " + llvm::Twine(batch) + " with --beam " + llvm::Twine(o.beam) +
        " needs " + llvm::Twine(batch * o.beam) + " rows; the artifact has " +
        llvm::Twine(generator->rows()) + " (compile with a larger --max-batch or --max-beam)");
  if (stream) {
    // One prompt at a time, in input order, each token printed as it is
    // chosen: text as far as it decodes to whole characters.
    std::vector<int32_t> out;
    std::string printed;
    o.onToken = [&](int64_t, int32_t token) {
      out.push_back(token);
      if (!tokenizer) {
        llvm::outs() << (out.size() > 1 ? " " : "") << token;
        llvm::outs().flush();
        return;
      }
      std::string now = tokenizer->decode(out);
      if (llvm::StringRef(now).ends_with("\xEF\xBF\xBD") || !llvm::StringRef(now).starts_with(printed))
        return;  // a character cut short, or a merge that changes what was printed
      llvm::outs() << now.substr(printed.size());
      llvm::outs().flush();
      printed = std::move(now);
    };
    for (size_t i = 0; i < prompts.size(); ++i) {
      out.clear();
      printed.clear();
      auto result = generator->generate({prompts[i]}, o, {(int64_t)i});
      if (!result.isOk())
        die(name + ": " + result.status().message());
      if (tokenizer) { // what the last tokens left undecoded
        std::string all = tokenizer->decode(out);
        if (llvm::StringRef(all).starts_with(printed))
          llvm::outs() << all.substr(printed.size());
      }
      llvm::outs() << "\n";
      llvm::outs().flush();
    }
    return 0;
  }
  // Batches of neighbours in length order (a batch feeds its longer
  // prompts' extra ids step by step: the closer the lengths, the fewer
  // steps only feed); outputs keep the input's order. Everything is
  // generated before anything is printed: an error leaves no partial output.
  std::vector<size_t> order(prompts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return prompts[x].size() < prompts[y].size(); });
  std::vector<std::string> lines(prompts.size());
  for (size_t first = 0; first < order.size(); first += batch) {
    size_t end = std::min(order.size(), first + (size_t)batch);
    std::vector<std::vector<int32_t>> part;
    for (size_t m = first; m < end; ++m)
      part.push_back(prompts[order[m]]);
    // Sampling keys each prompt's draws by its own line.
    std::vector<int64_t> lineOf(order.begin() + first, order.begin() + end);
    auto result = generator->generate(part, o, lineOf);
    if (!result.isOk())
      die(name + ": " + result.status().message());
    for (size_t m = first; m < end; ++m)
      for (const rt::Hypothesis &h : (*result)[m - first])
        lines[order[m]] += render(h.ids) + "\n";
  }
  std::string out;
  for (const std::string &l : lines)
    out += l;
  llvm::outs() << out;
  return 0;
}

int mlir::transfuse::tools::runScore(const std::vector<std::string> &positional,
                                     const std::map<std::string, std::string> &flags) {
  std::string input = flag(flags, "--input"), targetsPath = flag(flags, "--targets");
  if (input.empty() || targetsPath.empty())
    die("score needs --input SRC and --targets TGT (one line of ids each)");
  Artifact a = loadArtifact(positional, flags, "score");
  auto translator = orDie(rt::Translator::create(*a.model, a.ids));
  std::vector<std::vector<int32_t>> sources = readIdLines(input), targets = readIdLines(targetsPath);
  if (sources.size() != targets.size())
    die("--targets has " + llvm::Twine(targets.size()) + " lines for " +
        llvm::Twine(sources.size()) + " sources");
  int64_t batch = intFlag(flags, "--batch-size", std::min<int64_t>(32, translator->rows()), 1,
                          translator->rows());
  std::string out;
  for (size_t first = 0; first < sources.size(); first += batch) {
    size_t end = std::min(sources.size(), first + (size_t)batch);
    auto scored = translator->score({sources.begin() + first, sources.begin() + end},
                                    {targets.begin() + first, targets.begin() + end},
                                    (int64_t)first);
    if (!scored.isOk())
      die(input + ": " + scored.status().message());
    for (const rt::Hypothesis &h : *scored) {
      out += llvm::formatv("{0:F6}", h.logProb).str() + " |||";
      for (double lp : h.tokenLogProbs)
        out += " " + llvm::formatv("{0:F6}", lp).str();
      out += "\n";
    }
  }
  llvm::outs() << out;
  return 0;
}

int mlir::transfuse::tools::runBenchDecode(const std::vector<std::string> &positional,
                                           const std::map<std::string, std::string> &flags) {
  if (positional.size() != 2)
    die("bench decode expects one model definition: bench decode MODEL.json");
  for (const auto &[name, value] : flags)
    if (name != "--json" && name != "--threads" && name != "--min-seconds" && name != "--batch" &&
        name != "--src-len" && name != "--new-tokens" && name != "--beam" &&
        name != "--recompute" && name != "--fusion" && name != "--cxx" && name != "--isa" &&
        name != "--weights" && name != "--dtype")
      die("flag " + name + " does not apply to 'bench decode'");
  compiler::DecodeBenchOptions o;
  o.batch = intFlag(flags, "--batch", 1, 1, 1 << 12);
  o.srcLen = intFlag(flags, "--src-len", 24, 1, 1 << 16);
  o.newTokens = intFlag(flags, "--new-tokens", 32, 1, 1 << 16);
  o.beam = (int)intFlag(flags, "--beam", 1, 1, 64);
  o.threads = (int)intFlag(flags, "--threads", 0, 0, 256);
  o.recompute = flags.count("--recompute") != 0;
  o.minSeconds = floatFlag(flags, "--min-seconds", 2.0, [](double v) { return v >= 0; },
                           "a number >= 0");
  o.fusion = flag(flags, "--fusion", "all");
  o.weightsPath = flag(flags, "--weights");
  o.build.cxx = flag(flags, "--cxx");
  setDtype(o.build, dtypeFlag(flags, {"f32", "bf16", "int8"}));
  compiler::DecodeBenchResult r = orDie(compiler::benchDecode(positional[1], o));
  if (flags.count("--json")) {
    llvm::json::Object j{{"model", positional[1]},
                         {"batch", o.batch},
                         {"src_len", o.srcLen},
                         {"new_tokens", o.newTokens},
                         {"beam", o.beam},
                         {"threads", r.threads},
                         {"fusion", o.fusion},
                         {"target", ::transfuse::kernels::bestTargetName()},
                         {"dtype", dtypeName(o.build)},
                         {"runs", r.runs},
                         {"median_ms", r.medianMs},
                         {"min_ms", r.minMs},
                         {"ms_per_step", r.medianMs / (double)o.newTokens},
                         {"tokens_per_s", r.tokensPerSecond}};
    if (o.recompute) {
      j["recompute_median_ms"] = r.recomputeMs;
      j["recompute_tokens_per_s"] = r.recomputeTokensPerSecond;
    }
    llvm::outs() << llvm::json::Value(std::move(j)) << "\n";
    return 0;
  }
  llvm::outs() << "bench decode " << positional[1] << ": B=" << o.batch << " S=" << o.srcLen
               << " new=" << o.newTokens << " beam=" << o.beam << ", " << r.threads
               << " thread(s), fusion " << o.fusion << ", "
               << ::transfuse::kernels::bestTargetName()
               << dtypePaths(o.build)
               << "\n"
               << llvm::format("cached:    %9.2f tokens/s  %8.3f ms/step  (request median %.2f ms, "
                               "min %.2f ms, %lld runs)\n",
                               r.tokensPerSecond, r.medianMs / (double)o.newTokens, r.medianMs,
                               r.minMs, (long long)r.runs);
  if (o.recompute)
    llvm::outs() << llvm::format("recompute: %9.2f tokens/s  %8.3f ms/step  (cached is %.1fx)\n",
                                 r.recomputeTokensPerSecond, r.recomputeMs / (double)o.newTokens,
                                 r.tokensPerSecond / r.recomputeTokensPerSecond);
  return 0;
}
