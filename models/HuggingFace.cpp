//===- HuggingFace.cpp - Hugging Face model directories as they are -------===//
//
// See HuggingFace.h: config.json read and checked, its model_type's family
// built. The weights stay in the directory (bound by name when the model is
// loaded).
//
//===----------------------------------------------------------------------===//

#include "models/HuggingFace.h"

#include "runtime/WeightFiles.h"

#include <cmath>

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::transfuse;

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

std::string join(llvm::StringRef dir, llvm::StringRef name) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  return path.str().str();
}

/// Families that Transfuse knows by name but does not compile yet.
const char *const kNotYet[] = {"roberta", "xlm-roberta", "distilbert", "albert", "electra",
                               "deberta", "deberta-v2", "mpnet", "camembert", "gemma",
                               "phi3", "gpt_neox", "t5", "bart"};

/// A JSON file of the directory, under the definition limits (size,
/// nesting: llvm::json::parse recurses) of checkDefinitionText.
llvm::Expected<llvm::json::Value> readJson(const std::string &path) {
  auto text = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!text)
    return fail("cannot read '" + path + "': " + text.getError().message());
  if (llvm::Error e = checkDefinitionText((*text)->getBuffer(), path))
    return std::move(e);
  llvm::Expected<llvm::json::Value> json = llvm::json::parse((*text)->getBuffer());
  if (!json)
    return fail(path + ": invalid JSON: " + llvm::toString(json.takeError()));
  return json;
}

/// The rows of a task head's classifier [rows, hidden] when the directory's
/// weights hold one (with each tensor of `with`), under the name or with
/// `prefix`; else 0. Weights that do not open are left to the load, which
/// names what is wrong.
int64_t classifierRows(llvm::StringRef dir, int64_t hidden, const std::string &prefix,
                       llvm::ArrayRef<const char *> with) {
  auto files = ::transfuse::rt::WeightFiles::open(dir.str());
  if (!files.isOk())
    return 0;
  auto shape = [&](const std::string &name) -> std::vector<int64_t> {
    for (const std::string &n : {name, prefix + name})
      if (const auto *f = files->find(n))
        return f->info(n)->shape;
    return {};
  };
  std::vector<int64_t> classifier = shape("classifier.weight");
  if (classifier.size() != 2 || classifier[1] != hidden || classifier[0] < 1)
    return 0;
  for (const char *name : with)
    if (shape(name).empty())
      return 0;
  return classifier[0];
}

} // namespace

const char *const mlir::transfuse::kCommonIgnoredKeys[] = {
    "_name_or_path", "architectures", "model_type", "torch_dtype", "dtype",
    "transformers_version", "initializer_range", "use_cache", "gradient_checkpointing",
    "id2label", "label2id", "num_labels", "problem_type", "finetuning_task", "return_dict",
    "output_hidden_states", "output_attentions", "torchscript", "bos_token_id", "eos_token_id",
    "sep_token_id", "cls_token_id", "tokenizer_class", "prefix", "task_specific_params",
    "chunk_size_feed_forward", "_attn_implementation", "attn_implementation",
    "tie_word_embeddings", "output_past", "pruned_heads"};
const size_t mlir::transfuse::kNumCommonIgnoredKeys = std::size(kCommonIgnoredKeys);

const llvm::json::Value *ConfigKeys::get(llvm::StringRef key) {
  known.insert(key);
  return config.get(key);
}

llvm::Error ConfigKeys::error(llvm::StringRef key, const llvm::Twine &what) const {
  return fail(source + ": key '" + key + "': " + what);
}

llvm::Error ConfigKeys::readInt(llvm::StringRef key, int64_t &out, int64_t min) {
  const llvm::json::Value *v = get(key);
  if (!v)
    return llvm::Error::success();
  std::optional<int64_t> i = v->getAsInteger();
  constexpr int64_t kMax = int64_t{1} << 24;
  if (!i || *i < min || *i > kMax)
    return error(key, llvm::formatv("expected an integer in [{0}, {1}]", min, kMax).str());
  out = *i;
  return llvm::Error::success();
}

