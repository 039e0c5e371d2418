//===- Bert.cpp - the BERT family from Hugging Face directories -----------===//
//
// Semantics and weight names of Hugging Face's BertModel, batch-first:
//   h = LN(word_embeddings[ids] + position_embeddings[:S]
//          + token_type_embeddings[type_ids])            (embeddings.LayerNorm)
//   per layer (post-LN):
//     h = LN(h + dense(attention(h)))                     (attention.output)
//     h = LN(h + dense(act(intermediate.dense(h))))       (output)
//   last_hidden_state = h                                  (entry `encode`)
// and, where the directory says so, the sentence embedding of
// sentence-transformers (`embed`: pool(h) over the mask, L2-normalized when
// a Normalize module is listed) and BertForSequenceClassification's logits
// (`classify`: classifier(tanh(pooler.dense(h[:, 0])))).
// Keys are masked where attention_mask is 0 (Hugging Face adds the dtype's
// minimum instead; the two differ only on a row whose keys are all masked,
// which gives zeros here: docs/ir.md).
//
//===----------------------------------------------------------------------===//

#include "frontend/GraphBuilder.h"
#include "models/HuggingFace.h"

#include "ir/Sizes.h"
#include "ir/TransfuseDialect.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace mlir::transfuse;

namespace {

/// config.json keys of the BERT family that do not change what the model
/// computes, beyond every family's (kCommonIgnoredKeys). Listed in
/// docs/models.md.
const char *const kIgnoredKeys[] = {
    "directionality", "pooler_fc_size", "pooler_num_attention_heads", "pooler_num_fc_layers",
    "pooler_size_per_head", "pooler_type"};

} // namespace

