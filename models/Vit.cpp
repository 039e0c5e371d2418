//===- Vit.cpp - the Vision Transformer from Hugging Face directories -----===//
//
// Semantics and weight names of Hugging Face's ViTModel (Dosovitskiy et al.,
// 2020), batch-first:
//   patches = unfold(pixel_values) · projectionᵀ + bias   (a conv of kernel
//             and stride patch_size: embeddings.patch_embeddings.projection)
//   h = [cls_token; patches] + position_embeddings       (embeddings)
//   per layer (pre-LN):
//     h = h + dense(attention(LN(h)))                     (layernorm_before)
//     h = h + output.dense(act(intermediate.dense(LN(h)))) (layernorm_after)
//   last_hidden_state = LN(h)                             (layernorm; `encode`)
// and ViTForImageClassification's logits: classifier(last_hidden_state[:, 0])
// (`classify`). The model is compiled at the config's image_size, with the
// learned positions as stored, or at another size (BuildOptions::imageSize)
// with the positions interpolated as Hugging Face's interpolate_pos_encoding
// does; pixel_values of any other size are refused where they are checked.
//
//===----------------------------------------------------------------------===//

#include "frontend/GraphBuilder.h"
#include "models/HuggingFace.h"

#include "ir/TransfuseDialect.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::transfuse;

namespace {

/// ViT's own keys that do not change what encode and classify compute:
/// the masked-image-modeling decoder's stride and ViTModel's pooler (not an
/// entry here).
const char *const kIgnoredKeys[] = {"encoder_stride", "pooler_output_size", "pooler_act"};

} // namespace

