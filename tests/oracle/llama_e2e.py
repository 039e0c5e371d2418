#!/usr/bin/python3
"""Decoder LLM families from Hugging Face directories, end to end.

Writes tiny random Llama, Mistral, Qwen2 and GPT-2 directories as Hugging
Face saves them (config.json, model.safetensors with the `model.` or
`transformer.` prefix), compiles each (fusion none and all), runs `forward`
compiled and on the reference backend through `transfuse run`, and compares
the logits with the NumPy oracle (oracle.llama, oracle.decoder_only; fp64):
reference within 1e-6, compiled within 1e-4 of max(1, max |logit|). Where
Debian's torch is present, oracle.llama is itself checked against a Llama
written here with torch (Hugging Face's rotate_half and repeat_kv, fp64).
`transfuse generate` from ids (the KV cache's prefill and decode_step)
gives the tokens of greedy recomputation with the oracle. Bad directories
(an unsupported rope type, heads that do not divide, a missing weight, a
sliding window under the compiled length) each fail with one error naming
what is wrong, and write nothing.

usage: llama_e2e.py --transfuse BIN --workdir DIR
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

LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False,
    "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 32, "initializer_range": 0.02, "intermediate_size": 40,
    "max_position_embeddings": 64, "mlp_bias": False, "num_attention_heads": 4,
    "num_hidden_layers": 2, "num_key_value_heads": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-5,
    "rope_scaling": None, "rope_theta": 10000.0, "tie_word_embeddings": False,
    "torch_dtype": "float32", "transformers_version": "4.46.0", "use_cache": True,
    "vocab_size": 50,
}
# The families and variants: GQA, MHA, tied, scaled rotary, biases.
CONFIGS = {
    "llama": LLAMA,
    "llama3": dict(LLAMA, num_key_value_heads=1, tie_word_embeddings=True, rope_theta=500000.0,
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 16}),
    # llama3 as transformers 5 writes it: rope_theta inside rope_parameters.
    "llama3-v5": dict({k: v for k, v in LLAMA.items() if k not in ("rope_scaling", "rope_theta")},
                      num_key_value_heads=1, transformers_version="5.25.0",
                      rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                                       "factor": 8.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0,
                                       "original_max_position_embeddings": 16}),
    "llama-linear": dict(LLAMA, num_key_value_heads=4, attention_bias=True,
                         rope_scaling={"type": "linear", "factor": 2.0}),
    "mistral": dict(LLAMA, architectures=["MistralForCausalLM"], model_type="mistral",
                    sliding_window=4096, head_dim=16, hidden_size=48, num_attention_heads=4,
                    num_key_value_heads=2),
    "qwen2": dict({k: v for k, v in LLAMA.items() if k not in ("attention_bias", "mlp_bias",
                                                              "pretraining_tp")},
                  architectures=["Qwen2ForCausalLM"], model_type="qwen2",
                  use_sliding_window=False, sliding_window=32, max_window_layers=2,
                  tie_word_embeddings=True),
}


def llama_weights(cfg, rng):
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    Hkv, hd = cfg["num_key_value_heads"], cfg.get("head_dim") or d // H
    f, V = cfg["intermediate_size"], cfg["vocab_size"]
    qwen = cfg["model_type"] == "qwen2"
    qkv_bias = qwen or cfg.get("attention_bias", False)
    o_bias = cfg.get("attention_bias", False) and not qwen
    w = {}
    r = lambda *s: (0.2 * rng.standard_normal(s)).astype(np.float32)
    w["model.embed_tokens.weight"] = r(V, d)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for n, rows in (("q", H * hd), ("k", Hkv * hd), ("v", Hkv * hd)):
            w[p + f"self_attn.{n}_proj.weight"] = r(rows, d)
            if qkv_bias:
                w[p + f"self_attn.{n}_proj.bias"] = r(rows)
        w[p + "self_attn.o_proj.weight"] = r(d, H * hd)
        if o_bias:
            w[p + "self_attn.o_proj.bias"] = r(d)
        w[p + "mlp.gate_proj.weight"] = r(f, d)
        w[p + "mlp.up_proj.weight"] = r(f, d)
        w[p + "mlp.down_proj.weight"] = r(d, f)
        w[p + "input_layernorm.weight"] = 1 + r(d)
        w[p + "post_attention_layernorm.weight"] = 1 + r(d)
    w["model.norm.weight"] = 1 + r(d)
    if not cfg.get("tie_word_embeddings"):
        w["lm_head.weight"] = r(V, d)
    return w


def write_dir(path, cfg, weights):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    safetensors_io.write(os.path.join(path, "model.safetensors"), weights)


def torch_llama(cfg, weights, tokens):
    """LlamaForCausalLM's forward written with torch as Hugging Face writes it
    (rotate_half, repeat_kv, the cos/sin cache in fp32), computed in fp64."""
    import torch
    import torch.nn.functional as F
    W = {k[6:] if k.startswith("model.") else k: torch.tensor(np.asarray(v, np.float64))
         for k, v in weights.items()}
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    Hkv = cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or d // H
    eps = cfg["rms_norm_eps"]
    ids = torch.tensor(tokens, dtype=torch.long)
    B, T = ids.shape
    inv = torch.tensor(oracle.rope_inv_freq(cfg))  # fp32, as the rotary embedding holds it
    freqs = inv[None, :, None].float() @ torch.arange(T, dtype=torch.float32)[None, None, :]
    emb = torch.cat((freqs.transpose(1, 2), freqs.transpose(1, 2)), -1)[0].double()
    cos, sin = emb.cos(), emb.sin()

    def rotate_half(x):
        return torch.cat((-x[..., hd // 2:], x[..., :hd // 2]), -1)

    def norm(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def lin(x, p):
        return F.linear(x, W[p + ".weight"], W.get(p + ".bias"))

    h = F.embedding(ids, W["embed_tokens.weight"])
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}."
        x = norm(h, W[p + "input_layernorm.weight"])
        a = p + "self_attn."
        q = lin(x, a + "q_proj").view(B, T, H, hd).transpose(1, 2)
        k = lin(x, a + "k_proj").view(B, T, Hkv, hd).transpose(1, 2)
        v = lin(x, a + "v_proj").view(B, T, Hkv, hd).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k = k[:, :, None].expand(B, Hkv, H // Hkv, T, hd).reshape(B, H, T, hd)
        v = v[:, :, None].expand(B, Hkv, H // Hkv, T, hd).reshape(B, H, T, hd)
        s = (q @ k.transpose(2, 3)) / hd ** 0.5
        o = torch.softmax(s.masked_fill(~causal, float("-inf")), -1) @ v
        h = h + lin(o.transpose(1, 2).reshape(B, T, H * hd), a + "o_proj")
        x = norm(h, W[p + "post_attention_layernorm.weight"])
        m = p + "mlp."
        h = h + lin(F.silu(lin(x, m + "gate_proj")) * lin(x, m + "up_proj"), m + "down_proj")
    h = norm(h, W["norm.weight"])
    head = W["embed_tokens.weight"] if cfg.get("tie_word_embeddings") else W["lm_head.weight"]
    return (h @ head.T).numpy()


def greedy(logits_of, prompt, new, eos):
    """Greedy continuation by recomputation, EOS banned (as `generate --min-len`
    bans it); None where the top two logits are within 1e-3 (fp32 may pick
    either)."""
    seq = list(prompt)
    for _ in range(new):
        last = logits_of(np.array([seq]))[0, -1].copy()
        last[eos] = -np.inf
        top = np.sort(last)[-2:]
        if top[1] - top[0] < 1e-3:
            return None
        seq.append(int(np.argmax(last)))
    return seq[len(prompt):]


def generate_cases(args, name, cfg, model, weights, rng):
    """transfuse generate (prefill and decode_step over the KV cache) against
    greedy recomputation with the oracle, prompts of three lengths in one batch
    (the shortest prefilled for all, the longer ones fed step by step)."""
    ok = True
    out = os.path.join(args.workdir, f"gen-{name}")
    run([args.transfuse, "compile", model, "-o", out, "--max-seq-len", "24", "--max-batch", "3"])
    prompts = [rng.integers(0, cfg["vocab_size"], size=n) for n in (5, 2, 7)]
    path = os.path.join(args.workdir, f"prompts-{name}.txt")
    with open(path, "w") as f:
        f.write("".join(" ".join(map(str, p)) + "\n" for p in prompts))
    p = run([args.transfuse, "generate", out, "--weights", model, "--prompt-ids-file", path,
             "--max-new", "8", "--min-len", "8"])
    got = [list(map(int, line.split())) for line in p.stdout.strip().split("\n")]
    for i, prompt in enumerate(prompts):
        want = greedy(lambda t: oracle.llama(cfg, weights, t), prompt, 8, cfg["eos_token_id"])
        if want is None:
            print(f"{name} generate, prompt {i}: a near tie in the oracle; not compared")
            continue
        same = got[i] == want
        print(f"{name} generate, prompt {i}: {'equal to' if same else 'DIFFERS from'} greedy "
              f"recomputation ({got[i]} vs {want})")
        ok &= same
    return ok


GPT2 = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 49, "embd_pdrop": 0.1, "eos_token_id": 49, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 32, "n_embd": 32, "n_head": 4,
    "n_inner": None, "n_layer": 2, "n_positions": 32, "reorder_and_upcast_attn": False,
    "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True,
    "summary_activation": None, "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
    "summary_type": "cls_index", "summary_use_proj": True, "task_specific_params": {},
    "transformers_version": "4.46.0", "use_cache": True, "vocab_size": 50,
}


def gpt2_weights(rng, cfg=GPT2):
    """A GPT2LMHeadModel's weights as it saves them (Conv1D [in, out],
    `transformer.` names, the attention's causal buffers, the head tied)."""
    d, V, L, P = cfg["n_embd"], cfg["vocab_size"], cfg["n_layer"], cfg["n_positions"]
    r = lambda *s: (0.2 * rng.standard_normal(s)).astype(np.float32)
    w = {"transformer.wte.weight": r(V, d), "transformer.wpe.weight": r(P, d),
         "transformer.ln_f.weight": 1 + r(d), "transformer.ln_f.bias": r(d)}
    for i in range(L):
        p = f"transformer.h.{i}."
        for n, shape in (("ln_1", None), ("ln_2", None), ("attn.c_attn", (d, 3 * d)),
                         ("attn.c_proj", (d, d)), ("mlp.c_fc", (d, 4 * d)),
                         ("mlp.c_proj", (4 * d, d))):
            w[p + n + ".weight"] = 1 + r(d) if shape is None else r(*shape)
            w[p + n + ".bias"] = r(d if shape is None else shape[1])
        w[p + "attn.bias"] = np.tril(np.ones((1, 1, P, P), np.float32))  # a causal buffer
    return w


