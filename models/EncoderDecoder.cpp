//===- EncoderDecoder.cpp - the paper's encoder-decoder Transformer -------===//
//
// Semantics and weight names of PyTorch's translation tutorial model
// (Seq2SeqTransformer: TokenEmbedding · √d_model, interleaved sinusoidal
// positions, torch.nn.Transformer, Linear generator), batch-first:
//   src = emb_src[src] · √d + PE[:S];  tgt = emb_tgt[tgt] · √d + PE[:T]
//   memory = Encoder(src, keys masked where src == pad)
//   out = Decoder(tgt, memory; causal + tgt padding; cross: src padding)
//   logits = out · generator.weightᵀ + generator.bias
//
//===----------------------------------------------------------------------===//

#include "frontend/GraphBuilder.h"
#include "models/Models.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::transfuse;

namespace {

class EncoderDecoderBuilder {
public:
  EncoderDecoderBuilder(GraphBuilder &g, const ModelConfig &c, bool training)
      : g(g), c(c), drop(training ? c.dropout : 0.0) {}

  Value embed(Value tokens, StringRef table, int64_t vocab, StringRef posTable) {
    int64_t d = c.dModel;
    Value x = g.scale(g.gather(g.param(table, {vocab, d}, "xavier_uniform"), tokens),
                      std::sqrt((double)d));
    Value length = g.dim(tokens, 1);
    Value pe = c.positional == "sinusoidal"
                   ? g.positionalEncoding(length, d)
                   : g.sliceLeading(g.param(posTable, {c.maxSeqLen, d}, "xavier_uniform"),
                                    0, length);
    return g.dropout(g.add(x, pe), drop);
  }

  AttentionWeights attention(const std::string &p) {
    int64_t d = c.dModel;
    auto w = g.split(g.param(p + ".in_proj_weight", {3 * d, d}, "xavier_uniform"), 0, {d, d, d});
    auto bias = g.split(g.param(p + ".in_proj_bias", {3 * d}, "zeros"), 0, {d, d, d});
    AttentionWeights a;
    a.wq = w[0], a.wk = w[1], a.wv = w[2];
    a.bq = bias[0], a.bk = bias[1], a.bv = bias[2];
    a.wo = g.param(p + ".out_proj.weight", {d, d}, "xavier_uniform");
    a.bo = g.param(p + ".out_proj.bias", {d}, "zeros");
    return a;
  }

  Value feedForward(const std::string &p, Value x) {
    int64_t d = c.dModel, f = c.dFF;
    return g.feedForward(x, g.param(p + "linear1.weight", {f, d}, "xavier_uniform"),
                         g.param(p + "linear1.bias", {f}, "uniform_fan_in", d),
                         g.param(p + "linear2.weight", {d, f}, "xavier_uniform"),
                         g.param(p + "linear2.bias", {d}, "uniform_fan_in", f),
                         c.activation, /*transposed=*/true, drop);
  }

  Value sublayer(Value x, const std::string &norm, llvm::function_ref<Value(Value)> f) {
    return g.residual(x, norm, c.normPosition == "pre", c.layerNormEps, drop, f);
  }

  Value encoderLayer(int64_t i, Value x, Value srcMask) {
    std::string p = "transformer.encoder.layers." + std::to_string(i) + ".";
    AttentionWeights sa = attention(p + "self_attn");
    x = sublayer(x, p + "norm1", [&](Value y) {
      return g.multiHeadAttention(y, y, sa, c.numHeads, {srcMask}, drop);
    });
    return sublayer(x, p + "norm2", [&](Value y) { return feedForward(p, y); });
  }