llvm::Expected<VitConfig> mlir::transfuse::parseVitConfig(const llvm::json::Object &o,
                                                          llvm::StringRef source,
                                                          std::vector<std::string> *warnings) {
  VitConfig c;
  ConfigKeys keys(o, source);
  keys.ignore({kCommonIgnoredKeys, kNumCommonIgnoredKeys});
  keys.ignore(kIgnoredKeys);
  llvm::Error err = llvm::joinErrors(keys.readInt("hidden_size", c.hidden, 1),
                                     keys.readInt("num_hidden_layers", c.layers, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("num_attention_heads", c.heads, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("intermediate_size", c.intermediate, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("num_channels", c.channels, 1));
  err = llvm::joinErrors(std::move(err), keys.readDouble("layer_norm_eps", c.layerNormEps));
  err = llvm::joinErrors(std::move(err), keys.readDouble("hidden_dropout_prob", c.hiddenDropout));
  err = llvm::joinErrors(std::move(err),
                         keys.readDouble("attention_probs_dropout_prob", c.attentionDropout));
  err = llvm::joinErrors(std::move(err), keys.readActivation("hidden_act", c.activation));
  err = llvm::joinErrors(std::move(err), keys.readPair("image_size", c.imageSize));
  err = llvm::joinErrors(std::move(err), keys.readPair("patch_size", c.patchSize));
  err = llvm::joinErrors(std::move(err), keys.readBool("qkv_bias", c.qkvBias));
  if (err)
    return std::move(err);
  if (c.hidden % c.heads != 0)
    return keys.error("num_attention_heads",
                      llvm::formatv("hidden_size {0} is not divisible by {1}", c.hidden, c.heads));
  if (!(c.layerNormEps > 0))
    return keys.error("layer_norm_eps", "must be > 0");
  if (c.hiddenDropout >= 1 || c.attentionDropout >= 1)
    return keys.error(c.hiddenDropout >= 1 ? "hidden_dropout_prob" : "attention_probs_dropout_prob",
                      "must be < 1");
  for (int i = 0; i < 2; ++i)
    if (c.imageSize[i] % c.patchSize[i] != 0)
      return keys.error("patch_size",
                        llvm::formatv("the image_size {0}x{1} is not a whole number of {2}x{3} "
                                      "patches",
                                      c.imageSize[0], c.imageSize[1], c.patchSize[0],
                                      c.patchSize[1]));
  keys.warnUnread(warnings);
  return c;
}

llvm::json::Object mlir::transfuse::toJson(const VitConfig &c) {
  llvm::json::Object o;
  o["model_type"] = "vit";
  o["hidden_size"] = c.hidden;
  o["num_hidden_layers"] = c.layers;
  o["num_attention_heads"] = c.heads;
  o["intermediate_size"] = c.intermediate;
  o["hidden_act"] = c.activation;
  o["layer_norm_eps"] = c.layerNormEps;
  o["hidden_dropout_prob"] = c.hiddenDropout;
  o["attention_probs_dropout_prob"] = c.attentionDropout;
  o["image_size"] = llvm::json::Array{c.imageSize[0], c.imageSize[1]};
  o["patch_size"] = llvm::json::Array{c.patchSize[0], c.patchSize[1]};
  o["num_channels"] = c.channels;
  o["qkv_bias"] = c.qkvBias;
  if (c.input() != c.imageSize)
    o["interpolated_to"] = llvm::json::Array{c.input()[0], c.input()[1]};
  if (c.numLabels > 0)
    o["num_labels"] = c.numLabels;
  return o;
}

namespace {

/// PyTorch's bicubic weights (upsample_bicubic2d: A = -0.75,
/// align_corners false, edge indices clamped; float arithmetic as its CPU
/// kernel's) of `out` samples from `in`: [out, in].
std::vector<float> bicubic(int64_t in, int64_t out) {
  constexpr float A = -0.75f;
  auto near = [&](float x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };  // |x| <= 1
  auto far = [&](float x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }; // 1 < |x| < 2
  std::vector<float> m(out * in, 0.0f);
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t o = 0; o < out; ++o) {
    const float src = scale * (static_cast<float>(o) + 0.5f) - 0.5f;
    const float floor = std::floor(src), t = src - floor;
    const float w[4] = {far(t + 1), near(t), near(1 - t), far(2 - t)};
    for (int k = 0; k < 4; ++k) {
      const int64_t at = std::clamp<int64_t>(static_cast<int64_t>(floor) - 1 + k, 0, in - 1);
      m[o * in + at] += w[k];
    }
  }
  return m;
}

/// Hugging Face's interpolate_pos_encoding as a matrix [N, N_stored]: the
/// stored patch positions, a square grid, resampled bicubically to the
/// compiled image's grid of patches (rows y, then x).
std::vector<float> interpolation(const VitConfig &c) {
  const int64_t grid = c.imageSize[0] / c.patchSize[0];
  const int64_t rows = c.input()[0] / c.patchSize[0], cols = c.input()[1] / c.patchSize[1];
  const std::vector<float> my = bicubic(grid, rows), mx = bicubic(grid, cols);
  std::vector<float> m;
  m.reserve(rows * cols * grid * grid);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t p = 0; p < grid; ++p)
        for (int64_t q = 0; q < grid; ++q)
          m.push_back(my[i * grid + p] * mx[j * grid + q]);
  return m;
}

/// ViTModel over pixel_values: last_hidden_state. With `training`, dropout
/// where ViTModel has it: after the embeddings, on the attention
/// probabilities, on each sublayer's output.
Value buildEncoder(OpBuilder &b, GraphBuilder &g, const VitConfig &c, Value pixels,
                   bool training) {
  const double hiddenDrop = training ? c.hiddenDropout : 0.0;
  const double attentionDrop = training ? c.attentionDropout : 0.0;
  const int64_t d = c.hidden, n = c.patches();
  const int64_t ph = c.patchSize[0], pw = c.patchSize[1], inputs = c.channels * ph * pw;
  // The patch embedding: a convolution of kernel and stride patch_size is
  // unfold, then one GEMM with the kernel flattened to [hidden, C·ph·pw].
  Value kernel = g.param("embeddings.patch_embeddings.projection.weight",
                         {d, c.channels, ph, pw}, "normal_0.02");
  Value patches = g.linear(g.unfold(pixels, ph, pw), g.reshape(kernel, {d, inputs}),
                           g.param("embeddings.patch_embeddings.projection.bias", {d}, "zeros"));
  Value cls = g.param("embeddings.cls_token", {1, 1, d}, "normal_0.02");
  Value h = g.concat({g.expand(cls, g.first(patches, 1)), patches}, 1);
  // The positions [1, 1 + N, hidden] as stored, added as [1 + N, hidden]
  // (a trailing block of h, which the fused residual LayerNorm takes);
  // interpolated to another image's patches by a constant matrix.
  const int64_t stored = c.storedPatches();
  Value positions = g.reshape(
      g.param("embeddings.position_embeddings", {1, stored + 1, d}, "normal_0.02"),
      {stored + 1, d});
  if (c.input() != c.imageSize)
    positions = g.concat({g.first(positions, 0),
                          g.matmul(g.constant(interpolation(c), {n, stored}),
                                   g.slice(positions, 0, 1, stored))},
                         0);
  h = g.add(h, positions);
  h = g.dropout(h, hiddenDrop);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    g.setLocation(NameLoc::get(b.getStringAttr("encoder.layer." + std::to_string(i))));
    auto linearWeights = [&](const std::string &name, int64_t out, int64_t in, bool bias) {
      return std::pair{g.param(p + name + ".weight", {out, in}, "normal_0.02"),
                       bias ? g.param(p + name + ".bias", {out}, "zeros") : Value()};
    };
    AttentionWeights a;
    std::tie(a.wq, a.bq) = linearWeights("attention.attention.query", d, d, c.qkvBias);
    std::tie(a.wk, a.bk) = linearWeights("attention.attention.key", d, d, c.qkvBias);
    std::tie(a.wv, a.bv) = linearWeights("attention.attention.value", d, d, c.qkvBias);
    std::tie(a.wo, a.bo) = linearWeights("attention.output.dense", d, d, true);
    h = g.residual(h, p + "layernorm_before", /*preNorm=*/true, c.layerNormEps, hiddenDrop,
                   [&](Value x) {
                     return g.multiHeadAttention(x, x, a, c.heads, {}, attentionDrop);
                   });
    auto [w1, b1] = linearWeights("intermediate.dense", c.intermediate, d, true);
    auto [w2, b2] = linearWeights("output.dense", d, c.intermediate, true);
    h = g.residual(h, p + "layernorm_after", /*preNorm=*/true, c.layerNormEps, hiddenDrop,
                   [&](Value x) {
                     return g.feedForward(x, w1, b1, w2, b2, c.activation, /*transposed=*/true,
                                          0.0);
                   });
  }
  g.setLocation(NameLoc::get(b.getStringAttr("layernorm")));
  return g.layerNorm(h, "layernorm", c.layerNormEps);
}

} // namespace

