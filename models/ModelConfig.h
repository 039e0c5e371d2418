//===- ModelConfig.h - JSON configs of the built-in architectures ---------===//
//
// A model config names an architecture and its hyperparameters. Every key is
// documented, with its default per architecture, in models/README.md. An
// unknown key, a key of the other architecture, or a bad value is an error
// naming the file and the key.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_MODELS_MODELCONFIG_H
#define TRANSFUSE_MODELS_MODELCONFIG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::transfuse {

enum class Architecture { EncoderDecoder, DecoderOnly };

struct ModelConfig {
  Architecture architecture = Architecture::EncoderDecoder;
  int64_t dModel = 512;
  int64_t numHeads = 8;
  int64_t dFF = 2048;
  int64_t numEncoderLayers = 6; // encoder_decoder
  int64_t numDecoderLayers = 6; // encoder_decoder; num_layers for decoder_only
  int64_t srcVocabSize = 0;     // encoder_decoder
  int64_t tgtVocabSize = 0;     // encoder_decoder; vocab_size for decoder_only
  int64_t maxSeqLen = 512;
  double dropout = 0.1;
  std::string activation = "relu";   // relu | gelu | gelu_tanh
  std::string normPosition = "post"; // post | pre
  bool finalNorm = true;
  double layerNormEps = 1e-5;
  bool shareEmbeddings = false;
  bool tieOutput = false;
  std::string positional = "sinusoidal"; // sinusoidal | learned
  // Special tokens (models/README.md, "Token conventions"): the
  // encoder_decoder defaults are the PyTorch translation tutorial's; a
  // decoder_only model has none unless its config names them.
  std::optional<int64_t> padId = 1;
  std::optional<int64_t> bosId = 2;
  std::optional<int64_t> eosId = 3;
  std::optional<int64_t> unkId = 0;
  bool sourceBos = true; // encoder_decoder: a source is BOS ids EOS (else ids EOS)
  // encoder_decoder: whose weight names and variant (models/README.md,
  // "Layouts"): "torch", the PyTorch translation tutorial's; or "marian",
  // Hugging Face's MarianMTModel (q/k/v projections apart, sinusoidal
  // positions in halves, final_logits_bias, no target padding mask: the
  // decoder starts at the pad id).
  std::string layout = "torch";
  bool scaleEmbedding = true; // encoder_decoder: token embeddings · √d_model

  bool isDecoderOnly() const { return architecture == Architecture::DecoderOnly; }
  int64_t outputVocabSize() const { return tgtVocabSize; }
};

/// The limits on a model definition's text (docs/reliability.md), checked
/// before LLVM's JSON parser or MLIR's parser sees it: both recurse once per
/// nesting level, so a deep enough input overflows the stack inside them,
/// where no check of ours can reach. Brackets ( [ { < nest at most
/// kMaxDefinitionNesting deep, and so do brackets inside a string (a JSON
/// config held in an MLIR string attribute is parsed too); the text is at
/// most kMaxDefinitionBytes. Real models nest a few levels.
inline constexpr size_t kMaxDefinitionBytes = size_t{1} << 30;
inline constexpr int64_t kMaxDefinitionNesting = 64;
/// The error names `name` and the line.
llvm::Error checkDefinitionText(llvm::StringRef text, llvm::StringRef name);

/// Parses and validates a config. `source` names the file in messages.
llvm::Expected<ModelConfig> parseModelConfig(llvm::StringRef json,
                                             llvm::StringRef source);

/// The fully resolved config (every key of its architecture, defaults filled
/// in), as written to manifest.json and read back by parseModelConfig.
llvm::json::Object toJson(const ModelConfig &config);

} // namespace mlir::transfuse

#endif // TRANSFUSE_MODELS_MODELCONFIG_H