  Value decoderLayer(int64_t i, Value x, Value memory, ArrayRef<Value> selfMasks,
                     Value srcMask) {
    std::string p = "transformer.decoder.layers." + std::to_string(i) + ".";
    AttentionWeights sa = attention(p + "self_attn");
    AttentionWeights ca = attention(p + "multihead_attn");
    x = sublayer(x, p + "norm1", [&](Value y) {
      return g.multiHeadAttention(y, y, sa, c.numHeads, selfMasks, drop);
    });
    x = sublayer(x, p + "norm2", [&](Value y) {
      return g.multiHeadAttention(y, memory, ca, c.numHeads, {srcMask}, drop);
    });
    return sublayer(x, p + "norm3", [&](Value y) { return feedForward(p, y); });
  }

  Value build(Value src, Value tgt) {
    const char *srcTable = "src_tok_emb.embedding.weight";
    std::string tgtTable = c.shareEmbeddings ? srcTable : "tgt_tok_emb.embedding.weight";

    g.setLocation(NameLoc::get(g.builder().getStringAttr("encoder")));
    Value srcMask = g.keyPaddingMask(src, *c.padId);
    Value x = embed(src, srcTable, c.srcVocabSize, "src_pos_emb.embedding.weight");
    for (int64_t i = 0; i < c.numEncoderLayers; ++i) {
      g.setLocation(NameLoc::get(g.builder().getStringAttr(
          "transformer.encoder.layers." + std::to_string(i))));
      x = encoderLayer(i, x, srcMask);
    }
    Value memory = c.finalNorm ? g.layerNorm(x, "transformer.encoder.norm", c.layerNormEps) : x;

    g.setLocation(NameLoc::get(g.builder().getStringAttr("decoder")));
    Value t = g.dim(tgt, 1);
    Value selfMasks[] = {g.causalMask(t, t), g.keyPaddingMask(tgt, *c.padId)};
    Value y = embed(tgt, tgtTable, c.tgtVocabSize, "tgt_pos_emb.embedding.weight");
    for (int64_t i = 0; i < c.numDecoderLayers; ++i) {
      g.setLocation(NameLoc::get(g.builder().getStringAttr(
          "transformer.decoder.layers." + std::to_string(i))));
      y = decoderLayer(i, y, memory, selfMasks, srcMask);
    }
    g.setLocation(NameLoc::get(g.builder().getStringAttr("generator")));
    if (c.finalNorm)
      y = g.layerNorm(y, "transformer.decoder.norm", c.layerNormEps);
    int64_t d = c.dModel, v = c.tgtVocabSize;
    Value w = c.tieOutput ? g.param(tgtTable, {v, d}, "xavier_uniform")
                          : g.param("generator.weight", {v, d}, "xavier_uniform");
    Value bias = g.param("generator.bias", {v}, "uniform_fan_in", d, /*optional=*/true);
    return g.linear(y, w, bias);
  }

private:
  GraphBuilder &g;
  const ModelConfig &c;
  double drop;
};

} // namespace

void mlir::transfuse::buildEncoderDecoder(ModuleOp module, const ModelConfig &c,
                                          const BuildOptions &options) {
  OpBuilder b(module.getContext());
  auto func = createForward(b, module, {"src_tokens", "tgt_tokens"}, c.tgtVocabSize);
  Block *entry = &func.getBody().front();

  GraphBuilder g(b, b.getUnknownLoc());
  EncoderDecoderBuilder model(g, c, options.training);
  Value out = model.build(entry->getArgument(0), entry->getArgument(1));
  func::ReturnOp::create(b, b.getUnknownLoc(), out);

  SmallVector<NamedAttribute> aliases;
  if (c.shareEmbeddings)
    aliases.push_back(b.getNamedAttr("tgt_tok_emb.embedding.weight",
                                     b.getStringAttr("src_tok_emb.embedding.weight")));
  if (c.tieOutput)
    aliases.push_back(b.getNamedAttr(
        "generator.weight", b.getStringAttr(c.shareEmbeddings ? "src_tok_emb.embedding.weight"
                                                              : "tgt_tok_emb.embedding.weight")));
  module->setAttr(kWeightAliasesAttr, b.getDictionaryAttr(aliases));
}
