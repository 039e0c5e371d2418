//===- EmbedCommands.cpp - text in: tokenize, sentence embeddings ----------===//
//
// `transfuse tokenize TOKENIZER`: ids of each input line (or text of each
// line of ids) through a Hugging Face tokenizer.json, alone or in a model
// or artifact directory.
//
// `transfuse embed MODEL`: one vector per input line through a model's
// `embed` entry (a sentence-transformers directory of the BERT family).
// MODEL is a Hugging Face directory, compiled on first use into the cache
// (compiler/Cache.h) with its weights bound from it, or an artifact with
// --weights. The text is tokenized by the model's own WordPiece tokenizer
// (tokenizer.json, else vocab.txt), the lines sorted by length and run in
// batches padded to their longest, the vectors written in input order.
//
//===----------------------------------------------------------------------===//

#include "tools/Cli.h"
#include "tools/Commands.h"
#include "tools/DecodeCommands.h"

#include "compiler/Cache.h"
#include "models/HuggingFace.h"
#include "runtime/Json.h"
#include "runtime/host/CompiledModel.h"
#include "runtime/host/Corpus.h"
#include "runtime/host/DirectoryTokenizer.h"
#include "runtime/host/HfTokenizer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <numeric>

using namespace mlir::transfuse;
using namespace mlir::transfuse::tools;
namespace rt = ::transfuse::rt;

namespace {

std::string join(llvm::StringRef dir, llvm::StringRef name) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  return path.str().str();
}

/// sentence_bert_config.json's max_seq_length, or 0.
int64_t sentenceMaxLength(const std::string &dir) {
  const std::string path = join(dir, "sentence_bert_config.json");
  if (!llvm::sys::fs::exists(path))
    return 0;
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  rt::JsonValue json = orDie(rt::JsonValue::parse(text));
  const rt::JsonValue *v = json.find("max_seq_length");
  if (!v || !v->isInteger() || v->asInt64() < 2)
    die(path + ": key 'max_seq_length': expected an integer >= 2");
  return v->asInt64();
}

/// Writes `data` [rows, width] as a NumPy .npy (version 1.0, little-endian
/// float32) to `path`, through a temporary file renamed into place.
void writeNpy(const std::string &path, const std::vector<float> &data, int64_t rows, int64_t width) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(width) + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');  // 64-byte aligned with the newline
  header += '\n';
  const std::string tmp = path + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary);
    const uint16_t n = static_cast<uint16_t>(header.size());
    out << "\x93NUMPY" << '\x01' << '\x00' << static_cast<char>(n & 0xff)
        << static_cast<char>(n >> 8) << header;
    out.write(reinterpret_cast<const char *>(data.data()),
              static_cast<std::streamsize>(data.size() * sizeof(float)));
    if (!out.flush())
      die("cannot write '" + tmp + "'");
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path)) {
    llvm::sys::fs::remove(tmp);
    die("cannot write '" + path + "': " + ec.message());
  }
}

} // namespace

ModelArtifact tools::modelArtifact(const std::string &path, const Flags &flags, int64_t batch,
                                   std::array<int64_t, 2> imageSize) {
  ModelArtifact m{path, flag(flags, "--weights")};
  if (llvm::sys::fs::exists(join(path, "manifest.json"))) {
    if (flags.count("--dtype"))
      die("--dtype applies when compiling a directory (compile an artifact with --dtype); '" +
          path + "' is a compiled artifact");
    // Weights the artifact carries (an ONNX file's) unless others are given.
    if (m.weights.empty() && llvm::sys::fs::exists(join(path, compiler::kCarriedWeights)))
      m.weights = join(path, compiler::kCarriedWeights);
    return m;
  }
  if (!isHuggingFaceDirectory(path))
    die("'" + path + "' is neither an artifact (no manifest.json) nor a Hugging Face directory "
        "(no config.json)");
  compiler::CompileOptions options;
  options.strategy = orDie(FusionStrategy::parse(flag(flags, "--fusion", "all")));
  setDtype(options.build, dtypeFlag(flags, {"f32", "bf16", "int8"}));
  BuildOptions maxima;
  maxima.maxBatch = batch;
  maxima.maxSeqLen = intFlag(flags, "--max-seq-len", 0, 0, 1 << 20);
  maxima.imageSize = imageSize;
  std::vector<std::string> warnings;
  maxima.warnings = &warnings;
  auto cached = compiler::cachedArtifact(path, maxima, options);
  for (const std::string &w : warnings)
    llvm::errs() << "transfuse: warning: " << w << "\n";
  compiler::CachedArtifact artifact = orDie(std::move(cached));
  if (artifact.compiledNow)
    llvm::errs() << llvm::format("transfuse: compiled %s into %s (%.1f s; reused from now on)\n",
                                 path.c_str(), artifact.dir.c_str(), artifact.seconds);
  m.dir = artifact.dir;
  if (m.weights.empty())
    m.weights = path;
  return m;
}