llvm::Error ConfigKeys::readDouble(llvm::StringRef key, double &out) {
  const llvm::json::Value *v = get(key);
  if (!v)
    return llvm::Error::success();
  std::optional<double> d = v->getAsNumber();
  if (!d || !std::isfinite(*d) || *d < 0)
    return error(key, "expected a number >= 0");
  out = *d;
  return llvm::Error::success();
}

llvm::Error ConfigKeys::readBool(llvm::StringRef key, bool &out) {
  const llvm::json::Value *v = get(key);
  if (!v)
    return llvm::Error::success();
  std::optional<bool> b = v->getAsBoolean();
  if (!b)
    return error(key, "expected true or false");
  out = *b;
  return llvm::Error::success();
}

llvm::Error ConfigKeys::readPair(llvm::StringRef key, std::array<int64_t, 2> &out) {
  const llvm::json::Value *v = get(key);
  if (!v)
    return llvm::Error::success();
  constexpr int64_t kMax = int64_t{1} << 16;
  auto in = [](std::optional<int64_t> i) { return i && *i >= 1 && *i <= kMax; };
  if (std::optional<int64_t> i = v->getAsInteger(); in(i)) {
    out = {*i, *i};
    return llvm::Error::success();
  }
  const llvm::json::Array *a = v->getAsArray();
  if (a && a->size() == 2 && in((*a)[0].getAsInteger()) && in((*a)[1].getAsInteger())) {
    out = {*(*a)[0].getAsInteger(), *(*a)[1].getAsInteger()};
    return llvm::Error::success();
  }
  return error(key, llvm::formatv("expected an integer in [1, {0}] or a list of two", kMax).str());
}

llvm::Error ConfigKeys::readTokenId(llvm::StringRef key, std::optional<int64_t> &out) {
  const llvm::json::Value *v = get(key);
  if (!v)
    return llvm::Error::success();
  if (v->kind() == llvm::json::Value::Null) {
    out = std::nullopt;
    return llvm::Error::success();
  }
  const llvm::json::Value *first = v;
  if (const llvm::json::Array *a = v->getAsArray())
    first = a->empty() ? nullptr : &(*a)[0];
  std::optional<int64_t> id = first ? first->getAsInteger() : std::nullopt;
  if (!id || *id < 0)
    return error(key, "expected a token id >= 0, a list of them, or null");
  out = *id;
  return llvm::Error::success();
}

llvm::Error ConfigKeys::readActivation(llvm::StringRef key, std::string &out) {
  // Each value and the kernels' activation it is.
  static const std::pair<const char *, const char *> kActivations[] = {
      {"gelu", "gelu"},           {"relu", "relu"},      {"gelu_new", "gelu_tanh"},
      {"gelu_pytorch_tanh", "gelu_tanh"}, {"silu", "silu"}, {"swish", "silu"}};
  const llvm::json::Value *v = get(key);
  if (!v)
    return llvm::Error::success();
  std::optional<llvm::StringRef> act = v->getAsString();
  auto it = llvm::find_if(kActivations, [&](auto &p) { return act && *act == p.first; });
  if (it == std::end(kActivations))
    return error(key, "not supported (supported: gelu, relu, gelu_new, gelu_pytorch_tanh, silu, "
                      "swish)");
  out = it->second;
  return llvm::Error::success();
}

void ConfigKeys::ignore(llvm::ArrayRef<const char *> keys) {
  for (const char *k : keys)
    known.insert(k);
}

void ConfigKeys::warnUnread(std::vector<std::string> *warnings) const {
  if (!warnings)
    return;
  for (const auto &kv : config)
    if (!known.contains(kv.first))
      warnings->push_back(source + ": unknown key '" + kv.first.str() + "' ignored");
}

