//===- DecoderOnly.cpp - a GPT-2 style causal Transformer -----------------===//
//
// Semantics and weight names of Hugging Face GPT-2 checkpoints, batch-first:
//   h = wte[tokens] + wpe[:T]                 (or + PE[:T], sinusoidal)
//   per layer (pre-LN): h += attn(ln_1(h)); h += mlp(ln_2(h))
//   logits = ln_f(h) · wteᵀ                   (tied; lm_head.weight untied)
// Conv1D weights are [in, out]: y = x·W + b. c_attn packs q|k|v columns.
// Attention is causal, plus key padding when a pad_id is configured.
//
// With decoding on, `prefill(tokens)` and `decode_step(tokens)` run n new
// positions L..L+n against the cached keys and values of a state
// (docs/decoding.md), appending theirs; prefill returns the last position's
// logits only (the next token of a prompt), decode_step every position's.
// The cache has no padding (prompts of different lengths batch by feeding
// the longer ones' extra ids step by step: runtime/host/Search.h).
//
//===----------------------------------------------------------------------===//

#include "frontend/GraphBuilder.h"
#include "models/Models.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace mlir::transfuse;

namespace {

class DecoderOnlyBuilder {
public:
  DecoderOnlyBuilder(GraphBuilder &g, const ModelConfig &c, bool training)
      : g(g), c(c), drop(training ? c.dropout : 0.0) {}

  AttentionWeights attention(const std::string &p) {
    int64_t d = c.dModel;
    auto w = g.split(g.param(p + "attn.c_attn.weight", {d, 3 * d}, "normal_0.02"), 1, {d, d, d});
    auto bias = g.split(g.param(p + "attn.c_attn.bias", {3 * d}, "zeros"), 0, {d, d, d});
    AttentionWeights a;
    a.transposed = false;
    a.wq = w[0], a.wk = w[1], a.wv = w[2];
    a.bq = bias[0], a.bk = bias[1], a.bv = bias[2];
    a.wo = g.param(p + "attn.c_proj.weight", {d, d}, "normal_0.02");
    a.bo = g.param(p + "attn.c_proj.bias", {d}, "zeros");
    return a;
  }

  Value mlp(const std::string &p, Value x) {
    int64_t d = c.dModel, f = c.dFF;
    return g.feedForward(x, g.param(p + "mlp.c_fc.weight", {d, f}, "normal_0.02"),
                         g.param(p + "mlp.c_fc.bias", {f}, "zeros"),
                         g.param(p + "mlp.c_proj.weight", {f, d}, "normal_0.02"),
                         g.param(p + "mlp.c_proj.bias", {d}, "zeros"), c.activation,
                         /*transposed=*/false, /*dropoutRate=*/0.0); // GPT-2: none inside the MLP
  }

  Value sublayer(Value x, const std::string &norm, llvm::function_ref<Value(Value)> f) {
    return g.residual(x, norm, c.normPosition == "pre", c.layerNormEps, drop, f);
  }

  /// The logits of `tokens`: the whole sequence (forward), or with `cached`
  /// positions L..L+n against the state's cache; `lastOnly`: of the last
  /// position only.
  Value build(Value tokens, bool cached = false, bool lastOnly = false) {
    int64_t d = c.dModel, v = c.tgtVocabSize;
    g.setLocation(NameLoc::get(g.builder().getStringAttr("embeddings")));
    Value wte = g.param("wte.weight", {v, d}, "normal_0.02");
    Value t = g.dim(tokens, 1);
    Value offset = cached ? g.stateLength() : Value();
    Value pe;
    if (c.positional == "learned") {
      Value wpe = g.param("wpe.weight", {c.maxSeqLen, d}, "normal_0.02");
      pe = cached ? g.sliceAt(wpe, 0, offset, t) : g.sliceLeading(wpe, 0, t);
    } else {
      pe = g.positionalEncoding(t, d, offset);
    }
    Value h = g.dropout(g.add(g.gather(wte, tokens), pe), drop);
    SmallVector<Value, 2> masks;
    if (!cached) {
      masks.push_back(g.causalMask(t, t));
      if (c.padId)
        masks.push_back(g.keyPaddingMask(tokens, *c.padId));
    }
    for (int64_t i = 0; i < c.numDecoderLayers; ++i) {
      std::string p = "h." + std::to_string(i) + ".";
      g.setLocation(NameLoc::get(g.builder().getStringAttr("h." + std::to_string(i))));
      AttentionWeights a = attention(p);
      h = sublayer(h, p + "ln_1", [&](Value y) {
        if (!cached)
          return g.multiHeadAttention(y, y, a, c.numHeads, masks, drop);
        Value q = g.projectHeads(y, a.wq, a.bq, false, c.numHeads);
        Value k = g.cacheAppend("kv." + std::to_string(i) + ".self.k",
                                g.projectHeads(y, a.wk, a.bk, false, c.numHeads), /*keys=*/true);
        Value vv = g.cacheAppend("kv." + std::to_string(i) + ".self.v",
                                 g.projectHeads(y, a.wv, a.bv, false, c.numHeads), /*keys=*/false);
        if (masks.empty()) // the new positions see every cached one and the earlier new ones
          masks.push_back(g.causalMask(g.dim(q, 2), g.dim(k, 2)));
        return g.attendHeads(q, k, vv, a, masks, drop);
      });
      h = sublayer(h, p + "ln_2", [&](Value y) { return mlp(p, y); });
    }
    g.setLocation(NameLoc::get(g.builder().getStringAttr("lm_head")));
    if (lastOnly)
      h = g.last(h, 1);
    if (c.finalNorm)
      h = g.layerNorm(h, "ln_f", c.layerNormEps);
    if (c.tieOutput)
      return g.matmul(h, wte, false, /*transposeRhs=*/true);
    return g.linear(h, g.param("lm_head.weight", {v, d}, "normal_0.02"), Value());
  }

private:
  GraphBuilder &g;
  const ModelConfig &c;
  double drop;
};

} // namespace

void mlir::transfuse::buildDecoderOnly(ModuleOp module, const ModelConfig &c,
                                       const BuildOptions &options) {
  OpBuilder b(module.getContext());
  auto build = [&](StringRef name, bool cached, bool lastOnly) {
    auto func = createEntry(b, module, name, {"tokens"}, c.tgtVocabSize, lastOnly);
    GraphBuilder g(b, b.getUnknownLoc());
    Value out = DecoderOnlyBuilder(g, c, options.training)
                    .build(func.getBody().front().getArgument(0), cached, lastOnly);
    func::ReturnOp::create(b, b.getUnknownLoc(), out);
  };
  build("forward", false, false);
  if (options.training)
    addLossEntry(b, module, {"tokens"}, c, options, [&](GraphBuilder &g, Block *e) {
      return DecoderOnlyBuilder(g, c, true).build(e->getArgument(0), false, false);
    });
  if (decodingEntries(c, options)) {
    build("prefill", true, true);
    build("decode_step", true, false);
  }

  SmallVector<NamedAttribute> aliases;
  if (c.tieOutput)
    aliases.push_back(b.getNamedAttr("lm_head.weight", b.getStringAttr("wte.weight")));
  module->setAttr(kWeightAliasesAttr, b.getDictionaryAttr(aliases));
  module->setAttr(kIgnoredWeightsAttr,
                  b.getStrArrayAttr({"h.*.attn.bias", "h.*.attn.masked_bias"}));
  module->setAttr(kWeightPrefixesAttr, b.getStrArrayAttr({"transformer."}));
}
