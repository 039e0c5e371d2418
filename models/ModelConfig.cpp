//===- ModelConfig.cpp - parsing and validating model configs -------------===//

#include "models/ModelConfig.h"

#include "runtime/kernels/Activation.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <vector>

using namespace mlir::transfuse;
using llvm::json::Object;
using llvm::json::Value;

namespace {

/// The activations a config may name: the kernels' (Activation.h), none aside.
std::vector<llvm::StringRef> activationNames() {
  namespace tk = ::transfuse::kernels;
  std::vector<llvm::StringRef> names;
  for (int i = 1; i < tk::kNumActivations; ++i)
    names.push_back(tk::activationName(static_cast<tk::Activation>(i)));
  return names;
}

/// Reads typed keys from a JSON object, collecting the first error.
class KeyReader {
public:
  KeyReader(const Object &obj, llvm::StringRef source) : obj(obj), source(source) {}

  llvm::Error error(llvm::StringRef key, const llvm::Twine &what) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "%s: key '%s': %s", source.str().c_str(),
                                   key.str().c_str(), what.str().c_str());
  }

  /// An integer in [min, max]; max defaults to 2^24: every size of a model
  /// fits, and products of a few of them cannot overflow int64.
  llvm::Error readInt(llvm::StringRef key, int64_t &out, int64_t min, int64_t max = kMaxSize) {
    const Value *v = obj.get(key);
    if (!v)
      return llvm::Error::success();
    std::optional<int64_t> i = v->getAsInteger();
    if (!i)
      return error(key, "expected an integer");
    if (*i < min || *i > max)
      return error(key, llvm::formatv("must be in [{0}, {1}], got {2}", min, max, *i));
    out = *i;
    return llvm::Error::success();
  }

  static constexpr int64_t kMaxSize = int64_t{1} << 24;
  /// Layers per stack: the graph grows by about 60 ops a layer, so 2^24
  /// layers would exhaust memory while building it; the deepest published
  /// Transformers have a few hundred (models/README.md).
  static constexpr int64_t kMaxLayers = 1024;

  llvm::Error readDouble(llvm::StringRef key, double &out) {
    const Value *v = obj.get(key);
    if (!v)
      return llvm::Error::success();
    std::optional<double> d = v->getAsNumber();
    if (!d || !std::isfinite(*d))
      return error(key, "expected a number");
    out = *d;
    return llvm::Error::success();
  }

  llvm::Error readBool(llvm::StringRef key, bool &out) {
    const Value *v = obj.get(key);
    if (!v)
      return llvm::Error::success();
    std::optional<bool> b = v->getAsBoolean();
    if (!b)
      return error(key, "expected true or false");
    out = *b;
    return llvm::Error::success();
  }

  llvm::Error readChoice(llvm::StringRef key, std::string &out,
                         llvm::ArrayRef<llvm::StringRef> choices) {
    const Value *v = obj.get(key);
    if (!v)
      return llvm::Error::success();
    std::optional<llvm::StringRef> s = v->getAsString();
    std::string list;
    for (llvm::StringRef c : choices)
      list += (list.empty() ? "" : ", ") + c.str();
    if (!s || !llvm::is_contained(choices, *s))
      return error(key, "expected one of " + list);
    out = s->str();
    return llvm::Error::success();
  }

  /// An integer or null (null clears the value).
  llvm::Error readOptionalInt(llvm::StringRef key, std::optional<int64_t> &out) {
    const Value *v = obj.get(key);
    if (!v)
      return llvm::Error::success();
    if (v->getAsNull()) {
      out.reset();
      return llvm::Error::success();
    }
    int64_t i = 0;
    if (auto err = readInt(key, i, 0))
      return err;
    out = i;
    return llvm::Error::success();
  }

private:
  const Object &obj;
  llvm::StringRef source;
};

const char *const kCommonKeys[] = {
    "architecture", "d_model",   "num_heads",     "d_ff",           "max_seq_len",
    "dropout",      "activation", "norm_position", "final_norm",    "layer_norm_eps",
    "tie_output",   "positional", "pad_id",        "bos_id",        "eos_id",
    "unk_id"};
const char *const kEncoderDecoderKeys[] = {"num_encoder_layers", "num_decoder_layers",
                                           "src_vocab_size", "tgt_vocab_size",
                                           "share_embeddings", "source_bos", "layout",
                                           "scale_embedding"};
const char *const kDecoderOnlyKeys[] = {"num_layers", "vocab_size"};

} // namespace