llvm::Error mlir::transfuse::readSentenceTransformers(llvm::StringRef dir, BertConfig &config) {
  const std::string modulesPath = join(dir, "modules.json");
  if (!llvm::sys::fs::exists(modulesPath))
    return llvm::Error::success();
  auto modules = readJson(modulesPath);
  if (!modules)
    return modules.takeError();
  const llvm::json::Array *list = modules->getAsArray();
  if (!list)
    return fail(modulesPath + ": not a JSON array of modules");
  std::string poolingPath;
  for (const llvm::json::Value &m : *list) {
    const llvm::json::Object *o = m.getAsObject();
    std::optional<llvm::StringRef> type = o ? o->getString("type") : std::nullopt;
    if (!type)
      return fail(modulesPath + ": a module without a \"type\"");
    llvm::StringRef kind = type->rsplit('.').second.empty() ? *type : type->rsplit('.').second;
    if (kind == "Transformer")
      continue;
    if (kind == "Normalize") {
      config.normalize = true;
    } else if (kind == "Pooling") {
      std::optional<llvm::StringRef> path = o->getString("path");
      if (!path || path->contains("..") || llvm::sys::path::is_absolute(*path))
        return fail(modulesPath + ": the Pooling module's \"path\" must be a folder of the model");
      poolingPath = join(join(dir, *path), "config.json");
    } else {
      return fail(modulesPath + ": module type '" + *type +
                  "' is not supported (supported: Transformer, Pooling, Normalize)");
    }
  }
  if (poolingPath.empty())
    return fail(modulesPath + ": no Pooling module (the embed entry needs one)");
  auto pooling = readJson(poolingPath);
  if (!pooling)
    return pooling.takeError();
  const llvm::json::Object *p = pooling->getAsObject();
  if (!p)
    return fail(poolingPath + ": not a JSON object");
  std::vector<std::string> modes;
  for (const auto &kv : *p) {
    llvm::StringRef key = kv.first;
    if (!key.starts_with("pooling_mode_") || kv.second.getAsBoolean() != true)
      continue;
    static const std::pair<const char *, const char *> kModes[] = {
        {"pooling_mode_cls_token", "cls"},
        {"pooling_mode_mean_tokens", "mean"},
        {"pooling_mode_max_tokens", "max"}};
    auto it = llvm::find_if(kModes, [&](auto &m) { return key == m.first; });
    if (it == std::end(kModes))
      return fail(poolingPath + ": key '" + key +
                  "': not supported (supported: pooling_mode_cls_token, pooling_mode_mean_tokens, "
                  "pooling_mode_max_tokens)");
    modes.push_back(it->second);
  }
  if (modes.size() != 1)
    return fail(poolingPath + ": exactly one pooling_mode_* must be true (" +
                llvm::Twine(modes.size()) + " are)");
  if (std::optional<int64_t> dim = p->getInteger("word_embedding_dimension");
      dim && *dim != config.hidden)
    return fail(poolingPath + ": key 'word_embedding_dimension': " + llvm::Twine(*dim) +
                " is not the model's hidden_size " + llvm::Twine(config.hidden));
  config.pooling = modes[0];
  return llvm::Error::success();
}