int tools::runEmbed(const Positional &positional, const Flags &flags) {
  if (positional.size() != 1)
    die("embed expects one model: a Hugging Face directory or an artifact");
  const int64_t batch = intFlag(flags, "--batch", 32, 1, 4096);
  const std::string outPath = flag(flags, "--out");
  if (!outPath.empty() && !llvm::StringRef(outPath).ends_with(".npy") &&
      !llvm::StringRef(outPath).ends_with(".safetensors"))
    die("--out " + outPath + ": the file must end in .npy or .safetensors");
  // The text first: a bad input file fails before any compile.
  std::vector<std::string> lines;
  const std::string inputPath = flag(flags, "--input");
  if (!inputPath.empty()) {
    lines = orDie(rt::readTextLines(inputPath));
  } else {
    for (std::string line; std::getline(std::cin, line);)
      lines.push_back(line);
  }

  ModelArtifact m = modelArtifact(positional[0], flags, batch);
  if (m.weights.empty())
    die("'" + positional[0] + "' is an artifact: give its weights with --weights (a safetensors "
        "file, an index, or the model's Hugging Face directory)");
  rt::LoadOptions load;
  load.weightsPath = m.weights;
  load.threads = static_cast<int>(intFlag(flags, "--threads", 0, 0, 1024));
  auto model = orDie(rt::CompiledModel::load(join(m.dir, "libmodel.so"), load));
  auto specs = model->inputs("embed");
  if (!specs.isOk())
    die("'" + positional[0] + "' has no embed entry: a sentence-transformers directory "
        "(modules.json with a Pooling module) has one");
  const int64_t compiledBatch = (*specs)[0].maxShape[0];
  int64_t maxLength = (*specs)[0].maxShape[1];
  if (int64_t s = sentenceMaxLength(m.dir); s > 0)
    maxLength = std::min(maxLength, s);
  const rt::HfTokenizer tokenizer = orDie(rt::loadHfTokenizer(m.dir));
  if (tokenizer.modelMaxLength() > 0)
    maxLength = std::min(maxLength, tokenizer.modelMaxLength());

  const bool truncate = flags.count("--no-truncate") == 0;
  std::vector<std::vector<int32_t>> ids(lines.size());
  size_t truncated = 0, firstTruncated = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto encoded = tokenizer.encode(lines[i], nullptr, maxLength, truncate);
    if (!encoded.isOk())
      die((inputPath.empty() ? "stdin" : inputPath) + ":" + std::to_string(i + 1) + ": " +
          encoded.status().message() + (truncate ? "" : " (--no-truncate)"));
    if (encoded->truncated && truncated++ == 0)
      firstTruncated = i;
    ids[i] = std::move(encoded->ids);
  }
  if (truncated)
    llvm::errs() << "transfuse: warning: " << truncated << " line(s) truncated to " << maxLength
                 << " tokens (the first: line " << firstTruncated + 1 << ")\n";

  // Sorted by length, so that each batch pads little; the vectors go back
  // to their lines' places.
  std::vector<size_t> order(lines.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return ids[a].size() < ids[b].size(); });
  const int64_t rowsPerRun = std::min(batch, compiledBatch);
  int64_t width = 0;
  std::vector<float> vectors;
  for (size_t start = 0; start < order.size(); start += rowsPerRun) {
    const size_t n = std::min<size_t>(rowsPerRun, order.size() - start);
    const int64_t length = static_cast<int64_t>(ids[order[start + n - 1]].size());
    const std::vector<int64_t> shape = {static_cast<int64_t>(n), length};
    std::map<std::string, rt::Tensor> inputs = {
        {"input_ids", rt::Tensor::zeros(rt::DType::I32, shape)},
        {"attention_mask", rt::Tensor::zeros(rt::DType::I32, shape)},
        {"token_type_ids", rt::Tensor::zeros(rt::DType::I32, shape)}};
    for (size_t r = 0; r < n; ++r) {
      const std::vector<int32_t> &row = ids[order[start + r]];
      std::copy(row.begin(), row.end(), inputs["input_ids"].data<int32_t>() + r * length);
      std::fill_n(inputs["attention_mask"].data<int32_t>() + r * length, row.size(), 1);
    }
    std::map<std::string, rt::Tensor> out = orDie(model->run("embed", inputs));
    const rt::Tensor &e = out.at("sentence_embedding");
    width = e.shape[1];
    vectors.resize(lines.size() * width);
    for (size_t r = 0; r < n; ++r)
      std::copy_n(e.data<float>() + r * width, width, vectors.data() + order[start + r] * width);
  }

  const int64_t rows = static_cast<int64_t>(lines.size());
  if (llvm::StringRef(outPath).ends_with(".npy")) {
    writeNpy(outPath, vectors, rows, width);
  } else if (!outPath.empty()) {
    rt::Tensor t = rt::Tensor::zeros(rt::DType::F32, {rows, width});
    std::copy(vectors.begin(), vectors.end(), t.data<float>());
    writeTensors(outPath, {{"embeddings", std::move(t)}});
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      llvm::outs() << "[";
      for (int64_t j = 0; j < width; ++j)
        llvm::outs() << (j ? ", " : "") << llvm::format("%.9g", vectors[r * width + j]);
      llvm::outs() << "]\n";
    }
  }
  return 0;
}