llvm::Error mlir::transfuse::checkDefinitionText(llvm::StringRef text, llvm::StringRef name) {
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), what.str());
  };
  if (text.size() > kMaxDefinitionBytes)
    return fail(name + ": " + llvm::Twine(text.size()) + " bytes, over the limit of " +
                llvm::Twine(kMaxDefinitionBytes));
  // depth[0]: outside strings; depth[1]: inside the current string.
  int64_t depth[2] = {0, 0}, line = 1;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n')
      ++line;
    if (inString && c == '\\') {
      ++i; // the escaped character
      continue;
    }
    if (c == '"') {
      inString = !inString;
      depth[1] = 0;
      continue;
    }
    if (!inString && c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i; // an MLIR comment
      continue;
    }
    if (c == '-' && i + 1 < text.size() && text[i + 1] == '>') {
      ++i; // "->" closes nothing
      continue;
    }
    int64_t &d = depth[inString];
    if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++d > kMaxDefinitionNesting)
        return fail(name + ":" + llvm::Twine(line) + ": brackets nest deeper than " +
                    llvm::Twine(kMaxDefinitionNesting) + " levels");
    } else if (c == ')' || c == ']' || c == '}' || c == '>') {
      d = d > 0 ? d - 1 : 0;
    }
  }
  return llvm::Error::success();
}

llvm::Expected<ModelConfig> mlir::transfuse::parseModelConfig(llvm::StringRef json,
                                                              llvm::StringRef source) {
  if (auto err = checkDefinitionText(json, source))
    return std::move(err);
  llvm::Expected<Value> parsed = llvm::json::parse(json);
  if (!parsed)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "%s: invalid JSON: %s", source.str().c_str(),
                                   llvm::toString(parsed.takeError()).c_str());
  const Object *obj = parsed->getAsObject();
  if (!obj)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "%s: a model config must be a JSON object",
                                   source.str().c_str());
  KeyReader r(*obj, source);
  ModelConfig c;

  std::string arch;
  if (!obj->get("architecture"))
    return r.error("architecture", "missing (expected encoder_decoder or decoder_only)");
  if (auto err = r.readChoice("architecture", arch, {"encoder_decoder", "decoder_only"}))
    return std::move(err);
  bool decoderOnly = arch == "decoder_only";
  llvm::StringSet<> known;
  for (const char *k : kCommonKeys)
    known.insert(k);
  for (const char *k : kEncoderDecoderKeys)
    if (!decoderOnly)
      known.insert(k);
  for (const char *k : kDecoderOnlyKeys)
    if (decoderOnly)
      known.insert(k);
  for (const auto &kv : *obj)
    if (!known.contains(kv.first))
      return r.error(kv.first, "unknown key for architecture " + arch);

  if (decoderOnly) { // GPT-2 small defaults
    c.architecture = Architecture::DecoderOnly;
    c.dModel = 768;
    c.numHeads = 12;
    c.numEncoderLayers = 0;
    c.numDecoderLayers = 12;
    c.maxSeqLen = 1024;
    c.activation = "gelu_tanh";
    c.normPosition = "pre";
    c.tieOutput = true;
    c.positional = "learned";
    c.padId.reset();
    c.bosId.reset();
    c.eosId.reset();
    c.unkId.reset();
  }
  bool hasDFF = obj->get("d_ff") != nullptr;
  llvm::Error err = llvm::joinErrors(r.readInt("d_model", c.dModel, 1),
                                     r.readInt("num_heads", c.numHeads, 1));
  err = llvm::joinErrors(std::move(err), r.readInt("d_ff", c.dFF, 1));
  if (decoderOnly) {
    err = llvm::joinErrors(std::move(err), r.readInt("num_layers", c.numDecoderLayers, 1, KeyReader::kMaxLayers));
    err = llvm::joinErrors(std::move(err), r.readInt("vocab_size", c.tgtVocabSize, 1));
    c.srcVocabSize = c.tgtVocabSize;
  } else {
    err = llvm::joinErrors(std::move(err), r.readInt("num_encoder_layers", c.numEncoderLayers, 1, KeyReader::kMaxLayers));
    err = llvm::joinErrors(std::move(err), r.readInt("num_decoder_layers", c.numDecoderLayers, 1, KeyReader::kMaxLayers));
    err = llvm::joinErrors(std::move(err), r.readInt("src_vocab_size", c.srcVocabSize, 1));
    err = llvm::joinErrors(std::move(err), r.readInt("tgt_vocab_size", c.tgtVocabSize, 1));
    err = llvm::joinErrors(std::move(err), r.readBool("share_embeddings", c.shareEmbeddings));
    err = llvm::joinErrors(std::move(err), r.readBool("source_bos", c.sourceBos));
    err = llvm::joinErrors(std::move(err), r.readChoice("layout", c.layout, {"torch", "marian"}));
    err = llvm::joinErrors(std::move(err), r.readBool("scale_embedding", c.scaleEmbedding));
  }
  err = llvm::joinErrors(std::move(err), r.readInt("max_seq_len", c.maxSeqLen, 1));
  err = llvm::joinErrors(std::move(err), r.readDouble("dropout", c.dropout));
  err = llvm::joinErrors(std::move(err), r.readChoice("activation", c.activation, activationNames()));
  err = llvm::joinErrors(std::move(err), r.readChoice("norm_position", c.normPosition, {"post", "pre"}));
  err = llvm::joinErrors(std::move(err), r.readBool("final_norm", c.finalNorm));
  err = llvm::joinErrors(std::move(err), r.readDouble("layer_norm_eps", c.layerNormEps));
  err = llvm::joinErrors(std::move(err), r.readBool("tie_output", c.tieOutput));
  err = llvm::joinErrors(std::move(err), r.readChoice("positional", c.positional, {"sinusoidal", "learned"}));
  err = llvm::joinErrors(std::move(err), r.readOptionalInt("pad_id", c.padId));
  err = llvm::joinErrors(std::move(err), r.readOptionalInt("bos_id", c.bosId));
  err = llvm::joinErrors(std::move(err), r.readOptionalInt("eos_id", c.eosId));
  err = llvm::joinErrors(std::move(err), r.readOptionalInt("unk_id", c.unkId));
  if (err)
    return std::move(err);
  if (!hasDFF)
    c.dFF = 4 * c.dModel;

  // Cross-key rules.
  if (c.dModel % c.numHeads != 0)
    return r.error("num_heads", llvm::formatv("d_model {0} is not divisible by num_heads {1}",
                                              c.dModel, c.numHeads).str());
  if (decoderOnly ? !obj->get("vocab_size") : !obj->get("src_vocab_size"))
    return r.error(decoderOnly ? "vocab_size" : "src_vocab_size", "missing");
  if (!decoderOnly && !obj->get("tgt_vocab_size"))
    return r.error("tgt_vocab_size", "missing");
  if (c.shareEmbeddings && c.srcVocabSize != c.tgtVocabSize)
    return r.error("share_embeddings",
                   llvm::formatv("needs src_vocab_size == tgt_vocab_size, got {0} and {1}",
                                 c.srcVocabSize, c.tgtVocabSize).str());
  if (!(c.dropout >= 0.0 && c.dropout < 1.0))
    return r.error("dropout", llvm::formatv("must be in [0, 1), got {0}", c.dropout).str());
  if (!(c.layerNormEps > 0.0))
    return r.error("layer_norm_eps", "must be > 0");
  if (!decoderOnly && !c.padId)
    return r.error("pad_id", "encoder_decoder needs a pad_id");
  auto checkId = [&](llvm::StringRef key, int64_t id, int64_t vocab) -> llvm::Error {
    if (id >= vocab)
      return r.error(key, llvm::formatv("{0} is outside the vocabulary [0, {1})", id, vocab).str());
    return llvm::Error::success();
  };
  int64_t smallestVocab = std::min(c.srcVocabSize, c.tgtVocabSize);
  if (c.padId)
    if (auto e = checkId("pad_id", *c.padId, smallestVocab))
      return std::move(e);
  if (c.bosId)
    if (auto e = checkId("bos_id", *c.bosId, c.tgtVocabSize))
      return std::move(e);
  if (c.eosId)
    if (auto e = checkId("eos_id", *c.eosId, c.tgtVocabSize))
      return std::move(e);
  if (c.unkId)
    if (auto e = checkId("unk_id", *c.unkId, smallestVocab))
      return std::move(e);
  if (!decoderOnly && c.sourceBos && !c.bosId)
    return r.error("source_bos", "needs a bos_id");
  if (c.layout == "marian" && c.positional != "sinusoidal")
    return r.error("positional", "the marian layout's positions are sinusoidal (in halves)");
  if (c.layout == "marian" && c.finalNorm)
    return r.error("final_norm", "the marian layout has no final norms");
  return c;
}