# The golden outputs of Hugging Face's modelling code (llama-golden/NAME.safetensors,
# made by make_llama_golden.py): each config's weights and tokens drawn from its seed.
GOLDEN = {"llama3": 1, "mistral": 2, "qwen2": 3, "gpt2": 4}


def golden_inputs(name):
    rng = np.random.default_rng(1000 + GOLDEN[name])
    weights = gpt2_weights(rng) if name == "gpt2" else llama_weights(CONFIGS[name], rng)
    return weights, rng.integers(0, 50, size=(2, 7)).astype(np.int32)


def golden_cases(args):
    """forward within 1e-4 of Hugging Face's logits (fp32), and generation
    equal to its greedy generate() where the oracle sees no near tie."""
    ok = True
    for name in GOLDEN:
        cfg = GPT2 if name == "gpt2" else CONFIGS[name]
        weights, tokens = golden_inputs(name)
        gold = safetensors_io.read(os.path.join(HERE, "llama-golden", name + ".safetensors"))
        model = os.path.join(args.workdir, "golden-" + name)
        write_dir(model, cfg, weights)
        feeds = os.path.join(args.workdir, f"golden-{name}-in.safetensors")
        safetensors_io.write(feeds, {"tokens": tokens})
        out = os.path.join(args.workdir, f"golden-{name}-out")
        run([args.transfuse, "compile", model, "-o", out, "--max-seq-len", "24"])
        got = os.path.join(out, "got.safetensors")
        run([args.transfuse, "run", out, "--entry", "forward", "--inputs", feeds, "--weights",
             model, "--outputs", got])
        ok &= check_close(f"{name} against Hugging Face", safetensors_io.read(got)["logits"],
                          gold["logits"].astype(np.float64), 1e-4)
        prompts = os.path.join(args.workdir, f"golden-{name}-prompts.txt")
        with open(prompts, "w") as f:
            f.write("".join(" ".join(map(str, t)) + "\n" for t in tokens))
        p = run([args.transfuse, "generate", out, "--weights", model, "--prompt-ids-file",
                 prompts, "--max-new", "8", "--min-len", "8"])
        lines = [list(map(int, line.split())) for line in p.stdout.strip().split("\n")]
        for i, line in enumerate(lines):
            same = line == gold["generated"][i].tolist()
            print(f"{name} generate, prompt {i}: {'equal to' if same else 'DIFFERS from'} "
                  f"Hugging Face's greedy generate ({line} vs {gold['generated'][i].tolist()})")
            ok &= same
    return ok


