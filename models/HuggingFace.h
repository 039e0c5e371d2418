//===- HuggingFace.h - Hugging Face model directories as they are ---------===//
//
// A Hugging Face model directory (config.json beside model.safetensors) is a
// model definition: `model_type` picks the family, the config's keys map to
// the family's (docs/models.md lists every key: mapped, ignored because it
// does not change the computation, or refused by name), and the weights keep
// their Hugging Face names. No conversion step.
//
// Families: `bert` (BertModel: post-LN encoder, learned positions,
// token-type embeddings):
//   encode(input_ids: [B,S] i32, attention_mask: [B,S] i32,
//          token_type_ids: [B,S] i32) -> last_hidden_state [B,S,hidden] f32
//   embed(the same) -> sentence_embedding [B,hidden]   (sentence-transformers)
//   classify(the same) -> logits [B,num_labels]        (a classifier head)
// with weights named as BertModel saves them (`embeddings.word_embeddings.
// weight`, `encoder.layer.N.attention.self.query.weight`, ...), with or
// without the `bert.` prefix of the task models.
// `vit` (ViTModel: pre-LN encoder over 16×16 patches, a CLS token, learned
// positions, a final LayerNorm):
//   encode(pixel_values: [B,C,H,W] f32) -> last_hidden_state [B,1+N,hidden]
//   classify(the same) -> logits [B,num_labels]  (ViTForImageClassification)
// at the config's image_size, weights named as ViTModel saves them, with or
// without the `vit.` prefix.
// `llama`, `mistral`, `qwen2` (Llama.cpp) and `gpt2` (GPT2LMHeadModel, as
// decoder_only): decoder_only's entries (Models.h), with the KV cache.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_MODELS_HUGGINGFACE_H
#define TRANSFUSE_MODELS_HUGGINGFACE_H

#include "models/Models.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

#include <array>

#include <string>
#include <vector>