Object mlir::transfuse::toJson(const ModelConfig &c) {
  Object o;
  bool dec = c.isDecoderOnly();
  o["architecture"] = dec ? "decoder_only" : "encoder_decoder";
  o["d_model"] = c.dModel;
  o["num_heads"] = c.numHeads;
  o["d_ff"] = c.dFF;
  if (dec) {
    o["num_layers"] = c.numDecoderLayers;
    o["vocab_size"] = c.tgtVocabSize;
  } else {
    o["num_encoder_layers"] = c.numEncoderLayers;
    o["num_decoder_layers"] = c.numDecoderLayers;
    o["src_vocab_size"] = c.srcVocabSize;
    o["tgt_vocab_size"] = c.tgtVocabSize;
    o["share_embeddings"] = c.shareEmbeddings;
    o["source_bos"] = c.sourceBos;
    o["layout"] = c.layout;
    o["scale_embedding"] = c.scaleEmbedding;
  }
  o["max_seq_len"] = c.maxSeqLen;
  o["dropout"] = c.dropout;
  o["activation"] = c.activation;
  o["norm_position"] = c.normPosition;
  o["final_norm"] = c.finalNorm;
  o["layer_norm_eps"] = c.layerNormEps;
  o["tie_output"] = c.tieOutput;
  o["positional"] = c.positional;
  auto id = [](const std::optional<int64_t> &v) { return v ? Value(*v) : Value(nullptr); };
  o["pad_id"] = id(c.padId);
  o["bos_id"] = id(c.bosId);
  o["eos_id"] = id(c.eosId);
  o["unk_id"] = id(c.unkId);
  return o;
}