def gpt2_logits(cfg, w, tokens):
    """oracle.decoder_only on a GPT-2 config, mapped here."""
    ours = {"d_model": cfg["n_embd"], "num_heads": cfg["n_head"], "num_layers": cfg["n_layer"],
            "vocab_size": cfg["vocab_size"], "max_seq_len": cfg["n_positions"],
            "layer_norm_eps": 1e-5, "activation": "gelu_tanh", "norm_position": "pre",
            "positional": "learned", "final_norm": True, "tie_output": True, "pad_id": None}
    return oracle.decoder_only(ours, oracle.Weights(w, strip_prefix="transformer."),
                               np.asarray(tokens).astype(np.int64))


def gpt2_case(args, rng, tokens, in_path):
    """A GPT2LMHeadModel directory against oracle.decoder_only with the config
    mapped here."""
    w = gpt2_weights(rng)
    model = os.path.join(args.workdir, "gpt2")
    write_dir(model, GPT2, w)
    want = gpt2_logits(GPT2, w, tokens)
    ok = True
    for fusion in ("none", "all"):
        out = os.path.join(args.workdir, f"out-gpt2-{fusion}")
        run([args.transfuse, "compile", model, "-o", out, "--fusion", fusion])
        got = os.path.join(out, "got.safetensors")
        p = run([args.transfuse, "run", out, "--entry", "forward", "--inputs", in_path,
                 "--weights", model, "--outputs", got])
        ok &= check_close(f"gpt2 compiled, fusion {fusion}", safetensors_io.read(got)["logits"],
                          want, 1e-4)
    return ok