namespace {

/// A `vit` directory: the encoder, and the classifier where its weights are.
llvm::Expected<OwningOpRef<ModuleOp>> loadVit(MLIRContext &context, llvm::StringRef dir,
                                              const llvm::json::Object &json,
                                              const std::string &configPath,
                                              const BuildOptions &options) {
  auto vit = parseVitConfig(json, configPath, options.warnings);
  if (!vit)
    return vit.takeError();
  vit->numLabels = classifierRows(dir, vit->hidden, "vit.", {});
  if (options.imageSize[0] != 0 && options.imageSize != vit->imageSize) {
    const auto [h, w] = options.imageSize;
    const auto [ph, pw] = vit->patchSize;
    if (h % ph != 0 || w % pw != 0)
      return fail("--image-size " + llvm::Twine(h) + "x" + llvm::Twine(w) +
                  " is not a whole number of the model's " + llvm::Twine(ph) + "x" +
                  llvm::Twine(pw) + " patches");
    if (vit->imageSize[0] != vit->imageSize[1] || ph != pw)
      return fail(configPath + ": interpolating positions to --image-size needs a square "
                               "image_size and patch_size, as Hugging Face's "
                               "interpolate_pos_encoding does");
    vit->inputSize = options.imageSize;
  }
  if (options.training && vit->numLabels == 0)
    return fail(dir + ": training a vit model needs a ViTForImageClassification's classifier "
                      "weights (none in the directory)");
  // The sequence is static (the patches of image_size and the CLS token):
  // a maximum length has nothing to bound.
  BuildOptions maxima = options;
  maxima.maxSeqLen = vit->patches() + 1;
  OwningOpRef<ModuleOp> module = newModule(context);
  buildVit(*module, *vit, maxima);
  return finishModel(std::move(module), toJson(*vit), maxima, maxima.maxSeqLen);
}

/// A maximum length within the model's positions and its attention window.
llvm::Error checkDecoderLength(const BuildOptions &options, int64_t maxPositions,
                               std::optional<int64_t> window, const std::string &configPath) {
  const int64_t length = options.maxSeqLen ? options.maxSeqLen : maxPositions;
  if (length > maxPositions)
    return fail("--max-seq-len " + llvm::Twine(length) + " exceeds the config's " +
                "max_position_embeddings " + llvm::Twine(maxPositions));
  if (window && length > *window)
    return fail(configPath + ": key 'sliding_window': the window of " + llvm::Twine(*window) +
                " positions is shorter than the compiled maximum length " + llvm::Twine(length) +
                ", and a banded attention mask is not supported: compile with --max-seq-len " +
                llvm::Twine(*window) + " or less, where the window changes nothing");
  return llvm::Error::success();
}

/// A `llama`, `mistral` or `qwen2` directory.
llvm::Expected<OwningOpRef<ModuleOp>> loadLlama(MLIRContext &context,
                                                const llvm::json::Object &json,
                                                const std::string &configPath,
                                                const BuildOptions &options) {
  auto llama = parseLlamaConfig(json, configPath, options.warnings);
  if (!llama)
    return llama.takeError();
  if (llvm::Error e = checkDecoderLength(options, llama->maxPositions, llama->slidingWindow,
                                         configPath))
    return std::move(e);
  OwningOpRef<ModuleOp> module = newModule(context);
  buildLlama(*module, *llama, options);
  return finishModel(std::move(module), toJson(*llama), options, llama->maxPositions);
}

} // namespace

