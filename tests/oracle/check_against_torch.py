#!/usr/bin/python3
"""Checks the NumPy oracle against real PyTorch modules, in float64.

For each case: build the PyTorch model with random weights (rounded to the dtype the
weights file stores, so both sides see identical values), save its state_dict with our
safetensors writer, run oracle.py's CLI on the same (right-padded) token inputs, and
compare with model.double() logits.
Match: max|oracle - torch| <= 1e-6 * max(1, max|torch|).
With --transfuse BIN, each case also compiles its config with the transfuse
driver and runs the saved state_dict (buffers and tied duplicates included, as
PyTorch saves them) on the reference backend: a PyTorch checkpoint runs here.
Exit 0 when every case matches, 1 on any mismatch, 77 when torch is not installed.

  encoder_decoder: the translation tutorial's Seq2SeqTransformer on nn.Transformer
                   (batch_first=True) with TokenEmbedding, PositionalEncoding, generator.
  decoder_only   : a GPT-2 written here from Conv1D (addmm, weight [in, out]),
                   F.gelu(approximate="tanh"), nn.LayerNorm and causal attention.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle  # noqa: E402
import safetensors_io  # noqa: E402

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("SKIPPED: torch is not installed (apt-get install python3-torch)")
    sys.exit(77)

ACT = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh")}


def sinusoidal_torch(n, d):
    den = torch.exp(-torch.arange(0, d, 2, dtype=torch.float64) * math.log(10000.0) / d)
    pos = torch.arange(n, dtype=torch.float64).reshape(n, 1)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * den)
    pe[:, 1::2] = torch.cos(pos * den)
    return pe


# ------------------------------------------------------------ tutorial Seq2SeqTransformer

class TokenEmbedding(nn.Module):
    def __init__(self, vocab, d):
        super().__init__()
        self.embedding, self.d = nn.Embedding(vocab, d), d

    def forward(self, tokens):
        return self.embedding(tokens.long()) * math.sqrt(self.d)


class PositionalEncodingBuffer(nn.Module):
    """The tutorial's PositionalEncoding keeps its table as a buffer, so its
    checkpoints carry `positional_encoding.pos_embedding` [maxlen, 1, d]."""

    def __init__(self, n, d):
        super().__init__()
        self.register_buffer("pos_embedding", sinusoidal_torch(n, d).float().unsqueeze(1))


class LearnedPos(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.embedding = nn.Embedding(n, d)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.c = c
        self.transformer = nn.Transformer(
            d_model=d, nhead=c["num_heads"], num_encoder_layers=c["num_encoder_layers"],
            num_decoder_layers=c["num_decoder_layers"], dim_feedforward=c["d_ff"], dropout=0.0,
            activation=ACT[c["activation"]], layer_norm_eps=c["layer_norm_eps"], batch_first=True,
            norm_first=c["norm_position"] == "pre")
        if not c["final_norm"]:
            self.transformer.encoder.norm = None
            self.transformer.decoder.norm = None
        self.src_tok_emb = TokenEmbedding(c["src_vocab_size"], d)
        self.tgt_tok_emb = TokenEmbedding(c["tgt_vocab_size"], d)
        if c["share_embeddings"]:
            self.tgt_tok_emb.embedding.weight = self.src_tok_emb.embedding.weight
        self.generator = nn.Linear(d, c["tgt_vocab_size"], bias=c.get("_generator_bias", True))
        if c["tie_output"]:
            self.generator.weight = self.tgt_tok_emb.embedding.weight
        if c["positional"] == "learned":
            self.src_pos_emb = LearnedPos(c["max_seq_len"], d)
            self.tgt_pos_emb = LearnedPos(c["max_seq_len"], d)
        else:
            self.positional_encoding = PositionalEncodingBuffer(c["max_seq_len"], d)

    def pos(self, side, n):
        if self.c["positional"] == "learned":
            return getattr(self, side + "_pos_emb").embedding.weight[:n]
        return sinusoidal_torch(n, self.c["d_model"]).to(self.generator.weight.dtype)

    def forward(self, src, tgt):
        pad, T = self.c["pad_id"], tgt.shape[1]
        src_emb = self.src_tok_emb(src) + self.pos("src", src.shape[1])
        tgt_emb = self.tgt_tok_emb(tgt) + self.pos("tgt", T)
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # True = masked
        src_pad, tgt_pad = src == pad, tgt == pad
        out = self.transformer(src_emb, tgt_emb, src_mask=None, tgt_mask=causal,
                               src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                               memory_key_padding_mask=src_pad)
        return self.generator(out)


# ------------------------------------------------------------ GPT-2, written from scratch

class Conv1D(nn.Module):
    """HF Conv1D: weight [nx, nf]; y = addmm(b, x, W)."""

    def __init__(self, nf, nx):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.empty(nf))

    def forward(self, x):
        shape = x.shape[:-1] + (self.weight.shape[1],)
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(shape)


class GPT2Attention(nn.Module):
    def __init__(self, d, H):
        super().__init__()
        self.c_attn, self.c_proj, self.d, self.H = Conv1D(3 * d, d), Conv1D(d, d), d, H
        # The causal-mask buffers some GPT-2 checkpoints carry (unused here too).
        self.register_buffer("bias", torch.tril(torch.ones(4, 4)).view(1, 1, 4, 4))
        self.register_buffer("masked_bias", torch.tensor(-1e4))

    def forward(self, x, key_pad):
        B, T, d = x.shape
        q, k, v = self.c_attn(x).split(self.d, dim=2)
        heads = lambda t: t.view(B, T, self.H, d // self.H).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // self.H)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T)
        if key_pad is not None:
            mask = mask & ~key_pad.view(B, 1, 1, T)
        s = s.masked_fill(~mask, float("-inf"))
        out = torch.matmul(torch.softmax(s, dim=-1), v).transpose(1, 2).reshape(B, T, d)
        return self.c_proj(out)


class GPT2MLP(nn.Module):
    def __init__(self, d, d_ff, act):
        super().__init__()
        self.c_fc, self.c_proj, self.act = Conv1D(d_ff, d), Conv1D(d, d_ff), ACT[act]

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, eps = c["d_model"], c["layer_norm_eps"]
        self.ln_1, self.ln_2 = nn.LayerNorm(d, eps=eps), nn.LayerNorm(d, eps=eps)
        self.attn = GPT2Attention(d, c["num_heads"])
        self.mlp = GPT2MLP(d, c["d_ff"], c["activation"])
        self.pre = c["norm_position"] == "pre"

    def forward(self, h, key_pad):
        if self.pre:
            h = h + self.attn(self.ln_1(h), key_pad)
            return h + self.mlp(self.ln_2(h))
        h = self.ln_1(h + self.attn(h, key_pad))
        return self.ln_2(h + self.mlp(h))


class GPT2Body(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c["vocab_size"], c["d_model"])
        if c["positional"] == "learned":
            self.wpe = nn.Embedding(c["max_seq_len"], c["d_model"])
        self.h = nn.ModuleList(GPT2Block(c) for _ in range(c["num_layers"]))
        if c["final_norm"]:
            self.ln_f = nn.LayerNorm(c["d_model"], eps=c["layer_norm_eps"])


class GPT2LMHead(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c, self.transformer = c, GPT2Body(c)
        self.lm_head = nn.Linear(c["d_model"], c["vocab_size"], bias=False)
        if c["tie_output"]:
            self.lm_head.weight = self.transformer.wte.weight

    def forward(self, tokens):
        t, T = self.transformer, tokens.shape[1]
        pe = (t.wpe.weight[:T] if self.c["positional"] == "learned"
              else sinusoidal_torch(T, self.c["d_model"]).to(t.wte.weight.dtype))
        h = t.wte(tokens.long()) + pe
        key_pad = None if self.c["pad_id"] is None else tokens == self.c["pad_id"]
        for block in t.h:
            h = block(h, key_pad)
        if self.c["final_norm"]:
            h = t.ln_f(h)
        return self.lm_head(h)


# ------------------------------------------------------------ cases

BASE = dict(d_model=16, num_heads=4, d_ff=24, max_seq_len=12, dropout=0.1, layer_norm_eps=1e-5,
            final_norm=True, share_embeddings=False, tie_output=False, positional="sinusoidal",
            pad_id=1, bos_id=2, eos_id=3, activation="relu", norm_position="post")
ED = dict(BASE, architecture="encoder_decoder", num_encoder_layers=2, num_decoder_layers=2,
          src_vocab_size=23, tgt_vocab_size=19)
GPT = dict(BASE, architecture="decoder_only", num_layers=2, vocab_size=29, activation="gelu_tanh",
           norm_position="pre", positional="learned", tie_output=True, pad_id=None)

CASES = [
    # name, config, weights dtype, strip "transformer." from GPT-2 names
    ("ed_tutorial_post_relu_final_norms", dict(ED), "F32", False),
    ("ed_pre_gelu_share_tie", dict(ED, norm_position="pre", activation="gelu", share_embeddings=True,
                                   tie_output=True, src_vocab_size=21, tgt_vocab_size=21), "F32", False),
    ("ed_learned_gelu_tanh_no_final_norm_no_gen_bias",
     dict(ED, activation="gelu_tanh", positional="learned", final_norm=False, pad_id=0,
          _generator_bias=False), "BF16", False),
    ("gpt2_pre_gelu_tanh_tied_nopad", dict(GPT), "F32", False),
    ("gpt2_post_relu_untied_padded_sinusoidal_noprefix",
     dict(GPT, norm_position="post", activation="relu", tie_output=False, pad_id=0,
          positional="sinusoidal", final_norm=False, d_ff=16, num_heads=2), "F16", True),
    ("gpt2_pre_gelu_padded_learned", dict(GPT, activation="gelu", pad_id=5, num_layers=3), "F32", False),
]

ROUND = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def randomize(model, gen):
    for name, p in model.named_parameters():
        with torch.no_grad():
            if ("norm" in name or ".ln_" in name or name.startswith("ln_")) and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))


def tokens(gen, B, T, vocab, pad, lengths):
    """Right-padded token ids: non-pad ids in [0, vocab) for positions < length, pad after."""
    t = torch.randint(0, vocab, (B, T), generator=gen)
    if pad is not None:
        t[t == pad] = (pad + 1) % vocab
        for b, n in enumerate(lengths):
            t[b, n:] = pad
    return t.to(torch.int32)


def run_case(name, cfg, wdtype, strip, tmp, seed):
    gen = torch.Generator().manual_seed(seed)
    model = (Seq2SeqTransformer(cfg) if cfg["architecture"] == "encoder_decoder" else GPT2LMHead(cfg))
    randomize(model, gen)
    with torch.no_grad():  # round weights to what the file stores, then compute in float64
        for p in model.parameters():
            p.copy_(p.to(ROUND[wdtype]).to(torch.float32))
    state = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    if strip:
        state = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in state.items()}
    model = model.double().eval()
    pad = cfg["pad_id"]
    B = 3
    if cfg["architecture"] == "encoder_decoder":
        src = tokens(gen, B, 7, cfg["src_vocab_size"], pad, [7, 4, 5])
        tgt = tokens(gen, B, 6, cfg["tgt_vocab_size"], pad, [6, 6, 2])
        inputs = {"src_tokens": src.numpy(), "tgt_tokens": tgt.numpy()}
        ref = model(src, tgt)  # grad enabled: keeps nn.Transformer off its fused fast path
    else:
        tok = tokens(gen, B, 9, cfg["vocab_size"], pad, [9, 5, 1])
        inputs = {"tokens": tok.numpy()}
        ref = model(tok)
    ref = ref.detach().numpy()

    config = {k: v for k, v in cfg.items() if not k.startswith("_")}
    paths = {k: os.path.join(tmp, f"{name}.{k}") for k in ("manifest", "weights", "inputs", "out")}
    with open(paths["manifest"], "w") as f:
        json.dump({"config": config}, f)
    safetensors_io.write(paths["weights"], state, dtypes={k: wdtype for k in state})
    safetensors_io.write(paths["inputs"], inputs)
    cmd = [sys.executable, os.path.join(HERE, "oracle.py")] + [a for k in paths for a in (f"--{k}", paths[k])]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL {name}: oracle.py exited {r.returncode}: {r.stderr.strip()}")
        return False
    ok = compare(name, "oracle", safetensors_io.read(paths["out"])["logits"], ref, wdtype)
    if TRANSFUSE:
        ok &= run_transfuse(name, config, paths, tmp, ref, wdtype)
    return ok


def compare(name, what, got, ref, wdtype, dtype=np.float64, tol=1e-6):
    if got.dtype != dtype or got.shape != ref.shape:
        print(f"FAIL {name} ({what}): logits {got.dtype} {got.shape}, expected {np.dtype(dtype)} {ref.shape}")
        return False
    err = float(np.abs(got.astype(np.float64) - ref).max())
    scale = max(1.0, float(np.abs(ref).max()))
    ok = np.isfinite(ref).all() and err <= tol * scale
    print(f"{'ok  ' if ok else 'FAIL'} {name} ({what}): max abs err {err:.3e}, max|logit| {scale:.3f}, "
          f"weights {wdtype}, logits {list(ref.shape)}")
    return ok


def run_transfuse(name, config, paths, tmp, ref, wdtype):
    """Compiles the case's config with transfuse and runs the torch checkpoint."""
    if config["architecture"] == "decoder_only":
        config = {k: v for k, v in config.items() if k != "share_embeddings"}
    cfg_path, art = os.path.join(tmp, f"{name}.json"), os.path.join(tmp, f"{name}.artifact")
    out = os.path.join(tmp, f"{name}.transfuse.safetensors")
    with open(cfg_path, "w") as f:
        json.dump(config, f)
    compiled = os.path.join(tmp, f"{name}.compiled.safetensors")
    run = [TRANSFUSE, "run", art, "--weights", paths["weights"], "--inputs", paths["inputs"]]
    for cmd in ([TRANSFUSE, "compile", cfg_path, "-o", art, "--fusion", "all"],
                run + ["--outputs", compiled, "--backend", "compiled", "--threads", "2"],
                run + ["--outputs", out, "--backend", "reference", "--f64-outputs"]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL {name} (transfuse): {' '.join(cmd[1:2])} exited {r.returncode}: {r.stderr.strip()}")
            return False
    # The buffers PyTorch saved are reported, never silently dropped.
    expected = ("positional_encoding.pos_embedding" if "positional_encoding.pos_embedding" in
                safetensors_io.read(paths["weights"]) else "attn.masked_bias"
                if config["architecture"] == "decoder_only" else None)
    if expected and expected not in r.stderr:
        print(f"FAIL {name} (transfuse): no warning about {expected!r}: {r.stderr.strip()}")
        return False
    # fp32 code against fp64 PyTorch: 1e-4 of the logits' scale.
    ok = compare(name, "transfuse compiled, fusion all, fp32", safetensors_io.read(compiled)["logits"],
                 ref, wdtype, dtype=np.float32, tol=1e-4)
    return compare(name, "transfuse reference backend", safetensors_io.read(out)["logits"], ref,
                   wdtype) and ok


def check_all_masked_rows():
    """Oracle-only: a left-padded decoder_only batch has query rows with every key masked;
    their attention output must be 0, so logits stay finite (torch would give NaN)."""
    cfg = dict(GPT, pad_id=0, positional="learned")
    rng = np.random.default_rng(0)
    model = GPT2LMHead(cfg)
    w = {k: rng.normal(0, 0.3, v.shape) for k, v in model.state_dict().items()}
    tok = np.array([[0, 0, 4, 5], [6, 7, 8, 9]], dtype=np.int32)
    logits = oracle.forward(cfg, w, {"tokens": tok})
    q = rng.normal(size=(1, 2, 4))
    att = oracle.attention(q, q, q, 2, np.zeros((1, 2, 2), dtype=bool))
    ok = np.isfinite(logits).all() and not att.any()
    print(f"{'ok  ' if ok else 'FAIL'} oracle_all_masked_rows_are_zero")
    return ok


TRANSFUSE = None


def main():
    global TRANSFUSE
    if len(sys.argv) == 3 and sys.argv[1] == "--transfuse":
        TRANSFUSE = sys.argv[2]
    elif len(sys.argv) != 1:
        print("usage: check_against_torch.py [--transfuse BIN]", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, cfg, wdtype, strip) in enumerate(CASES):
            ok &= run_case(name, cfg, wdtype, strip, tmp, seed=1000 + i)
    ok &= check_all_masked_rows()
    print("PASS" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