def text_cases(args, rng):
    """Text in and out through the tokenizer an artifact carries: a tokenizer.json in
    GPT-2's and in Llama 3's layout (tests/tokenizers/bpe) and a tokenizer.model in
    Llama 2's (tests/tokenizers/llama-spm). `tokenize` gives the ids transformers gave (the
    golden data), `generate --prompt-file` equals `generate --prompt-ids-file` on those
    ids decoded by `tokenize --decode`, `--stream` prints the same text, the ids follow
    greedy recomputation with the oracle, and generation_config.json's eos_token_id
    list stops it."""
    ok = True
    here = os.path.join(HERE, "..", "tokenizers")
    for name, files, golden in (
            ("gpt2", {"tokenizer.json": "bpe/tokenizer-gpt2.json"}, "bpe/golden.jsonl.gz"),
            ("llama3", {"tokenizer.json": "bpe/tokenizer-llama3.json"}, "bpe/golden.jsonl.gz"),
            ("llama2", {"tokenizer.model": "llama-spm/tokenizer.model",
                        "tokenizer_config.json": "llama-spm/tokenizer_config.json"},
             "llama-spm/golden.jsonl.gz")):
        with gzip.open(os.path.join(here, golden), "rt", encoding="utf-8") as f:
            records = [json.loads(line) for line in f]
        key = {"gpt2": "g", "llama3": "l"}.get(name)
        ids_of = (lambda r: r[key][0]) if key else (lambda r: r["ids"])
        if key:
            with open(os.path.join(here, files["tokenizer.json"])) as f:
                tok = json.load(f)
            vocab = max(max(tok["model"]["vocab"].values()),
                        max(a["id"] for a in tok["added_tokens"])) + 1
            specials = {a["content"]: a["id"] for a in tok["added_tokens"]}
            bos, eos = ((specials["<|begin_of_text|>"], specials["<|end_of_text|>"])
                        if name == "llama3" else (specials["<|endoftext|>"],) * 2)
        else:
            vocab, bos, eos = 1000, 1, 2
        model = os.path.join(args.workdir, f"text-{name}")
        if name == "gpt2":
            cfg = dict(GPT2, vocab_size=vocab, bos_token_id=bos, eos_token_id=eos)
            weights = gpt2_weights(rng, cfg)
            logits_of = lambda t: gpt2_logits(cfg, weights, t)  # noqa: E731
        else:
            cfg = dict(LLAMA, vocab_size=vocab, bos_token_id=bos, eos_token_id=eos)
            weights = llama_weights(cfg, rng)
            logits_of = lambda t: oracle.llama(cfg, weights, t)  # noqa: E731
        write_dir(model, cfg, weights)
        for dst, src in files.items():
            shutil.copy(os.path.join(here, src), os.path.join(model, dst))
        out = os.path.join(args.workdir, f"text-{name}-out")
        run([args.transfuse, "compile", model, "-o", out, "--max-seq-len", "32", "--max-batch",
             "3"])
        # Three corpus lines with what transformers made of them.
        picks = [r for r in records if "t" in r and "\n" not in r["t"] and
                 4 < len(ids_of(r)) < 20]
        picks = [picks[0], next(r for r in picks if any(ord(c) > 0x3000 for c in r["t"])),
                 picks[-1]]
        prompts = os.path.join(args.workdir, f"text-{name}-prompts.txt")
        with open(prompts, "w", encoding="utf-8") as f:
            f.write("".join(r["t"] + "\n" for r in picks))
        got = run([args.transfuse, "tokenize", out, "--input", prompts]).stdout.split("\n")[:3]
        want = [" ".join(map(str, ids_of(r))) for r in picks]
        same = got == want
        print(f"{name} tokenize: {'equal to' if same else 'DIFFERS from'} transformers' ids "
              f"({got} vs {want})")
        ok &= same
        ids_file = os.path.join(args.workdir, f"text-{name}-prompt-ids.txt")
        with open(ids_file, "w") as f:
            f.write("".join(w + "\n" for w in want))
        common = ["--weights", model, "--max-new", "8", "--min-len", "8"]
        new_ids = run([args.transfuse, "generate", out, "--prompt-ids-file", ids_file] +
                      common).stdout
        new_ids_file = os.path.join(args.workdir, f"text-{name}-new-ids.txt")
        with open(new_ids_file, "w") as f:
            f.write(new_ids)
        decoded = run([args.transfuse, "tokenize", out, "--decode", "--input",
                       new_ids_file]).stdout
        text = run([args.transfuse, "generate", out, "--prompt-file", prompts] + common).stdout
        same = text == decoded
        print(f"{name} generate --prompt-file: {'equal to' if same else 'DIFFERS from'} the ids' "
              f"text ({text!r} vs {decoded!r})")
        ok &= same
        streamed = run([args.transfuse, "generate", out, "--prompt-file", prompts, "--stream"] +
                       common).stdout
        same = streamed == text
        print(f"{name} generate --stream: {'the same text' if same else 'DIFFERENT text'} "
              f"({streamed!r})")
        ok &= same
        first = [int(x) for x in new_ids.split("\n")[0].split()]
        want_ids = greedy(logits_of, ids_of(picks[0]), 8, eos)
        if want_ids is not None:
            same = first == want_ids
            print(f"{name} generate from text, prompt 0: {'equal to' if same else 'DIFFERS from'}"
                  f" greedy recomputation ({first} vs {want_ids})")
            ok &= same
        # generation_config.json's eos_token_id list ends a continuation at any of
        # its ids: here at the token greedy chooses first, so nothing is generated.
        with open(os.path.join(out, "generation_config.json"), "w") as f:
            json.dump({"eos_token_id": [eos, first[0]]}, f)
        one = os.path.join(args.workdir, f"text-{name}-prompt-0.txt")
        with open(one, "w") as f:
            f.write(want[0] + "\n")
        stopped = run([args.transfuse, "generate", out, "--prompt-ids-file", one, "--weights",
                       model, "--max-new", "8"]).stdout
        os.remove(os.path.join(out, "generation_config.json"))
        fine = stopped == "\n"
        print(f"{name} generation_config.json's eos_token_id list: "
              f"{'stops' if fine else 'DOES NOT stop'} at its second id ({stopped!r})")
        ok &= fine
    # An artifact without a tokenizer takes no text.
    p = run([args.transfuse, "generate", os.path.join(args.workdir, "out-llama-all"), "--prompt",
             "hello", "--max-new", "2"], expect_ok=False)
    fine = p.returncode != 0 and "carries no tokenizer.json" in p.stderr and not p.stdout
    print(f"text without a tokenizer: {'refused' if fine else 'NOT REFUSED'}: {p.stderr.strip()}")
    return ok and fine