void mlir::transfuse::buildVit(ModuleOp module, const VitConfig &c, const BuildOptions &options) {
  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  const int64_t dyn = ShapedType::kDynamic;
  auto pixels = RankedTensorType::get({dyn, c.channels, c.input()[0], c.input()[1]},
                                      b.getF32Type());
  // One entry over pixel_values (and, for the loss, the labels [B]): its
  // output named `output`, computed by `tail` from last_hidden_state.
  auto entry = [&](StringRef name, StringRef output, ArrayRef<int64_t> shape, bool labels,
                   llvm::function_ref<Value(GraphBuilder &, Value, Block *)> tail) {
    SmallVector<Type> inputTypes = {pixels};
    if (labels)
      inputTypes.push_back(RankedTensorType::get({dyn}, b.getI32Type()));
    auto func = func::FuncOp::create(
        b, b.getUnknownLoc(), name,
        b.getFunctionType(inputTypes, {RankedTensorType::get(shape, b.getF32Type())}));
    const StringRef inputs[] = {"pixel_values", "labels"};
    for (unsigned i = 0; i < inputTypes.size(); ++i)
      func.setArgAttr(i, kNameAttr, b.getStringAttr(inputs[i]));
    func.setResultAttr(0, kNameAttr, b.getStringAttr(output));
    Block *body = func.addEntryBlock();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(body);
    GraphBuilder g(b, NameLoc::get(b.getStringAttr("embeddings")));
    Value h = buildEncoder(b, g, c, body->getArgument(0), /*training=*/labels);
    g.setLocation(NameLoc::get(b.getStringAttr(name)));
    func::ReturnOp::create(b, b.getUnknownLoc(), tail(g, h, body));
  };
  // ViTForImageClassification: the classifier on the CLS token's state.
  auto classifier = [&](GraphBuilder &g, Value h) {
    Value first = g.reshape(g.first(h, 1), {dyn, c.hidden});
    return g.linear(first, g.param("classifier.weight", {c.numLabels, c.hidden}, "normal_0.02"),
                    g.param("classifier.bias", {c.numLabels}, "zeros"));
  };
  entry("encode", "last_hidden_state", {dyn, c.patches() + 1, c.hidden}, false,
        [](GraphBuilder &, Value h, Block *) { return h; });
  if (c.numLabels > 0)
    entry("classify", "logits", {dyn, c.numLabels}, false,
          [&](GraphBuilder &g, Value h, Block *) { return classifier(g, h); });
  if (options.training) // the cross-entropy of the logits (label -100 ignored)
    entry("loss", "loss", {}, true, [&](GraphBuilder &g, Value h, Block *body) {
      return g.crossEntropy(classifier(g, h), body->getArgument(1), options.labelSmoothing, -100);
    });

  // ViTModel's state dict may hold its pooler (not an entry here); the task
  // model prefixes the encoder with `vit.` and adds its classifier.
  module->setAttr(kWeightAliasesAttr, b.getDictionaryAttr({}));
  module->setAttr(kIgnoredWeightsAttr, b.getStrArrayAttr({"pooler.*", "classifier.*"}));
  module->setAttr(kWeightPrefixesAttr, b.getStrArrayAttr({"vit."}));
}
