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
// The "marian" layout is Hugging Face's MarianMTModel on the same graph:
// model.shared (or model.{en,de}coder.embed_tokens) · √d when
// scale_embedding, sinusoidal positions in halves (sines, then cosines),
// q_proj/k_proj/v_proj/out_proj with biases, self_attn_layer_norm,
// encoder_attn(_layer_norm), fc1/fc2, final_layer_norm, post-LN without
// final norms, logits = out · lm_headᵀ + final_logits_bias; the decoder
// starts at the pad id, so target keys are masked by causality alone.
//
// With decoding on, two more entry points share the weights and a state
// (docs/decoding.md): encode(src) writes every decoder layer's
// cross-attention K and V, and decode_step(src, tgt) runs n new target
// positions (one per step of a search) against the cached self-attention
// K and V, appending theirs, and returns those positions' logits.
//
//===----------------------------------------------------------------------===//

#include "frontend/GraphBuilder.h"
#include "models/Models.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::transfuse;

namespace {

/// The weight names of the embedding tables and the output projection.
const char *srcTableOf(const ModelConfig &c) {
  if (c.layout == "marian")
    return c.shareEmbeddings ? "model.shared.weight" : "model.encoder.embed_tokens.weight";
  return "src_tok_emb.embedding.weight";
}
const char *tgtTableOf(const ModelConfig &c) {
  if (c.shareEmbeddings)
    return srcTableOf(c);
  return c.layout == "marian" ? "model.decoder.embed_tokens.weight"
                              : "tgt_tok_emb.embedding.weight";
}
const char *outputWeightOf(const ModelConfig &c) {
  return c.layout == "marian" ? "lm_head.weight" : "generator.weight";
}

class EncoderDecoderBuilder {
public:
  EncoderDecoderBuilder(GraphBuilder &g, const ModelConfig &c, bool training)
      : g(g), c(c), drop(training ? c.dropout : 0.0) {}

  /// Token embeddings · √d plus the positions from `offset` (null: 0; a
  /// decode step passes the cached length).
  Value embed(Value tokens, StringRef table, int64_t vocab, StringRef posTable,
              Value offset = Value()) {
    int64_t d = c.dModel;
    Value x = g.gather(g.param(table, {vocab, d}, "xavier_uniform"), tokens);
    if (c.scaleEmbedding)
      x = g.scale(x, std::sqrt((double)d));
    Value length = g.dim(tokens, 1);
    Value pe;
    if (c.positional == "sinusoidal") {
      pe = g.positionalEncoding(length, d, offset, /*halves=*/marian());
    } else {
      Value table = g.param(posTable, {c.maxSeqLen, d}, "xavier_uniform");
      pe = offset ? g.sliceAt(table, 0, offset, length) : g.sliceLeading(table, 0, length);
    }
    return g.dropout(g.add(x, pe), drop);
  }

  bool marian() const { return c.layout == "marian"; }

  AttentionWeights attention(const std::string &p) {
    int64_t d = c.dModel;
    if (marian()) {
      AttentionWeights a;
      auto linear = [&](const char *name, Value &w, Value &b) {
        w = g.param(p + "." + name + ".weight", {d, d}, "xavier_uniform");
        b = g.param(p + "." + name + ".bias", {d}, "zeros");
      };
      linear("q_proj", a.wq, a.bq);
      linear("k_proj", a.wk, a.bk);
      linear("v_proj", a.wv, a.bv);
      linear("out_proj", a.wo, a.bo);
      return a;
    }
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
    const char *in = marian() ? "fc1" : "linear1", *out = marian() ? "fc2" : "linear2";
    return g.feedForward(x, g.param(p + in + ".weight", {f, d}, "xavier_uniform"),
                         g.param(p + in + ".bias", {f}, "uniform_fan_in", d),
                         g.param(p + out + ".weight", {d, f}, "xavier_uniform"),
                         g.param(p + out + ".bias", {d}, "uniform_fan_in", f),
                         c.activation, /*transposed=*/true, drop);
  }

  /// Each layer's weight prefix, and the names of its parts.
  std::string layerPrefix(const char *stack, int64_t i) const {
    return (marian() ? "model." : "transformer.") + std::string(stack) + ".layers." +
           std::to_string(i) + ".";
  }
  const char *selfNorm() const { return marian() ? "self_attn_layer_norm" : "norm1"; }
  const char *crossAttention() const { return marian() ? "encoder_attn" : "multihead_attn"; }
  const char *crossNorm() const { return marian() ? "encoder_attn_layer_norm" : "norm2"; }
  const char *ffnNorm(bool decoder) const {
    return marian() ? "final_layer_norm" : decoder ? "norm3" : "norm2";
  }

  Value sublayer(Value x, const std::string &norm, llvm::function_ref<Value(Value)> f) {
    return g.residual(x, norm, c.normPosition == "pre", c.layerNormEps, drop, f);
  }