namespace mlir::transfuse {

/// True when `path` is a directory holding a config.json.
bool isHuggingFaceDirectory(llvm::StringRef path);

/// Builds the model of the Hugging Face directory `dir` at `options`'
/// maxima (default maximum length: the config's max_position_embeddings).
/// Keys of config.json that are not known go to `options.warnings`, naming
/// them.
/// Errors name the file and the key: a family not supported yet, a key whose
/// value changes the computation in a way not supported, a directory with
/// only pytorch_model.bin (pickle: save it as safetensors).
llvm::Expected<OwningOpRef<ModuleOp>>
loadHuggingFaceDirectory(MLIRContext &context, llvm::StringRef dir, const BuildOptions &options);

/// config.json's keys as a family reads them: typed, range-checked reads
/// whose errors name the file and the key, keys ignored by name (they do not
/// change the computation), and a warning for each key nobody read.
class ConfigKeys {
public:
  ConfigKeys(const llvm::json::Object &config, llvm::StringRef source)
      : config(config), source(source) {}
  /// The value of `key` (null when absent), marked as read.
  const llvm::json::Value *get(llvm::StringRef key);
  /// Each reads `key` into `out` when present, else leaves the default.
  llvm::Error readInt(llvm::StringRef key, int64_t &out, int64_t min);
  llvm::Error readDouble(llvm::StringRef key, double &out);
  llvm::Error readBool(llvm::StringRef key, bool &out);
  /// An integer, or a list of two (an image's or a patch's [height, width]).
  llvm::Error readPair(llvm::StringRef key, std::array<int64_t, 2> &out);
  /// A token id: absent leaves `out`, null clears it, a list gives its first.
  llvm::Error readTokenId(llvm::StringRef key, std::optional<int64_t> &out);
  /// hidden_act (or another activation key) as the kernels name it.
  llvm::Error readActivation(llvm::StringRef key, std::string &out);
  void ignore(llvm::ArrayRef<const char *> keys);
  llvm::Error error(llvm::StringRef key, const llvm::Twine &what) const;
  /// "SOURCE: unknown key 'K' ignored" for every key not read or ignored.
  void warnUnread(std::vector<std::string> *warnings) const;

private:
  const llvm::json::Object &config;
  std::string source;
  llvm::StringSet<> known;
};

/// Keys of every family's config.json that do not change what a model
/// computes (the hub's and transformers' bookkeeping, initialization, task
/// and generation settings).
extern const char *const kCommonIgnoredKeys[];
extern const size_t kNumCommonIgnoredKeys;

/// The BERT family's configuration, from config.json's keys.
struct BertConfig {
  int64_t vocabSize = 30522;
  int64_t hidden = 768;
  int64_t layers = 12;
  int64_t heads = 12;
  int64_t intermediate = 3072;
  std::string activation = "gelu"; // the kernels' name (hidden_act mapped)
  int64_t maxPositions = 512;
  int64_t typeVocabSize = 2;
  double layerNormEps = 1e-12;
  double hiddenDropout = 0.1, attentionDropout = 0.1;
  std::optional<double> classifierDropout; // unset: hiddenDropout
  std::optional<int64_t> padTokenId = 0;
  /// A sentence-transformers directory (modules.json): the `embed` entry's
  /// pooling ("cls", "mean" or "max") and whether a Normalize module follows.
  std::optional<std::string> pooling;
  bool normalize = false;
  /// Rows of classifier.weight when the weights hold a
  /// BertForSequenceClassification head (pooler and classifier): the
  /// `classify` entry; 0: none.
  int64_t numLabels = 0;
};

/// config.json of `model_type` bert; `source` names the file in messages.
llvm::Expected<BertConfig> parseBertConfig(const llvm::json::Object &config,
                                           llvm::StringRef source,
                                           std::vector<std::string> *warnings);

/// The resolved config in config.json's key names (manifest.json's
/// "config"), `model_type` included.
llvm::json::Object toJson(const BertConfig &config);

/// Reads a sentence-transformers directory's modules.json and its Pooling
/// module's config into `config` (nothing when `dir` has no modules.json).
/// Errors name the file and the key: a module type other than Transformer,
/// Pooling and Normalize, a pooling mode other than cls, mean or max, or
/// several modes at once.
llvm::Error readSentenceTransformers(llvm::StringRef dir, BertConfig &config);

/// Builds `encode` of a BERT model (see above), and `embed` and `classify`
/// where the config has them, into `module`.
void buildBert(ModuleOp module, const BertConfig &config, const BuildOptions &options);

/// The Vision Transformer's configuration (ViTModel,
/// ViTForImageClassification), from config.json's keys.
struct VitConfig {
  int64_t hidden = 768;
  int64_t layers = 12;
  int64_t heads = 12;
  int64_t intermediate = 3072;
  std::string activation = "gelu";
  double layerNormEps = 1e-12;
  double hiddenDropout = 0.0, attentionDropout = 0.0;
  std::array<int64_t, 2> imageSize = {224, 224};
  std::array<int64_t, 2> patchSize = {16, 16};
  int64_t channels = 3;
  bool qkvBias = true;
  /// Rows of classifier.weight when the weights hold a
  /// ViTForImageClassification head: the `classify` entry; 0: none.
  int64_t numLabels = 0;
  /// The size pixel_values has: image_size, or another size whose patches
  /// take positions interpolated from the stored ones (BuildOptions::imageSize).
  std::array<int64_t, 2> inputSize = {0, 0}; // {0, 0}: imageSize
  std::array<int64_t, 2> input() const { return inputSize[0] ? inputSize : imageSize; }
  /// Patches of the compiled image, and the positions stored (beyond the
  /// CLS token's), which differ when the positions are interpolated.
  int64_t patches() const { return (input()[0] / patchSize[0]) * (input()[1] / patchSize[1]); }
  int64_t storedPatches() const {
    return (imageSize[0] / patchSize[0]) * (imageSize[1] / patchSize[1]);
  }
};

llvm::Expected<VitConfig> parseVitConfig(const llvm::json::Object &config, llvm::StringRef source,
                                         std::vector<std::string> *warnings);
llvm::json::Object toJson(const VitConfig &config);

/// Builds `encode` (pixel_values [B, C, H, W] -> last_hidden_state
/// [B, 1 + N, hidden]), `classify` (-> logits [B, num_labels]) with a head,
/// and `loss` (+ labels [B]) in training builds, into `module`.
void buildVit(ModuleOp module, const VitConfig &config, const BuildOptions &options);

/// The decoder LLM families Llama, Mistral and Qwen2 (their ForCausalLM
/// models), from config.json's keys.
struct LlamaConfig {
  std::string family = "llama"; // model_type: llama, mistral or qwen2
  int64_t vocabSize = 32000;
  int64_t hidden = 4096;
  int64_t layers = 32;
  int64_t heads = 32;
  int64_t kvHeads = 32; // num_key_value_heads (grouped-query attention)
  int64_t headDim = 0;  // 0 until parsed: hidden / heads
  int64_t intermediate = 11008;
  int64_t maxPositions = 2048;
  std::string activation = "silu";
  double rmsNormEps = 1e-6;
  double ropeTheta = 10000.0;
  /// rope_scaling: "default", "linear" (positions / factor) or "llama3".
  std::string ropeType = "default";
  double ropeFactor = 1.0, ropeLowFreqFactor = 1.0, ropeHighFreqFactor = 4.0;
  int64_t ropeOriginalMax = 8192;
  bool tieEmbeddings = false;
  bool attentionBias = false; // biases of q/k/v_proj (Qwen2: always)
  bool outputBias = false;    // o_proj's bias (Llama's attention_bias)
  bool mlpBias = false;
  double attentionDropout = 0.0;
  /// Mistral's (and Qwen2's, with use_sliding_window) attention window.
  std::optional<int64_t> slidingWindow;
  std::optional<int64_t> bosId, eosId, padId;

  /// The rotary frequencies [headDim / 2], rope_scaling applied.
  std::vector<float> inverseFrequencies() const;
};

llvm::Expected<LlamaConfig> parseLlamaConfig(const llvm::json::Object &config,
                                             llvm::StringRef source,
                                             std::vector<std::string> *warnings);
llvm::json::Object toJson(const LlamaConfig &config);

/// Builds decoder_only's entries (Models.h: forward, prefill and
/// decode_step, loss in training builds) of a Llama-family model.
void buildLlama(ModuleOp module, const LlamaConfig &config, const BuildOptions &options);

/// GPT-2's config.json (GPT2LMHeadModel) as decoder_only's ModelConfig.
llvm::Expected<ModelConfig> parseGpt2Config(const llvm::json::Object &config,
                                            llvm::StringRef source,
                                            std::vector<std::string> *warnings);

/// Marian (model_type "marian", MarianMTModel) as the encoder_decoder
/// architecture in its "marian" layout (ModelConfig::layout): the heads and
/// the feed-forward width of encoder and decoder must agree; the decoder
/// starts at decoder_start_token_id (the pad id), sources are ids EOS.
llvm::Expected<ModelConfig> parseMarianConfig(const llvm::json::Object &config,
                                              llvm::StringRef source,
                                              std::vector<std::string> *warnings);

} // namespace mlir::transfuse

#endif // TRANSFUSE_MODELS_HUGGINGFACE_H
