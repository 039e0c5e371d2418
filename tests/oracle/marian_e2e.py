#!/usr/bin/env python3
"""Hugging Face Marian (MarianMTModel) directories end to end: tiny random
directories written here (shared and separate vocabularies, swish or gelu,
scaled embeddings or not, tied or untied heads) compiled as they are with every
fusion strategy of note, `forward` (source ids EOS pad..., target from the pad
id) within 1e-4 of the NumPy oracle (oracle.marian, itself within 1e-10 of a
PyTorch module written here as transformers writes MarianMTModel, when torch is
present), the reference backend within 1e-6; `transfuse translate` (encode and
decode_step over the KV cache) greedy against recomputation with the oracle,
the pad id never emitted; forward and beam-4 generation against golden outputs
of Hugging Face's MarianMTModel (marian-golden/, made by make_marian_golden.py);
bad directories refused with one error naming the key.
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle  # noqa: E402
import safetensors_io  # noqa: E402
from bert_e2e import check_close, run  # noqa: E402
from llama_e2e import refused, write_dir  # noqa: E402

MARIAN = {
    "architectures": ["MarianMTModel"], "model_type": "marian", "d_model": 32,
    "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "encoder_ffn_dim": 40, "decoder_ffn_dim": 40,
    "vocab_size": 60, "max_position_embeddings": 64, "activation_function": "swish",
    "scale_embedding": True, "share_encoder_decoder_embeddings": True,
    "tie_word_embeddings": True, "pad_token_id": 59, "eos_token_id": 0,
    "decoder_start_token_id": 59, "forced_eos_token_id": 0, "dropout": 0.1,
    "attention_dropout": 0.0, "activation_dropout": 0.0, "init_std": 0.02,
    "is_encoder_decoder": True, "num_hidden_layers": 2, "use_cache": True, "num_beams": 4,
    "max_length": 64, "bad_words_ids": [[59]], "normalize_before": False,
    "static_position_embeddings": True, "transformers_version": "4.46.0",
}
CONFIGS = {
    "marian": MARIAN,
    # Separate vocabularies (the decoder's smaller), gelu, unscaled, an untied head.
    "marian-separate": dict(MARIAN, share_encoder_decoder_embeddings=False,
                            decoder_vocab_size=48, activation_function="gelu",
                            scale_embedding=False, tie_word_embeddings=False,
                            decoder_start_token_id=47, pad_token_id=47),
}


def marian_weights(cfg, rng):
    """A MarianMTModel's weights as save_pretrained writes them (no position tables)."""
    d, f = cfg["d_model"], cfg["encoder_ffn_dim"]
    V = cfg["vocab_size"]
    Vd = cfg.get("decoder_vocab_size") or V
    r = lambda *s: (0.2 * rng.standard_normal(s)).astype(np.float32)
    w = {"final_logits_bias": r(1, Vd)}
    if cfg["share_encoder_decoder_embeddings"]:
        w["model.shared.weight"] = r(V, d)
    else:
        w["model.encoder.embed_tokens.weight"] = r(V, d)
        w["model.decoder.embed_tokens.weight"] = r(Vd, d)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = r(Vd, d)
    for side in ("encoder", "decoder"):
        for i in range(cfg[side + "_layers"]):
            p = f"model.{side}.layers.{i}."
            for a in ["self_attn"] + (["encoder_attn"] if side == "decoder" else []):
                for q in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    w[f"{p}{a}.{q}.weight"], w[f"{p}{a}.{q}.bias"] = r(d, d), r(d)
                w[f"{p}{a}_layer_norm.weight"], w[f"{p}{a}_layer_norm.bias"] = 1 + r(d), r(d)
            w[p + "fc1.weight"], w[p + "fc1.bias"] = r(f, d), r(f)
            w[p + "fc2.weight"], w[p + "fc2.bias"] = r(d, f), r(d)
            w[p + "final_layer_norm.weight"], w[p + "final_layer_norm.bias"] = 1 + r(d), r(d)
    return w


def inputs(cfg, rng):
    """Sources (ids EOS, then pad) and targets (the start id first)."""
    V = cfg["vocab_size"]
    Vd = cfg.get("decoder_vocab_size") or V
    pad, eos, start = cfg["pad_token_id"], cfg["eos_token_id"], cfg["decoder_start_token_id"]
    src = np.full((2, 7), pad, np.int32)
    for b, n in enumerate((6, 3)):
        src[b, :n] = rng.integers(1, min(V, Vd) - 1, size=n)
        src[b, n] = eos
    tgt = rng.integers(1, Vd - 1, size=(2, 5)).astype(np.int32)
    tgt[:, 0] = start
    return src, tgt