  Value encoderLayer(int64_t i, Value x, Value srcMask) {
    std::string p = layerPrefix("encoder", i);
    AttentionWeights sa = attention(p + "self_attn");
    x = sublayer(x, p + selfNorm(), [&](Value y) {
      return g.multiHeadAttention(y, y, sa, c.numHeads, {srcMask}, drop);
    });
    return sublayer(x, p + ffnNorm(false), [&](Value y) { return feedForward(p, y); });
  }

  /// What the decoder layers attend to: the encoder's output (forward), or
  /// the state (a decode step: self-attention K/V appended to the cache,
  /// cross-attention K/V as encode wrote them, `src` giving B and S).
  struct DecoderInputs {
    Value memory;
    Value src;
    ArrayRef<Value> selfMasks;
    Value srcMask;
  };

  static std::string stateName(int64_t layer, StringRef which) {
    return "kv." + std::to_string(layer) + "." + which.str();
  }

  Value decoderLayer(int64_t i, Value x, const DecoderInputs &in) {
    std::string p = layerPrefix("decoder", i);
    AttentionWeights sa = attention(p + "self_attn");
    AttentionWeights ca = attention(p + crossAttention());
    int64_t h = c.numHeads;
    bool cached = !in.memory;
    x = sublayer(x, p + selfNorm(), [&](Value y) {
      Value q = g.projectHeads(y, sa.wq, sa.bq, true, h);
      Value k = g.projectHeads(y, sa.wk, sa.bk, true, h);
      Value v = g.projectHeads(y, sa.wv, sa.bv, true, h);
      if (!cached)
        return g.attendHeads(q, k, v, sa, in.selfMasks, drop);
      k = g.cacheAppend(stateName(i, "self.k"), k, /*keys=*/true);
      v = g.cacheAppend(stateName(i, "self.v"), v, /*keys=*/false);
      // The new positions see every cached one and the earlier new ones.
      if (!causal)
        causal = g.causalMask(g.dim(q, 2), g.dim(k, 2));
      return g.attendHeads(q, k, v, sa, {causal}, drop);
    });
    x = sublayer(x, p + crossNorm(), [&](Value y) {
      Value q = g.projectHeads(y, ca.wq, ca.bq, true, h);
      Value k, v;
      if (cached) {
        Value batch = g.dim(in.src, 0), length = g.dim(in.src, 1);
        k = g.stateRead(stateName(i, "cross.k"), batch, length, q, /*keys=*/true);
        v = g.stateRead(stateName(i, "cross.v"), batch, length, q, /*keys=*/false);
      } else {
        k = g.projectHeads(in.memory, ca.wk, ca.bk, true, h);
        v = g.projectHeads(in.memory, ca.wv, ca.bv, true, h);
      }
      return g.attendHeads(q, k, v, ca, {in.srcMask}, drop);
    });
    return sublayer(x, p + ffnNorm(true), [&](Value y) { return feedForward(p, y); });
  }

  const char *srcTable() const { return srcTableOf(c); }
  const char *tgtTable() const { return tgtTableOf(c); }
  const char *outputWeight() const { return outputWeightOf(c); }

  /// The encoder's output [B, S, D].
  Value encoder(Value src, Value srcMask) {
    g.setLocation(NameLoc::get(g.builder().getStringAttr("encoder")));
    Value x = embed(src, srcTable(), c.srcVocabSize, "src_pos_emb.embedding.weight");
    for (int64_t i = 0; i < c.numEncoderLayers; ++i) {
      g.setLocation(NameLoc::get(g.builder().getStringAttr(layerPrefix("encoder", i))));
      x = encoderLayer(i, x, srcMask);
    }
    return c.finalNorm ? g.layerNorm(x, "transformer.encoder.norm", c.layerNormEps) : x;
  }

  /// The decoder over target embeddings `y`, and the generator: logits.
  Value decoder(Value y, const DecoderInputs &in) {
    for (int64_t i = 0; i < c.numDecoderLayers; ++i) {
      g.setLocation(NameLoc::get(g.builder().getStringAttr(layerPrefix("decoder", i))));
      y = decoderLayer(i, y, in);
    }
    g.setLocation(NameLoc::get(g.builder().getStringAttr("generator")));
    if (c.finalNorm)
      y = g.layerNorm(y, "transformer.decoder.norm", c.layerNormEps);
    int64_t d = c.dModel, v = c.tgtVocabSize;
    Value w = c.tieOutput ? g.param(tgtTable(), {v, d}, "xavier_uniform")
                          : g.param(outputWeight(), {v, d}, "xavier_uniform");
    Value bias = marian() ? g.reshape(g.param("final_logits_bias", {1, v}, "zeros",
                                              0, /*optional=*/true),
                                      {v})
                          : g.param("generator.bias", {v}, "uniform_fan_in", d, /*optional=*/true);
    return g.linear(y, w, bias);
  }