int mlir::transfuse::tools::runTokenize(const Positional &positional, const Flags &flags) {
  if (positional.size() != 1)
    die("tokenize expects one tokenizer: a tokenizer.json, or a directory that holds one (or a "
        "tokenizer.model)");
  const rt::DirectoryTokenizer tokenizer = orDie(rt::DirectoryTokenizer::load(positional[0]));
  const std::string input = flag(flags, "--input");
  const std::string name = input.empty() || input == "-" ? "<stdin>" : input;
  std::vector<std::string> lines;
  {
    std::ifstream file;
    if (name != "<stdin>") {
      file.open(input, std::ios::binary);
      if (!file)
        die("cannot read '" + input + "'");
    }
    std::istream &in = name == "<stdin>" ? std::cin : file;
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r')
        line.pop_back();
      lines.push_back(std::move(line));
    }
  }
  std::string out;
  if (flags.count("--decode")) {
    const bool keep = flags.count("--keep-specials") != 0;
    for (const std::vector<int32_t> &ids : parseIdLines(llvm::join(lines, "\n"), name))
      out += tokenizer.decode(ids, keep) + "\n";
    llvm::outs() << out;
    return 0;
  }
  const bool specials = !flags.count("--no-specials");
  const int repeats = (int)intFlag(flags, "--time", 0, 0, 1000);
  std::vector<std::vector<int32_t>> encoded(lines.size());
  double best = 1e300;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < lines.size(); ++i) {
      auto e = tokenizer.encode(lines[i], /*plain=*/!specials);
      if (!e.isOk())
        die(name + ": line " + llvm::Twine(i + 1) + ": " + e.status().message());
      encoded[i] = std::move(*e);
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  size_t tokens = 0, bytes = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    tokens += encoded[i].size();
    bytes += lines[i].size();
    for (size_t k = 0; k < encoded[i].size(); ++k)
      out += (k ? " " : "") + std::to_string(encoded[i][k]);
    out += "\n";
  }
  llvm::outs() << out;
  if (repeats)
    llvm::errs() << llvm::format("encoded %zu lines (%zu tokens, %zu bytes) in %.3f ms, best of "
                                 "%d: %.0f tokens/s, %.2f MB/s, one thread\n",
                                 lines.size(), tokens, bytes, best * 1e3, repeats, tokens / best,
                                 bytes / best / 1e6);
  return 0;
}
