//===- Llama.cpp - Llama, Mistral and Qwen2 from Hugging Face directories -===//
//
// Semantics and weight names of Hugging Face's LlamaForCausalLM,
// MistralForCausalLM and Qwen2ForCausalLM, batch-first:
//   h = embed_tokens[tokens]
//   per layer (pre-norm, RMSNorm):
//     x = RMSNorm(h)                                  (input_layernorm)
//     q, k, v = x·Wqᵀ (+bq), x·Wkᵀ (+bk), x·Wvᵀ (+bv)  (q/k/v_proj; Qwen2 and
//                                                    attention_bias: biases)
//     q, k = rotary(q), rotary(k)                     (rotate-half, rope_theta,
//                                                    rope_scaling)
//     h = h + o_proj(attention(q, k, v))              (causal; each K/V head
//                                                    serves heads/kv_heads
//                                                    query heads)
//     x = RMSNorm(h)                                  (post_attention_layernorm)
//     h = h + down_proj(silu(gate_proj(x)) ⊙ up_proj(x))
//   logits = RMSNorm(h) · lm_headᵀ                    (norm; lm_head, or the
//                                                    embedding when tied)
// Entries as decoder_only's (Models.h): forward, prefill and decode_step
// with the KV cache (docs/decoding.md), loss in training builds.
//
//===----------------------------------------------------------------------===//

#include "frontend/GraphBuilder.h"
#include "models/HuggingFace.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace mlir::transfuse;

namespace {

/// Keys of the three families that do not change what the model computes:
/// tensor-parallel slicing of the same products (pretraining_tp) and
/// Qwen2's count of windowed layers (the window is checked against the
/// compiled length: loadLlama).
const char *const kIgnoredKeys[] = {"pretraining_tp", "max_window_layers"};

/// The rotary parameters: `rope_scaling` (null, or an object with its
/// rope_type and factors) beside `rope_theta`, as transformers 4 writes
/// them, or `rope_parameters` (the same object with rope_theta inside), as
/// transformers 5 does. Where both spellings appear they must agree.
llvm::Error ropeScaling(ConfigKeys &keys, LlamaConfig &c) {
  const llvm::json::Value *params = keys.get("rope_parameters");
  if (params && params->kind() == llvm::json::Value::Null)
    params = nullptr;
  const char *key = params ? "rope_parameters" : "rope_scaling";
  const llvm::json::Value *v = params ? params : keys.get("rope_scaling");
  if (params) {
    if (const llvm::json::Value *old = keys.get("rope_scaling");
        old && old->kind() != llvm::json::Value::Null)
      return keys.error("rope_scaling", "given beside rope_parameters (one spelling, please)");
  }
  if (!v || v->kind() == llvm::json::Value::Null)
    return llvm::Error::success();
  const llvm::json::Object *o = v->getAsObject();
  if (!o)
    return keys.error(key, "expected an object or null");
  if (params) {
    if (const llvm::json::Value *theta = o->get("rope_theta")) {
      std::optional<double> d = theta->getAsNumber();
      if (!d)
        return keys.error(key, "'rope_theta' must be a number");
      if (keys.get("rope_theta") && *d != c.ropeTheta)
        return keys.error(key, llvm::formatv("'rope_theta' {0} differs from the top-level "
                                             "rope_theta {1}", *d, c.ropeTheta));
      c.ropeTheta = *d;
    }
  }
  std::optional<llvm::StringRef> type = o->getString("rope_type");
  if (!type)
    type = o->getString("type");
  if (!type)
    return keys.error(key, "missing 'rope_type'");
  llvm::SmallVector<llvm::StringRef, 8> known = {"rope_type", "type", "factor", "low_freq_factor",
                                                 "high_freq_factor",
                                                 "original_max_position_embeddings"};
  if (params)
    known.push_back("rope_theta");
  if (*type == "default") // Hugging Face ignores any factor given with it
    return llvm::Error::success();
  if (*type != "linear" && *type != "llama3")
    return keys.error(key, "rope_type '" + *type +
                               "' is not supported (supported: default, linear, llama3)");
  c.ropeType = type->str();
  auto number = [&](llvm::StringRef name, double &out, bool required) -> llvm::Error {
    std::optional<double> d = o->getNumber(name);
    if (!d) {
      if (required || o->get(name))
        return keys.error(key, "'" + name + "' must be a number");
      return llvm::Error::success();
    }
    if (!(*d > 0) || !std::isfinite(*d))
      return keys.error(key, "'" + name + "' must be > 0");
    out = *d;
    return llvm::Error::success();
  };
  if (llvm::Error e = number("factor", c.ropeFactor, true))
    return e;
  if (c.ropeType == "llama3") {
    double original = 0;
    if (llvm::Error e = llvm::joinErrors(number("low_freq_factor", c.ropeLowFreqFactor, true),
                                         number("high_freq_factor", c.ropeHighFreqFactor, true)))
      return e;
    if (llvm::Error e = number("original_max_position_embeddings", original, true))
      return e;
    c.ropeOriginalMax = static_cast<int64_t>(original);
    if (c.ropeHighFreqFactor <= c.ropeLowFreqFactor)
      return keys.error(key, "high_freq_factor must exceed low_freq_factor");
  }
  for (const auto &kv : *o)
    if (!llvm::is_contained(known, kv.first.str()))
      return keys.error(key, "key '" + kv.first.str() + "' is not supported");
  return llvm::Error::success();
}

} // namespace

