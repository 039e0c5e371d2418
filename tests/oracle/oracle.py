#!/usr/bin/python3
"""Independent NumPy oracle (float64) for Transfuse's built-in architectures.

forward(config, weights, inputs) -> logits [B, T, V] float64.
  config : the fully resolved model config (manifest["config"]).
  weights: name -> np.ndarray (any float dtype; computed in float64).
  inputs : encoder_decoder: "src_tokens" [B,S], "tgt_tokens" [B,T]; decoder_only: "tokens" [B,T].

Architectures (batch-first everywhere):
  encoder_decoder: PyTorch translation tutorial's Seq2SeqTransformer (nn.Transformer +
                   TokenEmbedding * sqrt(d) + positional encoding + generator Linear).
  decoder_only   : Hugging Face GPT-2 (Conv1D weights [in, out]); names may carry a
                   leading "transformer.".
  bert           : Hugging Face BertModel (config["model_type"] == "bert"):
                   bert(config, weights, input_ids, attention_mask, token_type_ids)
                   -> last_hidden_state [B, S, hidden]; names may carry "bert.".
  llama          : Hugging Face LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM
                   (config["model_type"] llama, mistral, qwen2; config.json's keys):
                   llama(config, weights, tokens) -> logits [B, T, V]; names may carry
                   "model.". RMSNorm, rotary embeddings (rotate-half; the angle rounded
                   to fp32 as Hugging Face forms it), grouped-query attention, SwiGLU.
Attention: scores = q k^T / sqrt(dh); masked scores are -inf; a query row whose keys
are all masked yields 0 (never NaN).

CLI: oracle.py --manifest M.json --weights W.safetensors --inputs IN.safetensors --out OUT.safetensors
     writes one F64 tensor "logits".
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

_erf = np.vectorize(math.erf, otypes=[np.float64])


class Weights:
    """name -> float64 array; a missing name is a clear KeyError."""

    def __init__(self, tensors, strip_prefix=None):
        self.t = {}
        for k, v in tensors.items():
            if strip_prefix and k.startswith(strip_prefix):
                k = k[len(strip_prefix):]
            self.t[k] = v

    def has(self, name):
        return name in self.t

    def __call__(self, name, shape=None):
        if name not in self.t:
            raise KeyError(f"weights: missing tensor {name!r}")
        w = np.asarray(self.t[name], dtype=np.float64)
        if shape is not None and tuple(w.shape) != tuple(shape):
            raise ValueError(f"weights: tensor {name!r} has shape {list(w.shape)}, expected {list(shape)}")
        return w


def activation(x, kind):
    if kind == "relu":
        return np.maximum(x, 0.0)
    if kind == "gelu":  # exact: 0.5 x (1 + erf(x / sqrt 2))
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    if kind == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if kind in ("silu", "swish"):
        return x / (1.0 + np.exp(-x))
    raise ValueError(f"config: unknown activation {kind!r}")


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)  # biased
    return (x - mean) / np.sqrt(var + eps) * w + b


def sinusoidal(n, d):
    """PE[pos, 0::2] = sin(pos * den), PE[pos, 1::2] = cos(pos * den), den = 10000^(-2i/d)."""
    den = np.exp(-np.arange(0, d, 2, dtype=np.float64) * math.log(10000.0) / d)
    pos = np.arange(n, dtype=np.float64)[:, None]
    pe = np.zeros((n, d))
    pe[:, 0::2] = np.sin(pos * den)
    pe[:, 1::2] = np.cos(pos * den[: d // 2])
    return pe


def embed(table, tokens, what):
    if tokens.size and (tokens.min() < 0 or tokens.max() >= table.shape[0]):
        raise ValueError(f"inputs: {what} has a token id outside [0, {table.shape[0]})")
    return table[tokens]


def attention(q, k, v, num_heads, allowed):
    """q [B,Sq,d], k/v [B,Sk,d], allowed bool [B,Sq,Sk] (or broadcastable) -> [B,Sq,d]."""
    B, Sq, d = q.shape
    Sk, dh = k.shape[1], d // num_heads
    split = lambda x, S: x.reshape(B, S, num_heads, dh).transpose(0, 2, 1, 3)  # [B,H,S,dh]
    q, k, v = split(q, Sq), split(k, Sk), split(v, Sk)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)  # [B,H,Sq,Sk]
    s = np.where(allowed[:, None], s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)  # exp(-inf) = 0
    z = e.sum(-1, keepdims=True)
    p = np.divide(e, z, out=np.zeros_like(e), where=z > 0)  # all-masked row -> 0
    return (p @ v).transpose(0, 2, 1, 3).reshape(B, Sq, d)


def masks(query_tokens, key_tokens, pad_id, causal):
    """allowed[b, i, j]: key j not padding (when pad_id set) and, if causal, j <= i + Sk - Sq."""
    B, Sq = query_tokens.shape
    Sk = key_tokens.shape[1]
    allowed = np.ones((B, Sq, Sk), dtype=bool)
    if pad_id is not None:
        allowed &= (key_tokens != pad_id)[:, None, :]
    if causal:
        allowed &= np.tril(np.ones((Sq, Sk), dtype=bool), k=Sk - Sq)[None]
    return allowed


# ---------------------------------------------------------------- encoder_decoder

def linear(x, W, p, bias=True):
    return x @ W(p + ".weight").T + (W(p + ".bias") if bias else 0.0)


def mha(W, p, x, mem, H, allowed):
    """nn.MultiheadAttention: in_proj rows are q|k|v; query from x, key/value from mem."""
    d = x.shape[-1]
    w, b = W(p + ".in_proj_weight", (3 * d, d)), W(p + ".in_proj_bias", (3 * d,))
    q = x @ w[:d].T + b[:d]
    k = mem @ w[d:2 * d].T + b[d:2 * d]
    v = mem @ w[2 * d:].T + b[2 * d:]
    return linear(attention(q, k, v, H, allowed), W, p + ".out_proj")


def sublayer(x, fn, norm, pre):
    """post-LN: norm(x + fn(x)); pre-LN: x + fn(norm(x))."""
    return x + fn(norm(x)) if pre else norm(x + fn(x))


def encoder_decoder(cfg, W, src, tgt):
    d, H, eps, act, pre = (cfg["d_model"], cfg["num_heads"], cfg["layer_norm_eps"],
                           cfg["activation"], cfg["norm_position"] == "pre")
    pad = cfg["pad_id"]
    ln = lambda p: (lambda x: layer_norm(x, W(p + ".weight"), W(p + ".bias"), eps))
    ff = lambda p: (lambda x: linear(activation(linear(x, W, p + ".linear1"), act), W, p + ".linear2"))

    src_table = W("src_tok_emb.embedding.weight", (cfg["src_vocab_size"], d))
    tgt_table = src_table if cfg["share_embeddings"] else W("tgt_tok_emb.embedding.weight",
                                                            (cfg["tgt_vocab_size"], d))

    def emb(table, tokens, side):
        n = tokens.shape[1]
        if n > cfg["max_seq_len"]:
            raise ValueError(f"inputs: {side}_tokens length {n} exceeds max_seq_len {cfg['max_seq_len']}")
        pe = (W(f"{side}_pos_emb.embedding.weight", (cfg["max_seq_len"], d))[:n]
              if cfg["positional"] == "learned" else sinusoidal(n, d))
        return embed(table, tokens, f"{side}_tokens") * math.sqrt(d) + pe

    x = emb(src_table, src, "src")
    enc_mask = masks(src, src, pad, causal=False)
    for i in range(cfg["num_encoder_layers"]):
        p = f"transformer.encoder.layers.{i}"
        x = sublayer(x, lambda a: mha(W, p + ".self_attn", a, a, H, enc_mask), ln(p + ".norm1"), pre)
        x = sublayer(x, ff(p), ln(p + ".norm2"), pre)
    mem = ln("transformer.encoder.norm")(x) if cfg["final_norm"] else x

    y = emb(tgt_table, tgt, "tgt")
    self_mask = masks(tgt, tgt, pad, causal=True)
    cross_mask = masks(tgt, src, pad, causal=False)
    for i in range(cfg["num_decoder_layers"]):
        p = f"transformer.decoder.layers.{i}"
        y = sublayer(y, lambda a: mha(W, p + ".self_attn", a, a, H, self_mask), ln(p + ".norm1"), pre)
        y = sublayer(y, lambda a: mha(W, p + ".multihead_attn", a, mem, H, cross_mask), ln(p + ".norm2"), pre)
        y = sublayer(y, ff(p), ln(p + ".norm3"), pre)
    if cfg["final_norm"]:
        y = ln("transformer.decoder.norm")(y)

    gen_w = tgt_table if cfg["tie_output"] else W("generator.weight", (cfg["tgt_vocab_size"], d))
    gen_b = W("generator.bias") if W.has("generator.bias") else 0.0
    return y @ gen_w.T + gen_b


def marian_positions(n, d):
    """MarianSinusoidalPositionalEmbedding: pos / 10000^(2 (j // 2) / d), the sines of the
    even j in the first d/2 columns, the cosines of the odd j after them."""
    j = np.arange(d)
    angle = np.arange(n, dtype=np.float64)[:, None] / np.power(10000.0, 2 * (j // 2) / d)[None]
    out = np.zeros((n, d))
    out[:, :d // 2] = np.sin(angle[:, 0::2])
    out[:, d // 2:] = np.cos(angle[:, 1::2])
    return out


def marian(cfg, weights, src, tgt):
    """MarianMTModel's logits [B, T, V] from a Hugging Face config and its weight names, in
    fp64: source keys equal to pad_token_id masked, target keys by causality alone (the
    decoder starts at the pad id), post-LN layers without final norms."""
    W = {k: np.asarray(v, np.float64) for k, v in weights.items()}
    d, H, act = cfg["d_model"], cfg["encoder_attention_heads"], cfg["activation_function"]
    pad = cfg["pad_token_id"]
    scale = math.sqrt(d) if cfg.get("scale_embedding") else 1.0
    shared = W.get("model.shared.weight")
    enc_table = W.get("model.encoder.embed_tokens.weight", shared)
    dec_table = W.get("model.decoder.embed_tokens.weight", shared)
    lin = lambda x, p: x @ W[p + ".weight"].T + W[p + ".bias"]
    ln = lambda p: (lambda x: layer_norm(x, W[p + ".weight"], W[p + ".bias"], 1e-5))
    ff = lambda p: (lambda x: lin(activation(lin(x, p + ".fc1"), act), p + ".fc2"))

    def attn(p, x, mem, allowed):
        q, k, v = lin(x, p + ".q_proj"), lin(mem, p + ".k_proj"), lin(mem, p + ".v_proj")
        return lin(attention(q, k, v, H, allowed), p + ".out_proj")

    x = embed(enc_table, src, "src_tokens") * scale + marian_positions(src.shape[1], d)
    enc_mask = masks(src, src, pad, causal=False)
    for i in range(cfg["encoder_layers"]):
        p = f"model.encoder.layers.{i}"
        x = ln(p + ".self_attn_layer_norm")(x + attn(p + ".self_attn", x, x, enc_mask))
        x = ln(p + ".final_layer_norm")(x + ff(p)(x))
    y = embed(dec_table, tgt, "tgt_tokens") * scale + marian_positions(tgt.shape[1], d)
    self_mask = masks(tgt, tgt, None, causal=True)
    cross_mask = masks(tgt, src, pad, causal=False)
    for i in range(cfg["decoder_layers"]):
        p = f"model.decoder.layers.{i}"
        y = ln(p + ".self_attn_layer_norm")(y + attn(p + ".self_attn", y, y, self_mask))
        y = ln(p + ".encoder_attn_layer_norm")(y + attn(p + ".encoder_attn", y, x, cross_mask))
        y = ln(p + ".final_layer_norm")(y + ff(p)(y))
    head = dec_table if cfg.get("tie_word_embeddings", True) else W["lm_head.weight"]
    return y @ head.T + W.get("final_logits_bias", np.zeros((1, head.shape[0])))[0]


# ---------------------------------------------------------------- decoder_only (GPT-2)

def conv1d(x, W, p):
    """HF Conv1D: weight [in, out], y = x @ W + b."""
    return x @ W(p + ".weight") + W(p + ".bias")


def decoder_only(cfg, W, tokens):
    d, H, eps, act, pre = (cfg["d_model"], cfg["num_heads"], cfg["layer_norm_eps"],
                           cfg["activation"], cfg["norm_position"] == "pre")
    T = tokens.shape[1]
    if T > cfg["max_seq_len"]:
        raise ValueError(f"inputs: tokens length {T} exceeds max_seq_len {cfg['max_seq_len']}")
    ln = lambda p: (lambda x: layer_norm(x, W(p + ".weight"), W(p + ".bias"), eps))
    wte = W("wte.weight", (cfg["vocab_size"], d))
    pe = W("wpe.weight", (cfg["max_seq_len"], d))[:T] if cfg["positional"] == "learned" else sinusoidal(T, d)
    h = embed(wte, tokens, "tokens") + pe
    allowed = masks(tokens, tokens, cfg["pad_id"], causal=True)

    def attn(p):
        def f(a):
            qkv = conv1d(a, W, p + ".attn.c_attn")  # columns q | k | v
            q, k, v = qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:]
            return conv1d(attention(q, k, v, H, allowed), W, p + ".attn.c_proj")
        return f

    mlp = lambda p: (lambda m: conv1d(activation(conv1d(m, W, p + ".mlp.c_fc"), act), W, p + ".mlp.c_proj"))
    for i in range(cfg["num_layers"]):
        p = f"h.{i}"
        h = sublayer(h, attn(p), ln(p + ".ln_1"), pre)
        h = sublayer(h, mlp(p), ln(p + ".ln_2"), pre)
    if cfg["final_norm"]:
        h = ln("ln_f")(h)
    head = wte if cfg["tie_output"] else W("lm_head.weight", (cfg["vocab_size"], d))
    return h @ head.T


# ---------------------------------------------------------------- bert

def bert(cfg, weights, ids, mask, types):
    """post-LN encoder: LN(word + position + token type), then per layer
    LN(h + attention(h)), LN(h + FFN(h)); keys where mask == 0 are masked."""
    W = Weights(weights, strip_prefix="bert.")
    d, H, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    act = {"gelu": "gelu", "relu": "relu", "gelu_tanh": "gelu_tanh"}[cfg["hidden_act"]]
    S = ids.shape[1]
    e = "embeddings."
    h = (embed(W(e + "word_embeddings.weight"), ids, "input_ids")
         + W(e + "position_embeddings.weight")[:S]
         + embed(W(e + "token_type_embeddings.weight"), types, "token_type_ids"))
    h = layer_norm(h, W(e + "LayerNorm.weight"), W(e + "LayerNorm.bias"), eps)
    allowed = np.broadcast_to((mask != 0)[:, None, :], (ids.shape[0], S, S))
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        norm = lambda x, n: layer_norm(x, W(p + n + ".weight"), W(p + n + ".bias"), eps)
        q, k, v = (linear(h, W, p + "attention.self." + n) for n in ("query", "key", "value"))
        a = linear(attention(q, k, v, H, allowed), W, p + "attention.output.dense")
        h = norm(h + a, "attention.output.LayerNorm")
        f = linear(activation(linear(h, W, p + "intermediate.dense"), act), W, p + "output.dense")
        h = norm(h + f, "output.LayerNorm")
    return h


def bicubic(n_in, n_out):
    """PyTorch's bicubic resampling (A = -0.75, align_corners False, edges
    clamped) of n_in samples to n_out, as a matrix [n_out, n_in]."""
    A = -0.75
    near = lambda x: ((A + 2) * x - (A + 3)) * x * x + 1
    far = lambda x: ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
    m = np.zeros((n_out, n_in))
    for o in range(n_out):
        src = n_in / n_out * (o + 0.5) - 0.5
        x0 = math.floor(src)
        t = src - x0
        for k, w in enumerate((far(t + 1), near(t), near(1 - t), far(2 - t))):
            m[o, min(max(x0 - 1 + k, 0), n_in - 1)] += w
    return m


def vit(cfg, weights, pixels):
    """ViTModel: patches (a convolution of kernel and stride patch_size, by its
    definition), [CLS; patches] + positions, pre-LN layers, a final LN;
    pixels [B, C, H, W] -> last_hidden_state [B, 1 + N, d]; pixels of
    another size than image_size take positions interpolated bicubically
    (Hugging Face's interpolate_pos_encoding)."""
    W = Weights(weights, strip_prefix="vit.")
    d, H, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    act = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_tanh",
           "gelu_pytorch_tanh": "gelu_tanh"}[cfg.get("hidden_act", "gelu")]
    p = cfg["patch_size"]
    B, C, Hi, Wi = pixels.shape
    kernel = W("embeddings.patch_embeddings.projection.weight")  # [d, C, p, p]
    rows, cols = Hi // p, Wi // p
    patches = np.zeros((B, rows * cols, d))
    for i in range(rows):
        for j in range(cols):
            window = pixels[:, :, i * p:(i + 1) * p, j * p:(j + 1) * p]  # [B, C, p, p]
            patches[:, i * cols + j] = np.einsum("bcyx,dcyx->bd", window, kernel)
    patches += W("embeddings.patch_embeddings.projection.bias")
    cls = np.broadcast_to(W("embeddings.cls_token").reshape(1, 1, d), (B, 1, d))
    positions = W("embeddings.position_embeddings")[0]
    if positions.shape[0] != rows * cols + 1:  # interpolate_pos_encoding
        g = int(round((positions.shape[0] - 1) ** 0.5))
        grid = positions[1:].reshape(g, g, d)
        grid = np.einsum("ip,jq,pqd->ijd", bicubic(g, rows), bicubic(g, cols), grid)
        positions = np.concatenate([positions[:1], grid.reshape(rows * cols, d)])
    h = np.concatenate([cls, patches], axis=1) + positions
    S = h.shape[1]
    allowed = np.ones((B, S, S), dtype=bool)
    bias = cfg.get("qkv_bias", True)
    for i in range(cfg["num_hidden_layers"]):
        q_ = f"encoder.layer.{i}."
        norm = lambda x, n: layer_norm(x, W(q_ + n + ".weight"), W(q_ + n + ".bias"), eps)
        x = norm(h, "layernorm_before")
        q, k, v = (linear(x, W, q_ + "attention.attention." + n, bias) for n in ("query", "key", "value"))
        h = h + linear(attention(q, k, v, H, allowed), W, q_ + "attention.output.dense")
        x = norm(h, "layernorm_after")
        h = h + linear(activation(linear(x, W, q_ + "intermediate.dense"), act), W, q_ + "output.dense")
    return layer_norm(h, W("layernorm.weight"), W("layernorm.bias"), eps)


def rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rope_inv_freq(cfg):
    """Hugging Face's inverse frequencies [head_dim / 2] (default, linear, llama3), fp32,
    from rope_scaling and rope_theta (transformers 4) or rope_parameters (5)."""
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    sc = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    theta = sc.get("rope_theta", cfg.get("rope_theta", 10000.0))
    inv = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    kind = sc.get("rope_type", sc.get("type", "default"))
    if kind == "linear":
        inv = inv / sc["factor"]
    elif kind == "llama3":
        f, lo, hi, old = (sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"],
                          sc["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        smooth = (old / wavelen - lo) / (hi - lo)
        mid = (1 - smooth) * inv / f + smooth * inv
        inv = np.where(wavelen > old / lo, inv / f, np.where(wavelen < old / hi, inv, mid))
    elif kind != "default":
        raise ValueError(f"config: rope_scaling type {kind!r}")
    return inv.astype(np.float32)


def rotary(x, inv, positions, hd):
    """Rotate-half of each head of x [B, S, H*hd] at positions [S]."""
    B, S, N = x.shape
    xh = x.reshape(B, S, N // hd, hd)
    angle = (positions.astype(np.float32)[:, None] * inv[None, :]).astype(np.float64)
    c, s = np.cos(angle)[None, :, None, :], np.sin(angle)[None, :, None, :]
    half = len(inv)
    a, b = xh[..., :half], xh[..., half:2 * half]
    out = np.concatenate([a * c - b * s, b * c + a * s, xh[..., 2 * half:]], -1)
    return out.reshape(B, S, N)


def llama(cfg, weights, tokens):
    """Llama, Mistral and Qwen2 (ForCausalLM) logits of tokens [B, T]."""
    W = Weights(weights, strip_prefix="model.")
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or d // H
    eps = cfg.get("rms_norm_eps", 1e-6)
    qwen = cfg["model_type"] == "qwen2"
    qkv_bias = qwen or cfg.get("attention_bias", False)
    o_bias = cfg.get("attention_bias", False) and not qwen
    mlp_bias = cfg.get("mlp_bias", False)
    B, T = tokens.shape
    inv = rope_inv_freq(cfg)
    h = embed(W("embed_tokens.weight"), tokens, "tokens")
    allowed = np.tril(np.ones((T, T), dtype=bool))[None]
    lin = lambda x, p, bias: x @ W(p + ".weight").T + (W(p + ".bias") if bias else 0.0)
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}."
        x = rms_norm(h, W(p + "input_layernorm.weight"), eps)
        a = p + "self_attn."
        q = rotary(lin(x, a + "q_proj", qkv_bias), inv, np.arange(T), hd)
        k = rotary(lin(x, a + "k_proj", qkv_bias), inv, np.arange(T), hd)
        v = lin(x, a + "v_proj", qkv_bias)
        # each K/V head serves H / Hkv query heads
        rep = lambda t: np.repeat(t.reshape(B, T, Hkv, hd), H // Hkv, axis=2).reshape(B, T, H * hd)
        o = attention(q, rep(k), rep(v), H, allowed)
        h = h + lin(o, a + "o_proj", o_bias)
        x = rms_norm(h, W(p + "post_attention_layernorm.weight"), eps)
        m = p + "mlp."
        gate = activation(lin(x, m + "gate_proj", mlp_bias), cfg.get("hidden_act", "silu"))
        h = h + lin(gate * lin(x, m + "up_proj", mlp_bias), m + "down_proj", mlp_bias)
    h = rms_norm(h, W("norm.weight"), eps)
    head = W("embed_tokens.weight") if cfg.get("tie_word_embeddings") else W("lm_head.weight")
    return h @ head.T


def vit_logits(cfg, weights, pixels):
    """ViTForImageClassification: the classifier on the CLS token's state."""
    h = vit(cfg, weights, pixels)
    W = Weights(weights)
    return h[:, 0] @ W("classifier.weight").T + W("classifier.bias")


def forward(config, weights, inputs):
    arch = config["architecture"]
    def tok(n):
        if n not in inputs:
            raise KeyError(f"inputs: missing tensor {n!r}")
        t = np.asarray(inputs[n])
        if t.ndim != 2 or t.dtype.kind not in "iu":
            raise ValueError(f"inputs: {n!r} must be an integer [B, T] tensor, got {t.dtype} {list(t.shape)}")
        return t.astype(np.int64)

    if arch == "encoder_decoder":
        return encoder_decoder(config, Weights(weights), tok("src_tokens"), tok("tgt_tokens"))
    if arch == "decoder_only":
        return decoder_only(config, Weights(weights, strip_prefix="transformer."), tok("tokens"))
    raise ValueError(f"config: unknown architecture {arch!r}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--manifest", required=True, help="manifest.json (reads only its 'config')")
    ap.add_argument("--weights", required=True, help="weights .safetensors")
    ap.add_argument("--inputs", required=True, help="inputs .safetensors (token tensors)")
    ap.add_argument("--out", required=True, help="output .safetensors with F64 'logits'")
    args = ap.parse_args(argv)
    try:
        with open(args.manifest) as f:
            config = json.load(f)["config"]
        logits = forward(config, safetensors_io.read(args.weights), safetensors_io.read(args.inputs))
        tmp = args.out + ".tmp"
        safetensors_io.write(tmp, {"logits": logits.astype(np.float64)})
        os.replace(tmp, args.out)  # no partial output file
    except (OSError, KeyError, ValueError, json.JSONDecodeError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"oracle.py: error: {msg}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