def refused(args, what, cmd, expected, out):
    p = run(cmd, expect_ok=False)
    fine = p.returncode != 0 and expected in p.stderr and not os.path.exists(out)
    print(f"{what}: {'refused' if fine else 'NOT REFUSED as expected'}: {p.stderr.strip()}")
    return fine


def bad_directories(args, rng):
    ok = True
    cases = {
        "rope type": (dict(LLAMA, rope_scaling={"rope_type": "yarn", "factor": 4.0}),
                      "key 'rope_scaling': rope_type 'yarn' is not supported"),
        "rope parameters": (dict(LLAMA, rope_scaling=None,
                                 rope_parameters={"rope_type": "yarn", "rope_theta": 1e4,
                                                  "factor": 4.0}),
                            "key 'rope_parameters': rope_type 'yarn' is not supported"),
        "rope theta twice": (dict(LLAMA, rope_scaling=None,
                                  rope_parameters={"rope_type": "default", "rope_theta": 1e6}),
                             "key 'rope_parameters': 'rope_theta' 1000000.00 differs from the "
                             "top-level rope_theta 10000.00"),
        "kv heads": (dict(LLAMA, num_key_value_heads=3),
                     "key 'num_key_value_heads': 3 does not divide num_attention_heads 4"),
        "window": (dict(CONFIGS["mistral"], sliding_window=16),
                   "key 'sliding_window': the window of 16 positions is shorter than the "
                   "compiled maximum length 32"),
        "hidden": (dict(LLAMA, hidden_size=30),
                   "key 'num_attention_heads': hidden_size 30 is not divisible by 4"),
    }
    for what, (cfg, expected) in cases.items():
        model = os.path.join(args.workdir, "bad-" + what.replace(" ", "-"))
        write_dir(model, cfg, {})
        out = model + "-out"
        shutil.rmtree(out, ignore_errors=True)
        ok &= refused(args, what, [args.transfuse, "compile", model, "-o", out,
                                   "--max-seq-len", "32"], expected, out)
    # A missing weight: named when the weights are bound.
    model = os.path.join(args.workdir, "bad-missing")
    weights = llama_weights(LLAMA, rng)
    del weights["model.layers.1.mlp.up_proj.weight"]
    write_dir(model, LLAMA, weights)
    art = os.path.join(args.workdir, "out-llama-all")
    got = os.path.join(args.workdir, "bad-missing.safetensors")
    ok &= refused(args, "missing weight",
                  [args.transfuse, "run", art, "--entry", "forward", "--weights", model,
                   "--inputs", os.path.join(args.workdir, "tokens.safetensors"), "--outputs", got],
                  "layers.1.mlp.up_proj.weight", got)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--transfuse", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    rng = np.random.default_rng(35)
    ok = True
    tokens = rng.integers(0, 50, size=(2, 7)).astype(np.int32)
    in_path = os.path.join(args.workdir, "tokens.safetensors")
    safetensors_io.write(in_path, {"tokens": tokens})
    for name, cfg in CONFIGS.items():
        model = os.path.join(args.workdir, name)
        weights = llama_weights(cfg, rng)
        write_dir(model, cfg, weights)
        want = oracle.llama(cfg, weights, tokens.astype(np.int64))
        for fusion in ("none", "all"):
            out = os.path.join(args.workdir, f"out-{name}-{fusion}")
            run([args.transfuse, "compile", model, "-o", out, "--fusion", fusion,
                 "--max-seq-len", "32"])
            got = os.path.join(out, "got.safetensors")
            run([args.transfuse, "run", out, "--entry", "forward", "--inputs", in_path,
                 "--weights", model, "--outputs", got])
            ok &= check_close(f"{name} compiled, fusion {fusion}",
                              safetensors_io.read(got)["logits"], want, 1e-4)
            if fusion == "none":
                ref = os.path.join(out, "ref.safetensors")
                run([args.transfuse, "run", out, "--backend", "reference", "--entry", "forward",
                     "--f64-outputs", "--inputs", in_path, "--weights", model, "--outputs", ref])
                ok &= check_close(f"{name} reference", safetensors_io.read(ref)["logits"], want,
                                  1e-6)
        ok &= generate_cases(args, name, cfg, model, weights, rng)
        try:
            import torch  # noqa: F401
            ok &= check_close(f"oracle.llama against torch ({name})", want,
                              torch_llama(cfg, weights, tokens), 1e-10)
        except ImportError:
            print("torch is absent: oracle.llama not checked against torch")
    ok &= gpt2_case(args, rng, tokens, in_path)
    ok &= golden_cases(args)
    ok &= bad_directories(args, rng)
    ok &= text_cases(args, rng)
    # --train: the loss and its gradients through RMSNorm, rotary and the
    # repeated K/V heads, fused, against the reference backend.
    p = run([args.transfuse, "compile", os.path.join(args.workdir, "llama"), "-o",
             os.path.join(args.workdir, "train-llama"), "--train", "--fusion", "all", "--verify",
             "--max-batch", "2", "--max-seq-len", "8"], expect_ok=False)
    fine = p.returncode == 0 and "verify @loss_grad" in p.stdout
    print(f"--train: {'verified' if fine else 'FAILED'}\n{p.stdout.strip()}{p.stderr.strip()}")
    ok &= fine
    print("llama_e2e: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