llvm::Expected<LlamaConfig> mlir::transfuse::parseLlamaConfig(const llvm::json::Object &o,
                                                              llvm::StringRef source,
                                                              std::vector<std::string> *warnings) {
  LlamaConfig c;
  ConfigKeys keys(o, source);
  keys.ignore({kCommonIgnoredKeys, kNumCommonIgnoredKeys});
  keys.ignore(kIgnoredKeys);
  c.family = o.getString("model_type").value_or("llama").str();
  if (c.family == "qwen2") // Qwen2's q/k/v projections always carry biases
    c.attentionBias = true, c.outputBias = false;
  llvm::Error err = llvm::joinErrors(keys.readInt("vocab_size", c.vocabSize, 1),
                                     keys.readInt("hidden_size", c.hidden, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("num_hidden_layers", c.layers, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("num_attention_heads", c.heads, 1));
  c.kvHeads = c.heads;
  err = llvm::joinErrors(std::move(err), keys.readInt("num_key_value_heads", c.kvHeads, 1));
  err = llvm::joinErrors(std::move(err), keys.readInt("intermediate_size", c.intermediate, 1));
  err = llvm::joinErrors(std::move(err),
                         keys.readInt("max_position_embeddings", c.maxPositions, 1));
  err = llvm::joinErrors(std::move(err), keys.readDouble("rms_norm_eps", c.rmsNormEps));
  err = llvm::joinErrors(std::move(err), keys.readDouble("rope_theta", c.ropeTheta));
  err = llvm::joinErrors(std::move(err), keys.readDouble("attention_dropout", c.attentionDropout));
  err = llvm::joinErrors(std::move(err), keys.readActivation("hidden_act", c.activation));
  err = llvm::joinErrors(std::move(err), keys.readBool("tie_word_embeddings", c.tieEmbeddings));
  if (c.family == "llama") {
    err = llvm::joinErrors(std::move(err), keys.readBool("attention_bias", c.attentionBias));
    c.outputBias = c.attentionBias;
    err = llvm::joinErrors(std::move(err), keys.readBool("mlp_bias", c.mlpBias));
  }
  err = llvm::joinErrors(std::move(err), ropeScaling(keys, c));
  for (auto [key, id] : {std::pair{"bos_token_id", &c.bosId}, {"eos_token_id", &c.eosId},
                         {"pad_token_id", &c.padId}})
    err = llvm::joinErrors(std::move(err), keys.readTokenId(key, *id));
  if (const llvm::json::Value *hd = keys.get("head_dim"); hd && hd->kind() != llvm::json::Value::Null)
    err = llvm::joinErrors(std::move(err), keys.readInt("head_dim", c.headDim, 2));
  // Mistral's window always applies; Qwen2's when use_sliding_window is.
  bool useWindow = c.family == "mistral";
  if (c.family == "qwen2")
    err = llvm::joinErrors(std::move(err), keys.readBool("use_sliding_window", useWindow));
  if (c.family != "llama") {
    const llvm::json::Value *w = keys.get("sliding_window");
    if (useWindow && w && w->kind() != llvm::json::Value::Null) {
      int64_t window = 0;
      err = llvm::joinErrors(std::move(err), keys.readInt("sliding_window", window, 1));
      c.slidingWindow = window;
    }
  }
  if (err)
    return std::move(err);
  if (c.headDim == 0) {
    if (c.hidden % c.heads != 0)
      return keys.error("num_attention_heads",
                        llvm::formatv("hidden_size {0} is not divisible by {1}", c.hidden, c.heads));
    c.headDim = c.hidden / c.heads;
  }
  if (c.headDim % 2 != 0)
    return keys.error("head_dim", llvm::formatv("{0} is odd (rotary pairs need it even)", c.headDim));
  if (c.heads % c.kvHeads != 0)
    return keys.error("num_key_value_heads",
                      llvm::formatv("{0} does not divide num_attention_heads {1}", c.kvHeads,
                                    c.heads));
  if (!(c.rmsNormEps > 0))
    return keys.error("rms_norm_eps", "must be > 0");
  if (!(c.ropeTheta > 0))
    return keys.error("rope_theta", "must be > 0");
  if (c.attentionDropout >= 1)
    return keys.error("attention_dropout", "must be < 1");
  keys.warnUnread(warnings);
  return c;
}

std::vector<float> mlir::transfuse::LlamaConfig::inverseFrequencies() const {
  // Hugging Face's _compute_default_rope_parameters and its linear and
  // llama3 variants (modeling_rope_utils.py), in double, rounded once.
  std::vector<float> f(headDim / 2);
  for (int64_t i = 0; i < headDim / 2; ++i) {
    double inv = 1.0 / std::pow(ropeTheta, (double)(2 * i) / (double)headDim);
    if (ropeType == "linear") {
      inv /= ropeFactor;
    } else if (ropeType == "llama3") {
      const double lowWavelen = ropeOriginalMax / ropeLowFreqFactor;
      const double highWavelen = ropeOriginalMax / ropeHighFreqFactor;
      const double wavelen = 2 * M_PI / inv;
      if (wavelen > lowWavelen) {
        inv /= ropeFactor;
      } else if (wavelen >= highWavelen) {
        const double smooth = (ropeOriginalMax / wavelen - ropeLowFreqFactor) /
                              (ropeHighFreqFactor - ropeLowFreqFactor);
        inv = (1 - smooth) * inv / ropeFactor + smooth * inv;
      }
    }
    f[i] = static_cast<float>(inv);
  }
  return f;
}

llvm::json::Object mlir::transfuse::toJson(const LlamaConfig &c) {
  llvm::json::Object o{{"model_type", c.family},
                       {"vocab_size", c.vocabSize},
                       {"hidden_size", c.hidden},
                       {"num_hidden_layers", c.layers},
                       {"num_attention_heads", c.heads},
                       {"num_key_value_heads", c.kvHeads},
                       {"head_dim", c.headDim},
                       {"intermediate_size", c.intermediate},
                       {"hidden_act", c.activation},
                       {"max_position_embeddings", c.maxPositions},
                       {"rms_norm_eps", c.rmsNormEps},
                       {"rope_theta", c.ropeTheta},
                       {"tie_word_embeddings", c.tieEmbeddings},
                       {"attention_bias", c.attentionBias},
                       {"mlp_bias", c.mlpBias}};
  if (c.ropeType != "default") {
    llvm::json::Object scaling{{"rope_type", c.ropeType}, {"factor", c.ropeFactor}};
    if (c.ropeType == "llama3") {
      scaling["low_freq_factor"] = c.ropeLowFreqFactor;
      scaling["high_freq_factor"] = c.ropeHighFreqFactor;
      scaling["original_max_position_embeddings"] = c.ropeOriginalMax;
    }
    o["rope_scaling"] = std::move(scaling);
  }
  if (c.slidingWindow)
    o["sliding_window"] = *c.slidingWindow;
  // The token ids as the runtime's decoding reads them (Search.cpp).
  auto id = [](std::optional<int64_t> v) { return v ? llvm::json::Value(*v) : nullptr; };
  o["bos_id"] = id(c.bosId);
  o["eos_id"] = id(c.eosId);
  o["pad_id"] = id(c.padId);
  return o;
}

namespace {

class LlamaBuilder {
public:
  LlamaBuilder(GraphBuilder &g, const LlamaConfig &c, bool training)
      : g(g), c(c), drop(training ? c.attentionDropout : 0.0) {}

  Value linear(Value x, const std::string &name, int64_t out, int64_t in, bool bias) {
    Value w = g.param(name + ".weight", {out, in}, "normal_0.02");
    Value b = bias ? g.param(name + ".bias", {out}, "zeros") : Value();
    return g.linear(x, w, b);
  }

  /// The attention block of layer `i` on x [B, n, D]: with `cached`, the
  /// n new positions against the state's cache.
  Value attention(int64_t i, Value x, Value invFreq, bool cached, Value offset) {
    const std::string p = "layers." + std::to_string(i) + ".self_attn.";
    const int64_t d = c.hidden, hd = c.headDim;
    Value q = linear(x, p + "q_proj", c.heads * hd, d, c.attentionBias);
    Value k = linear(x, p + "k_proj", c.kvHeads * hd, d, c.attentionBias);
    Value v = linear(x, p + "v_proj", c.kvHeads * hd, d, c.attentionBias);
    q = g.splitHeads(g.rotary(q, invFreq, offset, hd), c.heads);
    k = g.splitHeads(g.rotary(k, invFreq, offset, hd), c.kvHeads);
    v = g.splitHeads(v, c.kvHeads);
    if (cached) {
      k = g.cacheAppend("kv." + std::to_string(i) + ".self.k", k, /*keys=*/true);
      v = g.cacheAppend("kv." + std::to_string(i) + ".self.v", v, /*keys=*/false);
    }
    // Each K/V head serves heads/kv_heads query heads: repeated here, read
    // once by the fused kernels (the attention fusion sees through it).
    k = g.repeatHeads(k, c.heads / c.kvHeads);
    v = g.repeatHeads(v, c.heads / c.kvHeads);
    AttentionWeights w;
    w.wo = g.param(p + "o_proj.weight", {d, c.heads * hd}, "normal_0.02");
    w.bo = c.outputBias ? g.param(p + "o_proj.bias", {d}, "zeros") : Value();
    Value causal = g.causalMask(g.dim(q, 2), g.dim(k, 2));
    return g.attendHeads(q, k, v, w, {causal}, drop);
  }

  Value mlp(int64_t i, Value x) {
    const std::string p = "layers." + std::to_string(i) + ".mlp.";
    Value gate = g.activation(linear(x, p + "gate_proj", c.intermediate, c.hidden, c.mlpBias),
                              c.activation);
    Value up = linear(x, p + "up_proj", c.intermediate, c.hidden, c.mlpBias);
    return linear(g.mul(gate, up), p + "down_proj", c.hidden, c.intermediate, c.mlpBias);
  }

  /// The logits of `tokens` (see DecoderOnly.cpp for `cached` and `lastOnly`).
  Value build(Value tokens, bool cached = false, bool lastOnly = false) {
    g.setLocation(NameLoc::get(g.builder().getStringAttr("embeddings")));
    Value embed = g.param("embed_tokens.weight", {c.vocabSize, c.hidden}, "normal_0.02");
    Value h = g.gather(embed, tokens);
    std::vector<float> freq = c.inverseFrequencies();
    Value invFreq = g.constant(freq, {(int64_t)freq.size()});
    Value offset = cached ? g.stateLength() : Value();
    for (int64_t i = 0; i < c.layers; ++i) {
      const std::string p = "layers." + std::to_string(i) + ".";
      g.setLocation(NameLoc::get(g.builder().getStringAttr("layers." + std::to_string(i))));
      h = g.add(h, attention(i, g.rmsNorm(h, p + "input_layernorm", c.rmsNormEps), invFreq,
                             cached, offset));
      h = g.add(h, mlp(i, g.rmsNorm(h, p + "post_attention_layernorm", c.rmsNormEps)));
    }
    g.setLocation(NameLoc::get(g.builder().getStringAttr("lm_head")));
    if (lastOnly)
      h = g.last(h, 1);
    h = g.rmsNorm(h, "norm", c.rmsNormEps);
    if (c.tieEmbeddings)
      return g.matmul(h, embed, false, /*transposeRhs=*/true);
    return g.linear(h, g.param("lm_head.weight", {c.vocabSize, c.hidden}, "normal_0.02"), Value());
  }

private:
  GraphBuilder &g;
  const LlamaConfig &c;
  double drop;
};

} // namespace

void mlir::transfuse::buildLlama(ModuleOp module, const LlamaConfig &c,
                                 const BuildOptions &options) {
  OpBuilder b(module.getContext());
  auto build = [&](StringRef name, bool cached, bool lastOnly) {
    auto func = createEntry(b, module, name, {"tokens"}, c.vocabSize, lastOnly);
    GraphBuilder g(b, b.getUnknownLoc());
    Value out = LlamaBuilder(g, c, options.training)
                    .build(func.getBody().front().getArgument(0), cached, lastOnly);
    func::ReturnOp::create(b, b.getUnknownLoc(), out);
  };
  build("forward", false, false);
  ModelConfig lossConfig; // what the loss reads of a config: the ignored label
  lossConfig.padId = c.padId;
  if (options.training)
    addLossEntry(b, module, {"tokens"}, lossConfig, options, [&](GraphBuilder &g, Block *e) {
      return LlamaBuilder(g, c, true).build(e->getArgument(0), false, false);
    });
  if (options.decoding && !options.training) {
    build("prefill", true, true);
    build("decode_step", true, false);
  }
  SmallVector<NamedAttribute> aliases;
  if (c.tieEmbeddings)
    aliases.push_back(b.getNamedAttr("lm_head.weight", b.getStringAttr("embed_tokens.weight")));
  module->setAttr(kWeightAliasesAttr, b.getDictionaryAttr(aliases));
  // Older checkpoints saved each layer's rotary table, which is computed here.
  module->setAttr(kIgnoredWeightsAttr, b.getStrArrayAttr({"layers.*.self_attn.rotary_emb.inv_freq"}));
  module->setAttr(kWeightPrefixesAttr, b.getStrArrayAttr({"model."}));
}
