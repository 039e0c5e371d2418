//===- Models.h - the built-in architectures and model loading ------------===//
//
// Builds the entry points of a model in the transfuse dialect from a ModelConfig:
//   encoder_decoder: forward(src_tokens: [B,S] i32, tgt_tokens: [B,T] i32)
//                      -> logits [B,T,V] f32
//                    and, for decoding (docs/decoding.md):
//                    encode(src_tokens: [B,S] i32) -> (), writing the state
//                    decode_step(src_tokens: [B,S], tgt_tokens: [B,n] i32)
//                      -> logits [B,n,V] of target positions L..L+n
//   decoder_only:    forward(tokens: [B,T] i32) -> logits [B,T,V] f32
//                    and, for decoding: prefill(tokens: [B,n]) -> logits
//                    [B,1,V] of the last position, decode_step(tokens:
//                    [B,n]) -> logits [B,n,V], both at positions L..L+n
// B, S and T are dynamic, bounded by the maxima in BuildOptions; the
// entries that use state take rows up to max_batch · max_beam.
//
// The module carries what binding weights needs (see docs/ir.md):
//   transfuse.config          resolved config JSON (built-in architectures)
//   transfuse.weight_aliases  {alias = "canonical"}: names a file may hold
//                             instead of (or equal to) a parameter
//   transfuse.ignored_weights glob patterns of buffers skipped with a warning
//   transfuse.weight_prefixes optional leading prefixes of every name
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_MODELS_MODELS_H
#define TRANSFUSE_MODELS_MODELS_H

#include "frontend/onnx/OnnxImport.h"
#include "models/ModelConfig.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/JSON.h"

#include <array>
#include <map>
#include <string>
#include <vector>

namespace mlir::transfuse {

class GraphBuilder;

struct BuildOptions {
  /// 0: the default, 8 (for MLIR input: the function's own attribute).
  int64_t maxBatch = 0;
  /// 0: the config's max_seq_len (for MLIR input: the function's attribute).
  int64_t maxSeqLen = 0;
  /// 0: the default, 4. The state's rows are maxBatch · maxBeam.
  int64_t maxBeam = 0;
  /// Emit dropout and the `loss` entry (training graphs); inference graphs
  /// have neither.
  bool training = false;
  /// The loss's label smoothing (training builds; the paper's 0.1).
  double labelSmoothing = 0.1;
  /// Build the decoding entry points where the architecture has them.
  bool decoding = true;
  /// A vision model's input [height, width]; {0, 0}: the config's
  /// image_size. A ViT's learned positions are interpolated to it as Hugging
  /// Face's interpolate_pos_encoding does (docs/vision.md).
  std::array<int64_t, 2> imageSize = {0, 0};
  /// An ONNX file's maxima per dim_param (`--dim NAME=MAX`).
  std::map<std::string, int64_t> dims;
  /// Where a definition's warnings go (unknown keys of a Hugging Face
  /// config.json, ...); null: dropped.
  std::vector<std::string> *warnings = nullptr;
};

/// True when the model of `config` gets decoding entry points: every
/// inference build unless `decoding` is off.
bool decodingEntries(const ModelConfig &config, const BuildOptions &options);

inline constexpr llvm::StringLiteral kConfigAttr = "transfuse.config";
inline constexpr llvm::StringLiteral kWeightAliasesAttr = "transfuse.weight_aliases";
inline constexpr llvm::StringLiteral kIgnoredWeightsAttr = "transfuse.ignored_weights";
inline constexpr llvm::StringLiteral kWeightPrefixesAttr = "transfuse.weight_prefixes";

/// The entry a training build differentiates: `loss(inputs..., labels)`,
/// the mean cross-entropy (label smoothing from `options`, the config's
/// pad_id ignored, or -100 without one, PyTorch's default) of the logits
/// `body` builds from the token inputs against `labels` [B, T].
void addLossEntry(OpBuilder &b, ModuleOp module, ArrayRef<StringRef> tokenInputs,
                  const ModelConfig &config, const BuildOptions &options,
                  llvm::function_ref<Value(GraphBuilder &, Block *)> body);

/// Builds the model of `config`. Fails on options the config cannot honour.
llvm::Expected<OwningOpRef<ModuleOp>>
buildModel(MLIRContext &context, const ModelConfig &config, const BuildOptions &options);

/// An empty module with the dialects loaded, and the last step of building
/// any model: the resolved `config` (kConfigAttr), each entry's maxima
/// (`options`', else 8 and `defaultMaxSeqLen`), verified.
OwningOpRef<ModuleOp> newModule(MLIRContext &context);
llvm::Expected<OwningOpRef<ModuleOp>> finishModel(OwningOpRef<ModuleOp> module,
                                                  llvm::json::Object config,
                                                  const BuildOptions &options,
                                                  int64_t defaultMaxSeqLen);

/// An ONNX file (`.onnx`) imported at `options`' maxima and `dims`
/// (frontend/onnx/OnnxImport.h), its weights beside the module.
llvm::Expected<onnx_import::ImportedModel> importOnnxDefinition(MLIRContext &context,
                                                                llvm::StringRef path,
                                                                const BuildOptions &options);

/// Loads a model definition: a JSON config of a built-in architecture
/// (`.json`), a Hugging Face model directory (HuggingFace.h), an ONNX file
/// (`.onnx`; its weights dropped: importOnnxDefinition keeps them) or MLIR
/// text of the dialect (anything else), verified. Maxima
/// given in `options` override those of MLIR functions.
llvm::Expected<OwningOpRef<ModuleOp>>
loadModelDefinition(MLIRContext &context, llvm::StringRef path, const BuildOptions &options);

/// The same on `text`, named `name` in messages: a JSON config when `name`
/// ends in .json, else MLIR text; either must pass checkDefinitionText
/// (ModelConfig.h) before a parser sees it.
llvm::Expected<OwningOpRef<ModuleOp>> parseModelDefinition(MLIRContext &context,
                                                           llvm::StringRef text,
                                                           llvm::StringRef name,
                                                           const BuildOptions &options);

// Per-architecture builders (EncoderDecoder.cpp, DecoderOnly.cpp).

/// Creates `@name(tokens...: tensor<?x?xi32>) -> logits: tensor<?x?xVxf32>`
/// (no result when `vocab` is 0; logits of one position, ?x1xV, with
/// `lastOnly`) with named arguments and result, and leaves `b` at the start
/// of its body.
func::FuncOp createEntry(OpBuilder &b, ModuleOp module, StringRef name,
                         ArrayRef<StringRef> tokenInputs, int64_t vocab, bool lastOnly = false);

void buildEncoderDecoder(ModuleOp module, const ModelConfig &config,
                         const BuildOptions &options);
void buildDecoderOnly(ModuleOp module, const ModelConfig &config,
                      const BuildOptions &options);

} // namespace mlir::transfuse

#endif // TRANSFUSE_MODELS_MODELS_H