  Value forward(Value src, Value tgt) {
    g.setLocation(NameLoc::get(g.builder().getStringAttr("encoder")));
    Value srcMask = g.keyPaddingMask(src, *c.padId);
    Value memory = encoder(src, srcMask);
    g.setLocation(NameLoc::get(g.builder().getStringAttr("decoder")));
    Value t = g.dim(tgt, 1);
    SmallVector<Value, 2> selfMasks = {g.causalMask(t, t)};
    if (!marian()) // Marian's decoder starts at the pad id
      selfMasks.push_back(g.keyPaddingMask(tgt, *c.padId));
    Value y = embed(tgt, tgtTable(), c.tgtVocabSize, "tgt_pos_emb.embedding.weight");
    return decoder(y, {memory, src, selfMasks, srcMask});
  }

  /// encode: every decoder layer's cross-attention K and V into the state.
  void encode(Value src) {
    g.setLocation(NameLoc::get(g.builder().getStringAttr("encoder")));
    Value memory = encoder(src, g.keyPaddingMask(src, *c.padId));
    for (int64_t i = 0; i < c.numDecoderLayers; ++i) {
      g.setLocation(NameLoc::get(g.builder().getStringAttr(layerPrefix("decoder", i))));
      AttentionWeights ca = attention(layerPrefix("decoder", i) + crossAttention());
      g.stateWrite(stateName(i, "cross.k"), g.projectHeads(memory, ca.wk, ca.bk, true, c.numHeads),
                   /*keys=*/true);
      g.stateWrite(stateName(i, "cross.v"), g.projectHeads(memory, ca.wv, ca.bv, true, c.numHeads),
                   /*keys=*/false);
    }
  }

  /// decode_step: the logits of target positions L..L+n.
  Value decodeStep(Value src, Value tgt) {
    g.setLocation(NameLoc::get(g.builder().getStringAttr("decoder")));
    Value srcMask = g.keyPaddingMask(src, *c.padId);
    Value y = embed(tgt, tgtTable(), c.tgtVocabSize, "tgt_pos_emb.embedding.weight",
                    g.stateLength());
    return decoder(y, {Value(), src, {}, srcMask});
  }

private:
  GraphBuilder &g;
  const ModelConfig &c;
  double drop;
  Value causal; // a decode step's self-attention mask, made at the first layer
};

} // namespace

void mlir::transfuse::buildEncoderDecoder(ModuleOp module, const ModelConfig &c,
                                          const BuildOptions &options) {
  OpBuilder b(module.getContext());
  auto build = [&](StringRef name, ArrayRef<StringRef> inputs, bool logits,
                   llvm::function_ref<Value(EncoderDecoderBuilder &, Block *)> body) {
    auto func = createEntry(b, module, name, inputs, logits ? c.tgtVocabSize : 0);
    GraphBuilder g(b, b.getUnknownLoc());
    EncoderDecoderBuilder model(g, c, options.training);
    Value out = body(model, &func.getBody().front());
    func::ReturnOp::create(b, b.getUnknownLoc(), out ? ValueRange(out) : ValueRange());
  };
  build("forward", {"src_tokens", "tgt_tokens"}, true, [](EncoderDecoderBuilder &m, Block *e) {
    return m.forward(e->getArgument(0), e->getArgument(1));
  });
  if (options.training)
    addLossEntry(b, module, {"src_tokens", "tgt_tokens"}, c, options, [&](GraphBuilder &g, Block *e) {
      return EncoderDecoderBuilder(g, c, true).forward(e->getArgument(0), e->getArgument(1));
    });
  if (decodingEntries(c, options)) {
    build("encode", {"src_tokens"}, false, [](EncoderDecoderBuilder &m, Block *e) {
      m.encode(e->getArgument(0));
      return Value();
    });
    build("decode_step", {"src_tokens", "tgt_tokens"}, true,
          [](EncoderDecoderBuilder &m, Block *e) {
            return m.decodeStep(e->getArgument(0), e->getArgument(1));
          });
  }

  // Other names of one tensor: the target table when shared, the output
  // projection when tied.
  SmallVector<NamedAttribute> aliases;
  if (c.shareEmbeddings) {
    const char *tables[] = {"tgt_tok_emb.embedding.weight"};
    const char *marianTables[] = {"model.encoder.embed_tokens.weight",
                                  "model.decoder.embed_tokens.weight"};
    for (const char *name : c.layout == "marian" ? ArrayRef(marianTables) : ArrayRef(tables))
      aliases.push_back(b.getNamedAttr(name, b.getStringAttr(srcTableOf(c))));
  }
  if (c.tieOutput)
    aliases.push_back(b.getNamedAttr(outputWeightOf(c), b.getStringAttr(tgtTableOf(c))));
  module->setAttr(kWeightAliasesAttr, b.getDictionaryAttr(aliases));
  // Marian's sinusoidal tables, when a checkpoint holds them: computed here.
  if (c.layout == "marian")
    module->setAttr(kIgnoredWeightsAttr,
                    b.getStrArrayAttr({"model.encoder.embed_positions.weight",
                                       "model.decoder.embed_positions.weight"}));
}