llvm::Expected<BertConfig> mlir::transfuse::parseBertConfig(const llvm::json::Object &o,
                                                            llvm::StringRef source,
                                                            std::vector<std::string> *warnings) {
  BertConfig c;
  ConfigKeys keys(o, source);
  keys.ignore({kCommonIgnoredKeys, kNumCommonIgnoredKeys});
  keys.ignore(kIgnoredKeys);
  llvm::Error err = llvm::joinErrors(keys.readInt("vocab_size", c.vocabSize, 1),
                                     keys.readInt("hidden_size", c.hidden, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("num_hidden_layers", c.layers, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("num_attention_heads", c.heads, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("intermediate_size", c.intermediate, 1));
  err = llvm::joinErrors(std::move(err),
                         keys.readInt("max_position_embeddings", c.maxPositions, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("type_vocab_size", c.typeVocabSize, 1));
  err = llvm::joinErrors(std::move(err), keys.readDouble("layer_norm_eps", c.layerNormEps));
  err = llvm::joinErrors(std::move(err), keys.readDouble("hidden_dropout_prob", c.hiddenDropout));
  err = llvm::joinErrors(std::move(err),
                         keys.readDouble("attention_probs_dropout_prob", c.attentionDropout));
  err = llvm::joinErrors(std::move(err), keys.readActivation("hidden_act", c.activation));
  if (err)
    return std::move(err);
  if (const llvm::json::Value *v = keys.get("classifier_dropout"); v && !v->getAsNull()) {
    std::optional<double> d = v->getAsNumber();
    if (!d || !(*d >= 0 && *d < 1))
      return keys.error("classifier_dropout", "expected null or a number in [0, 1)");
    c.classifierDropout = *d;
  }
  if (const llvm::json::Value *v = keys.get("pad_token_id")) {
    if (v->getAsNull())
      c.padTokenId.reset();
    else if (std::optional<int64_t> i = v->getAsInteger(); i && *i >= 0 && *i < c.vocabSize)
      c.padTokenId = *i;
    else
      return keys.error("pad_token_id", "expected null or an id in the vocabulary");
  }
  // Keys whose values change the computation: the supported value, or an
  // error naming what is not supported.
  if (const llvm::json::Value *v = keys.get("position_embedding_type"))
    if (v->getAsString() != llvm::StringRef("absolute"))
      return keys.error("position_embedding_type",
                        "only \"absolute\" (learned positions) is supported");
  for (const char *key : {"is_decoder", "add_cross_attention"})
    if (const llvm::json::Value *v = keys.get(key); v && v->getAsBoolean() != false)
      return keys.error(key, "a BERT decoder or cross-attention is not supported (an encoder only)");
  if (c.hidden % c.heads != 0)
    return keys.error("num_attention_heads",
                      llvm::formatv("hidden_size {0} is not divisible by {1}", c.hidden, c.heads));
  if (!(c.layerNormEps > 0))
    return keys.error("layer_norm_eps", "must be > 0");
  keys.warnUnread(warnings);
  return c;
}

llvm::json::Object mlir::transfuse::toJson(const BertConfig &c) {
  llvm::json::Object o;
  o["model_type"] = "bert";
  o["vocab_size"] = c.vocabSize;
  o["hidden_size"] = c.hidden;
  o["num_hidden_layers"] = c.layers;
  o["num_attention_heads"] = c.heads;
  o["intermediate_size"] = c.intermediate;
  o["hidden_act"] = c.activation;
  o["max_position_embeddings"] = c.maxPositions;
  o["type_vocab_size"] = c.typeVocabSize;
  o["layer_norm_eps"] = c.layerNormEps;
  o["hidden_dropout_prob"] = c.hiddenDropout;
  o["attention_probs_dropout_prob"] = c.attentionDropout;
  o["pad_token_id"] = c.padTokenId ? llvm::json::Value(*c.padTokenId) : llvm::json::Value(nullptr);
  if (c.pooling) {
    o["pooling"] = *c.pooling;
    o["normalize"] = c.normalize;
  }
  if (c.numLabels > 0)
    o["num_labels"] = c.numLabels;
  if (c.classifierDropout)
    o["classifier_dropout"] = *c.classifierDropout;
  return o;
}

namespace {

/// BertModel's encoder over an entry's three inputs: last_hidden_state.
/// With `training`, dropout where BertModel has it: after the embeddings'
/// LayerNorm, on the attention probabilities, on each sublayer's output.
Value buildEncoder(OpBuilder &b, GraphBuilder &g, const BertConfig &c, Block *entry,
                   bool training) {
  const double hiddenDrop = training ? c.hiddenDropout : 0.0;
  const double attentionDrop = training ? c.attentionDropout : 0.0;
  const int64_t d = c.hidden;
  Value tokens = entry->getArgument(0), mask = entry->getArgument(1),
        types = entry->getArgument(2);
  Value positions = g.sliceLeading(
      g.param("embeddings.position_embeddings.weight", {c.maxPositions, d}, "normal_0.02"), 0,
      g.dim(tokens, 1));
  Value h = g.add(g.gather(g.param("embeddings.word_embeddings.weight", {c.vocabSize, d},
                                   "normal_0.02"),
                           tokens),
                  positions);
  h = g.add(h, g.gather(g.param("embeddings.token_type_embeddings.weight", {c.typeVocabSize, d},
                                "normal_0.02"),
                        types));
  h = g.dropout(g.layerNorm(h, "embeddings.LayerNorm", c.layerNormEps), hiddenDrop);
  // attention_mask != 0 keeps a key.
  Value keep = g.keyPaddingMask(mask, 0);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    g.setLocation(NameLoc::get(b.getStringAttr("encoder.layer." + std::to_string(i))));
    auto linearWeights = [&](const std::string &name, int64_t out, int64_t in) {
      return std::pair{g.param(p + name + ".weight", {out, in}, "normal_0.02"),
                       g.param(p + name + ".bias", {out}, "zeros")};
    };
    AttentionWeights a;
    std::tie(a.wq, a.bq) = linearWeights("attention.self.query", d, d);
    std::tie(a.wk, a.bk) = linearWeights("attention.self.key", d, d);
    std::tie(a.wv, a.bv) = linearWeights("attention.self.value", d, d);
    std::tie(a.wo, a.bo) = linearWeights("attention.output.dense", d, d);
    h = g.residual(h, p + "attention.output.LayerNorm", /*preNorm=*/false, c.layerNormEps,
                   hiddenDrop, [&](Value x) {
                     return g.multiHeadAttention(x, x, a, c.heads, {keep}, attentionDrop);
                   });
    auto [w1, b1] = linearWeights("intermediate.dense", c.intermediate, d);
    auto [w2, b2] = linearWeights("output.dense", d, c.intermediate);
    h = g.residual(h, p + "output.LayerNorm", /*preNorm=*/false, c.layerNormEps, hiddenDrop,
                   [&](Value x) {
                     return g.feedForward(x, w1, b1, w2, b2, c.activation, /*transposed=*/true,
                                          0.0);
                   });
  }
  return h;
}

} // namespace

void mlir::transfuse::buildBert(ModuleOp module, const BertConfig &c,
                                const BuildOptions &options) {
  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  auto ids = RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic}, b.getI32Type());
  const int64_t dyn = ShapedType::kDynamic;
  // One entry over the three inputs (and, for the loss, the labels [B]): its
  // output named `output`, computed by `tail` from the encoder's
  // last_hidden_state and the entry's block.
  auto entry = [&](StringRef name, StringRef output, ArrayRef<int64_t> shape, bool labels,
                   llvm::function_ref<Value(GraphBuilder &, Value, Block *)> tail) {
    SmallVector<Type> inputTypes = {ids, ids, ids};
    if (labels)
      inputTypes.push_back(RankedTensorType::get({dyn}, b.getI32Type()));
    auto func = func::FuncOp::create(b, b.getUnknownLoc(), name,
                                     b.getFunctionType(inputTypes, {RankedTensorType::get(
                                                                       shape, b.getF32Type())}));
    const StringRef inputs[] = {"input_ids", "attention_mask", "token_type_ids", "labels"};
    for (unsigned i = 0; i < inputTypes.size(); ++i) {
      func.setArgAttr(i, kNameAttr, b.getStringAttr(inputs[i]));
      if (i == 1 || i == 2) // the mask and the token types have input_ids' sizes
        func.setArgAttr(i, kSizesOfAttr, b.getI64IntegerAttr(0));
    }
    func.setResultAttr(0, kNameAttr, b.getStringAttr(output));
    Block *body = func.addEntryBlock();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(body);
    GraphBuilder g(b, NameLoc::get(b.getStringAttr("embeddings")));
    Value h = buildEncoder(b, g, c, body, /*training=*/labels);
    g.setLocation(NameLoc::get(b.getStringAttr(name)));
    func::ReturnOp::create(b, b.getUnknownLoc(), tail(g, h, body));
  };
  // BertPooler (tanh(dense(h[:, 0]))), dropout when training, the classifier.
  auto classifier = [&](GraphBuilder &g, Value h, Block *body, double dropout) {
    Value first = g.pool(h, g.tokenMask(body->getArgument(1), 0), "cls");
    Value pooled = g.tanh(
        g.linear(first, g.param("pooler.dense.weight", {c.hidden, c.hidden}, "normal_0.02"),
                 g.param("pooler.dense.bias", {c.hidden}, "zeros")));
    return g.linear(g.dropout(pooled, dropout),
                    g.param("classifier.weight", {c.numLabels, c.hidden}, "normal_0.02"),
                    g.param("classifier.bias", {c.numLabels}, "zeros"));
  };
  entry("encode", "last_hidden_state", {dyn, dyn, c.hidden}, false,
        [](GraphBuilder &, Value h, Block *) { return h; });
  if (c.pooling)
    entry("embed", "sentence_embedding", {dyn, c.hidden}, false,
          [&](GraphBuilder &g, Value h, Block *body) {
            Value e = g.pool(h, g.tokenMask(body->getArgument(1), 0), *c.pooling);
            return c.normalize ? g.l2Normalize(e) : e;
          });
  if (c.numLabels > 0)
    entry("classify", "logits", {dyn, c.numLabels}, false,
          [&](GraphBuilder &g, Value h, Block *body) { return classifier(g, h, body, 0.0); });
  if (options.training) // the cross-entropy of the logits (label -100 ignored)
    entry("loss", "loss", {}, true, [&](GraphBuilder &g, Value h, Block *body) {
      return g.crossEntropy(
          classifier(g, h, body, c.classifierDropout.value_or(c.hiddenDropout)),
          body->getArgument(3), options.labelSmoothing, -100);
    });

  // BertModel's state dict also holds the pooler (used by classify); task
  // models prefix the encoder with `bert.` and add their heads; old
  // checkpoints keep the position_ids buffer.
  module->setAttr(kWeightAliasesAttr, b.getDictionaryAttr({}));
  module->setAttr(kIgnoredWeightsAttr,
                  b.getStrArrayAttr({"embeddings.position_ids", "pooler.*", "cls.*",
                                     "classifier.*"}));
  module->setAttr(kWeightPrefixesAttr, b.getStrArrayAttr({"bert."}));
}