llvm::Expected<ModelConfig> mlir::transfuse::parseGpt2Config(const llvm::json::Object &o,
                                                             llvm::StringRef source,
                                                             std::vector<std::string> *warnings) {
  // GPT-2's own keys that change nothing computed here: the sequence
  // summary head of GPT2DoubleHeadsModel, attention upcasting (fp32
  // already), the context size (n_positions bounds the positions), and the
  // embedding's and attention's dropout (training uses resid_pdrop's rate,
  // decoder_only's one `dropout`).
  static const char *const kIgnored[] = {
      "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
      "summary_first_dropout", "reorder_and_upcast_attn", "n_ctx", "attn_pdrop", "embd_pdrop"};
  ModelConfig c;
  c.architecture = Architecture::DecoderOnly;
  c.normPosition = "pre";
  c.positional = "learned";
  c.tieOutput = true;
  c.activation = "gelu_tanh";
  c.dModel = 768, c.numHeads = 12, c.numDecoderLayers = 12, c.tgtVocabSize = 50257;
  c.maxSeqLen = 1024, c.layerNormEps = 1e-5, c.dropout = 0.1;
  c.padId = c.unkId = std::nullopt;
  c.bosId = c.eosId = 50256;
  ConfigKeys keys(o, source);
  keys.ignore({kCommonIgnoredKeys, kNumCommonIgnoredKeys});
  keys.ignore(kIgnored);
  int64_t inner = 0;
  llvm::Error err = llvm::joinErrors(keys.readInt("n_embd", c.dModel, 1),
                                     keys.readInt("n_head", c.numHeads, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("n_layer", c.numDecoderLayers, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("vocab_size", c.tgtVocabSize, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("n_positions", c.maxSeqLen, 1));
  if (const llvm::json::Value *v = keys.get("n_inner"); v && v->kind() != llvm::json::Value::Null)
    err = llvm::joinErrors(std::move(err), keys.readInt("n_inner", inner, 1));
  err = llvm::joinErrors(std::move(err), keys.readDouble("layer_norm_epsilon", c.layerNormEps));
  err = llvm::joinErrors(std::move(err), keys.readDouble("resid_pdrop", c.dropout));
  err = llvm::joinErrors(std::move(err), keys.readActivation("activation_function", c.activation));
  bool tie = true;
  err = llvm::joinErrors(std::move(err), keys.readBool("tie_word_embeddings", tie));
  c.tieOutput = tie;
  // Variants of the attention that GPT-2 checkpoints do not use.
  for (auto [key, expected] : {std::pair{"scale_attn_weights", true},
                               {"scale_attn_by_inverse_layer_idx", false},
                               {"add_cross_attention", false}}) {
    bool value = expected;
    err = llvm::joinErrors(std::move(err), keys.readBool(key, value));
    if (!err && value != expected)
      err = keys.error(key, llvm::Twine(value ? "true" : "false") + " is not supported");
  }
  for (auto [key, id] : {std::pair{"bos_token_id", &c.bosId}, {"eos_token_id", &c.eosId}})
    err = llvm::joinErrors(std::move(err), keys.readTokenId(key, *id));
  if (err)
    return std::move(err);
  if (c.dModel % c.numHeads != 0)
    return keys.error("n_head", llvm::formatv("n_embd {0} is not divisible by {1}", c.dModel,
                                              c.numHeads));
  if (c.dropout >= 1)
    return keys.error("resid_pdrop", "must be < 1");
  c.dFF = inner ? inner : 4 * c.dModel;
  keys.warnUnread(warnings);
  return c;
}

llvm::Expected<ModelConfig> mlir::transfuse::parseMarianConfig(const llvm::json::Object &o,
                                                               llvm::StringRef source,
                                                               std::vector<std::string> *warnings) {
  // Marian's own keys that change nothing computed here: generation
  // defaults (beam, lengths, the pad id banned: the search's own rules), the
  // layer drop of training, and keys of the BART-derived configs that
  // MarianMTModel reads nothing from (it is always post-LN, without
  // embedding or final norms, with static sinusoidal positions).
  static const char *const kIgnored[] = {
      "num_beams", "max_length", "bad_words_ids", "forced_eos_token_id", "early_stopping",
      "length_penalty", "no_repeat_ngram_size", "encoder_layerdrop", "decoder_layerdrop",
      "init_std", "is_encoder_decoder", "normalize_before", "normalize_embedding",
      "static_position_embeddings", "add_bias_logits", "add_final_layer_norm",
      "extra_pos_embeddings", "num_hidden_layers", "classif_dropout", "classifier_dropout",
      "attention_dropout", "activation_dropout", "max_new_tokens", "decoder_start_token_id",
      "pad_token_id"};
  ModelConfig c;
  c.architecture = Architecture::EncoderDecoder;
  c.layout = "marian";
  c.normPosition = "post";
  c.finalNorm = false;
  c.positional = "sinusoidal";
  c.sourceBos = false;
  c.scaleEmbedding = false;
  c.activation = "gelu";
  c.dModel = 1024, c.numHeads = 16, c.dFF = 4096, c.numEncoderLayers = 12,
  c.numDecoderLayers = 12, c.srcVocabSize = 58101, c.maxSeqLen = 1024, c.dropout = 0.1;
  c.unkId = std::nullopt;
  ConfigKeys keys(o, source);
  keys.ignore({kCommonIgnoredKeys, kNumCommonIgnoredKeys});
  keys.ignore(kIgnored);
  int64_t decoderHeads = 16, decoderFfn = 4096, decoderVocab = 0;
  bool share = true, tie = true;
  llvm::Error err = llvm::joinErrors(keys.readInt("d_model", c.dModel, 1),
                                     keys.readInt("encoder_attention_heads", c.numHeads, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("decoder_attention_heads", decoderHeads, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("encoder_ffn_dim", c.dFF, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("decoder_ffn_dim", decoderFfn, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("encoder_layers", c.numEncoderLayers, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("decoder_layers", c.numDecoderLayers, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("vocab_size", c.srcVocabSize, 1));
  if (const llvm::json::Value *v = keys.get("decoder_vocab_size");
      v && v->kind() != llvm::json::Value::Null)
    err = llvm::joinErrors(std::move(err), keys.readInt("decoder_vocab_size", decoderVocab, 1));
  err = llvm::joinErrors(std::move(err),
                         keys.readInt("max_position_embeddings", c.maxSeqLen, 1));
  err = llvm::joinErrors(std::move(err), keys.readDouble("dropout", c.dropout));
  err = llvm::joinErrors(std::move(err), keys.readActivation("activation_function", c.activation));
  err = llvm::joinErrors(std::move(err), keys.readBool("scale_embedding", c.scaleEmbedding));
  err = llvm::joinErrors(std::move(err),
                         keys.readBool("share_encoder_decoder_embeddings", share));
  err = llvm::joinErrors(std::move(err), keys.readBool("tie_word_embeddings", tie));
  std::optional<int64_t> pad = 58100, start, eos = 0;
  err = llvm::joinErrors(std::move(err), keys.readTokenId("pad_token_id", pad));
  err = llvm::joinErrors(std::move(err), keys.readTokenId("decoder_start_token_id", start));
  err = llvm::joinErrors(std::move(err), keys.readTokenId("eos_token_id", eos));
  if (err)
    return std::move(err);
  if (decoderHeads != c.numHeads)
    return keys.error("decoder_attention_heads",
                      llvm::formatv("{0} differs from encoder_attention_heads {1} (one head count "
                                    "is supported)", decoderHeads, c.numHeads));
  if (decoderFfn != c.dFF)
    return keys.error("decoder_ffn_dim",
                      llvm::formatv("{0} differs from encoder_ffn_dim {1} (one width is supported)",
                                    decoderFfn, c.dFF));
  if (c.dModel % c.numHeads != 0)
    return keys.error("encoder_attention_heads",
                      llvm::formatv("d_model {0} is not divisible by {1}", c.dModel, c.numHeads));
  if (c.dModel % 2 != 0)
    return keys.error("d_model", "must be even (the sinusoidal positions come in halves)");
  if (c.dropout >= 1)
    return keys.error("dropout", "must be < 1");
  if (!pad)
    return keys.error("pad_token_id", "missing (the source padding and the decoder's start)");
  c.shareEmbeddings = share;
  c.tieOutput = tie;
  c.tgtVocabSize = share || !decoderVocab ? c.srcVocabSize : decoderVocab;
  if (share && decoderVocab && decoderVocab != c.srcVocabSize)
    return keys.error("decoder_vocab_size",
                      llvm::formatv("{0} differs from vocab_size {1}, but the embeddings are "
                                    "shared", decoderVocab, c.srcVocabSize));
  c.padId = pad;
  c.bosId = start ? start : pad; // the decoder's first token
  c.eosId = eos;
  for (auto [key, id, vocab] : {std::tuple{"pad_token_id", *c.padId, c.srcVocabSize},
                                {"decoder_start_token_id", *c.bosId, c.tgtVocabSize},
                                {"eos_token_id", c.eosId.value_or(0), c.tgtVocabSize}})
    if (id >= vocab)
      return keys.error(key, llvm::formatv("{0} is outside the vocabulary [0, {1})", id, vocab));
  keys.warnUnread(warnings);
  return c;
}

bool mlir::transfuse::isHuggingFaceDirectory(llvm::StringRef path) {
  return llvm::sys::fs::is_directory(path) && llvm::sys::fs::exists(join(path, "config.json"));
}

llvm::Expected<OwningOpRef<ModuleOp>>
mlir::transfuse::loadHuggingFaceDirectory(MLIRContext &context, llvm::StringRef dir,
                                          const BuildOptions &options) {
  const std::string configPath = join(dir, "config.json");
  if (!llvm::sys::fs::exists(join(dir, "model.safetensors")) &&
      !llvm::sys::fs::exists(join(dir, "model.safetensors.index.json")) &&
      llvm::sys::fs::exists(join(dir, "pytorch_model.bin")))
    return fail(dir + ": the weights are pytorch_model.bin (a pickle, which Transfuse does not "
                      "read): save them as safetensors (model.save_pretrained(dir, "
                      "safe_serialization=True))");
  llvm::Expected<llvm::json::Value> json = readJson(configPath);
  if (!json)
    return json.takeError();
  const llvm::json::Object *config = json->getAsObject();
  if (!config)
    return fail(configPath + ": not a JSON object");
  std::optional<llvm::StringRef> type = config->getString("model_type");
  if (!type)
    return fail(configPath + ": key 'model_type': missing (it names the model's family)");
  if (*type == "vit")
    return loadVit(context, dir, *config, configPath, options);
  if (*type != "bert" && *type != "llama" && *type != "mistral" && *type != "qwen2" &&
      *type != "gpt2" && *type != "marian") {
    bool known = llvm::is_contained(kNotYet, *type);
    return fail(configPath + ": key 'model_type': " + (known ? "'" : "unknown family '") + *type +
                (known ? "' is not supported yet" : "'") +
                " (supported: bert, vit, llama, mistral, qwen2, gpt2, marian)");
  }
  if (options.imageSize[0] != 0)
    return fail("--image-size applies to a vision model, not to '" + dir + "' (" + *type + ")");
  if (*type == "gpt2" || *type == "marian") {
    auto parsed = *type == "gpt2" ? parseGpt2Config(*config, configPath, options.warnings)
                                  : parseMarianConfig(*config, configPath, options.warnings);
    if (!parsed)
      return parsed.takeError();
    return buildModel(context, *parsed, options);
  }
  if (*type != "bert")
    return loadLlama(context, *config, configPath, options);
  auto bert = parseBertConfig(*config, configPath, options.warnings);
  if (!bert)
    return bert.takeError();
  if (llvm::Error e = readSentenceTransformers(dir, *bert))
    return std::move(e);
  bert->numLabels = classifierRows(dir, bert->hidden, "bert.", {"pooler.dense.weight"});
  if (options.training && bert->numLabels == 0)
    return fail(dir + ": training a bert model needs a task head: a BertForSequenceClassification's "
                      "pooler.dense and classifier weights (none in the directory)");
  if (options.maxSeqLen > bert->maxPositions)
    return fail("--max-seq-len " + llvm::Twine(options.maxSeqLen) +
                " exceeds the config's max_position_embeddings " +
                llvm::Twine(bert->maxPositions) + " (learned positions have that many rows)");
  OwningOpRef<ModuleOp> module = newModule(context);
  buildBert(*module, *bert, options);
  return finishModel(std::move(module), toJson(*bert), options, bert->maxPositions);
}