def torch_marian(cfg, weights, src, tgt):
    """MarianMTModel's forward written with torch as transformers writes it
    (MarianSinusoidalPositionalEmbedding, scaled q, post-LN), in fp64."""
    import torch
    import torch.nn.functional as F
    W = {k: torch.tensor(np.asarray(v, np.float64)) for k, v in weights.items()}
    d, H = cfg["d_model"], cfg["encoder_attention_heads"]
    hd = d // H
    act = {"swish": F.silu, "gelu": F.gelu}[cfg["activation_function"]]
    scale = d ** 0.5 if cfg["scale_embedding"] else 1.0
    shared = W.get("model.shared.weight")
    enc_table = W.get("model.encoder.embed_tokens.weight", shared)
    dec_table = W.get("model.decoder.embed_tokens.weight", shared)

    def positions(n):
        enc = np.array([[pos / np.power(10000, 2 * (j // 2) / d) for j in range(d)]
                        for pos in range(n)])
        out = torch.zeros(n, d, dtype=torch.float64)
        out[:, :d // 2] = torch.tensor(np.sin(enc[:, 0::2]))
        out[:, d // 2:] = torch.tensor(np.cos(enc[:, 1::2]))
        return out

    lin = lambda x, p: F.linear(x, W[p + ".weight"], W[p + ".bias"])
    norm = lambda x, p: F.layer_norm(x, (d,), W[p + ".weight"], W[p + ".bias"], 1e-5)

    def attention(p, x, mem, mask):
        B, T, _ = x.shape
        S = mem.shape[1]
        q = (lin(x, p + ".q_proj") * hd ** -0.5).view(B, T, H, hd).transpose(1, 2)
        k = lin(mem, p + ".k_proj").view(B, S, H, hd).transpose(1, 2)
        v = lin(mem, p + ".v_proj").view(B, S, H, hd).transpose(1, 2)
        s = q @ k.transpose(-1, -2) + mask
        o = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d)
        return lin(o, p + ".out_proj")

    src_t, tgt_t = torch.tensor(src, dtype=torch.long), torch.tensor(tgt, dtype=torch.long)
    neg = torch.finfo(torch.float64).min
    src_mask = torch.zeros(src_t.shape, dtype=torch.float64).masked_fill(
        src_t == cfg["pad_token_id"], neg)[:, None, None, :]
    T = tgt.shape[1]
    causal = torch.triu(torch.full((T, T), neg, dtype=torch.float64), 1)[None, None]
    x = F.embedding(src_t, enc_table) * scale + positions(src.shape[1])
    for i in range(cfg["encoder_layers"]):
        p = f"model.encoder.layers.{i}"
        x = norm(x + attention(p + ".self_attn", x, x, src_mask), p + ".self_attn_layer_norm")
        x = norm(x + lin(act(lin(x, p + ".fc1")), p + ".fc2"), p + ".final_layer_norm")
    y = F.embedding(tgt_t, dec_table) * scale + positions(T)
    for i in range(cfg["decoder_layers"]):
        p = f"model.decoder.layers.{i}"
        y = norm(y + attention(p + ".self_attn", y, y, causal), p + ".self_attn_layer_norm")
        y = norm(y + attention(p + ".encoder_attn", y, x, src_mask), p + ".encoder_attn_layer_norm")
        y = norm(y + lin(act(lin(y, p + ".fc1")), p + ".fc2"), p + ".final_layer_norm")
    head = W.get("lm_head.weight", dec_table)
    return (y @ head.T + W["final_logits_bias"]).numpy()


def greedy(cfg, weights, source, new):
    """Greedy translation by recomputation: ids EOS in, from the start id, the pad
    id banned, until EOS or `new` tokens; None at a near tie (fp32 may differ)."""
    pad, eos = cfg["pad_token_id"], cfg["eos_token_id"]
    src = np.array([list(source) + [eos]])
    seq = [cfg["decoder_start_token_id"]]
    for _ in range(new):
        last = oracle.marian(cfg, weights, src, np.array([seq]))[0, -1].copy()
        last[pad] = -np.inf
        top = np.sort(last)[-2:]
        if top[1] - top[0] < 1e-3:
            return None
        t = int(np.argmax(last))
        if t == eos:
            break
        seq.append(t)
    return seq[1:]


# The golden outputs of transformers' MarianMTModel (marian-golden/NAME.safetensors,
# made by make_marian_golden.py): each config's weights and inputs drawn from its seed.
GOLDEN = {"marian": 1, "marian-separate": 2}


def golden_inputs(name):
    rng = np.random.default_rng(2000 + GOLDEN[name])
    cfg = CONFIGS[name]
    weights = marian_weights(cfg, rng)
    src, tgt = inputs(cfg, rng)
    return weights, src, tgt


def text_case(args, rng):
    """`translate` with text through the SentencePiece models and vocab.json the artifact
    carries (tests/tokenizers/marian: the tokenizer test's): the text outputs are the
    id outputs of the same sources' ids (what transformers' MarianTokenizer gave, from
    the tokenizer's golden data) decoded, and --ids keeps ids."""
    tok_dir = os.path.join(HERE, "..", "tokenizers", "marian")
    with open(os.path.join(tok_dir, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    cfg = dict(MARIAN, vocab_size=len(vocab), pad_token_id=vocab["<pad>"],
               decoder_start_token_id=vocab["<pad>"], eos_token_id=vocab["</s>"],
               bad_words_ids=[[vocab["<pad>"]]])
    model = os.path.join(args.workdir, "text-marian")
    write_dir(model, cfg, marian_weights(cfg, rng))
    for f in ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), os.path.join(model, f))
    out = model + "-out"
    run([args.transfuse, "compile", model, "-o", out, "--fusion", "all", "--max-seq-len", "48",
         "--max-batch", "4"])
    with gzip.open(os.path.join(tok_dir, "golden.jsonl.gz"), "rt", encoding="utf-8") as f:
        records = [r for r in map(json.loads, f) if 0 < len(r["j"][0]) < 40][:6]
    texts = os.path.join(args.workdir, "text-sources.txt")
    with open(texts, "w", encoding="utf-8") as f:
        f.write("".join(r["t"] + "\n" for r in records))
    ids = os.path.join(args.workdir, "text-source-ids.txt")
    with open(ids, "w") as f:  # transformers' ids without the EOS it appends
        f.write("".join(" ".join(map(str, r["j"][0][:-1])) + "\n" for r in records))
    common = ["--weights", model, "--max-len", "6", "--beam", "2"]
    text_out = run([args.transfuse, "translate", out, "--input", texts] + common).stdout
    ids_out = run([args.transfuse, "translate", out, "--ids", "--input", ids] + common).stdout
    inverse = {i: p for p, i in vocab.items()}
    specials = {vocab["</s>"], vocab["<unk>"], vocab["<pad>"]}
    decoded = "".join("".join(inverse[int(t)] for t in line.split() if int(t) not in specials)
                      .replace("\u2581", " ").strip() + "\n"
                      for line in ids_out.rstrip("\n").split("\n"))
    same = text_out == decoded and len(text_out.split("\n")) == len(records) + 1
    print(f"translate text: {'equal to' if same else 'DIFFERS from'} the ids' decode "
          f"({text_out!r} vs {decoded!r})")
    return same


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--transfuse", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    rng = np.random.default_rng(36)
    ok = True
    for name, cfg in CONFIGS.items():
        model = os.path.join(args.workdir, name)
        weights = marian_weights(cfg, rng)
        write_dir(model, cfg, weights)
        src, tgt = inputs(cfg, rng)
        feeds = os.path.join(args.workdir, name + "-in.safetensors")
        safetensors_io.write(feeds, {"src_tokens": src, "tgt_tokens": tgt})
        want = oracle.marian(cfg, weights, src, tgt)
        for fusion in ("none", "all"):
            out = os.path.join(args.workdir, f"out-{name}-{fusion}")
            run([args.transfuse, "compile", model, "-o", out, "--fusion", fusion,
                 "--max-seq-len", "24", "--max-batch", "2"])
            got = os.path.join(out, "got.safetensors")
            run([args.transfuse, "run", out, "--inputs", feeds, "--weights", model, "--outputs",
                 got])
            ok &= check_close(f"{name} compiled, fusion {fusion}",
                              safetensors_io.read(got)["logits"], want, 1e-4)
            if fusion == "none":
                ref = os.path.join(out, "ref.safetensors")
                run([args.transfuse, "run", out, "--backend", "reference", "--f64-outputs",
                     "--inputs", feeds, "--weights", model, "--outputs", ref])
                ok &= check_close(f"{name} reference", safetensors_io.read(ref)["logits"], want,
                                  1e-6)
        try:
            import torch  # noqa: F401
            ok &= check_close(f"oracle.marian against torch ({name})", want,
                              torch_marian(cfg, weights, src, tgt), 1e-10)
        except ImportError:
            print("torch is absent: oracle.marian not checked against torch")
        # translate: greedy over the cache against recomputation.
        sources = [list(rng.integers(1, 40, size=n)) for n in (5, 2, 7)]
        path = os.path.join(args.workdir, name + "-sources.txt")
        with open(path, "w") as f:
            f.write("".join(" ".join(map(str, s)) + "\n" for s in sources))
        p = run([args.transfuse, "translate", os.path.join(args.workdir, f"out-{name}-all"),
                 "--weights", model, "--input", path, "--max-len", "8"])
        lines = [[int(x) for x in line.split()] for line in p.stdout.rstrip("\n").split("\n")]
        for i, source in enumerate(sources):
            expected = greedy(cfg, weights, source, 8)
            if expected is None:
                print(f"{name} translate, source {i}: a near tie in the oracle; not compared")
                continue
            same = lines[i][:len(expected)] == expected
            print(f"{name} translate, source {i}: {'equal to' if same else 'DIFFERS from'} "
                  f"greedy recomputation ({lines[i]} vs {expected})")
            ok &= same and cfg["pad_token_id"] not in lines[i]
    # Hugging Face's own MarianMTModel: forward and beam-4 generate().
    for name in GOLDEN:
        cfg = CONFIGS[name]
        weights, src, tgt = golden_inputs(name)
        gold = safetensors_io.read(os.path.join(HERE, "marian-golden", name + ".safetensors"))
        model = os.path.join(args.workdir, "golden-" + name)
        write_dir(model, cfg, weights)
        out = model + "-out"
        run([args.transfuse, "compile", model, "-o", out, "--fusion", "all", "--max-seq-len", "24",
             "--max-batch", "2"])
        feeds = os.path.join(args.workdir, f"golden-{name}-in.safetensors")
        safetensors_io.write(feeds, {"src_tokens": src, "tgt_tokens": tgt})
        got = os.path.join(out, "got.safetensors")
        run([args.transfuse, "run", out, "--inputs", feeds, "--weights", model, "--outputs", got])
        ok &= check_close(f"{name} against Hugging Face", safetensors_io.read(got)["logits"],
                          gold["logits"].astype(np.float64), 1e-4)
        path = os.path.join(args.workdir, f"golden-{name}-sources.txt")
        with open(path, "w") as f:  # the sources without EOS and padding
            f.write("".join(" ".join(str(t) for t in row[:list(row).index(cfg["eos_token_id"])])
                            + "\n" for row in src))
        # max_new_tokens 8 counts the forced EOS; --max-len does not.
        p = run([args.transfuse, "translate", out, "--weights", model, "--input", path, "--beam",
                 "4", "--max-len", "7"])
        lines = [[int(x) for x in line.split()] for line in p.stdout.rstrip("\n").split("\n")]
        for i, line in enumerate(lines):
            hf = [t for t in gold["generated"][i].tolist()[1:]
                  if t not in (cfg["eos_token_id"], cfg["pad_token_id"])]
            same = line == hf
            print(f"{name} translate --beam 4, source {i}: {'equal to' if same else 'DIFFERS from'}"
                  f" Hugging Face's generate(num_beams=4) ({line} vs {hf})")
            ok &= same
    ok &= text_case(args, rng)
    # Bad directories: one error naming the key, nothing written.
    for what, cfg, expected in [
            ("heads", dict(MARIAN, decoder_attention_heads=2),
             "key 'decoder_attention_heads': 2 differs from encoder_attention_heads 4"),
            ("ffn", dict(MARIAN, decoder_ffn_dim=64),
             "key 'decoder_ffn_dim': 64 differs from encoder_ffn_dim 40"),
            ("activation", dict(MARIAN, activation_function="mish"),
             "key 'activation_function': not supported"),
            ("start", dict(MARIAN, decoder_start_token_id=60),
             "key 'decoder_start_token_id': 60 is outside the vocabulary [0, 60)")]:
        model = os.path.join(args.workdir, "bad-" + what)
        write_dir(model, cfg, {})
        out = model + "-out"
        shutil.rmtree(out, ignore_errors=True)
        ok &= refused(args, what, [args.transfuse, "compile", model, "-o", out], expected, out)
    print("marian_e2e: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
