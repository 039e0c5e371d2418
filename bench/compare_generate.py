#!/usr/bin/python3
"""Transfuse against Hugging Face transformers' generate on GPT-2 or Llama, same weights.

Builds a GPT2LMHeadModel from the config (random weights, seeded), or with
--llama a LlamaForCausalLM of about 125M parameters (12 layers, hidden 768,
12 heads over 4 K/V heads, intermediate 2048, vocabulary 32000) saved as a
Hugging Face directory, saves its state dict as safetensors (Hugging Face
names, which Transfuse binds),
checks that greedy generation agrees on a short run (EOS allowed), then
times, interleaved and repeated, `transfuse bench decode MODEL --weights W`
(prefill of a --prompt-len prompt, then exactly --new-tokens steps) and
`model.generate(..., max_new_tokens = min_new_tokens = N, do_sample=False,
use_cache=True)` on the same prompt and threads (torch.set_num_threads), and
prints tokens/s (new tokens per second of the whole request, prefill
included) with each engine's best median, and the bandwidth bound: every
step streams all weights once.

  /work/venv-hf/bin/python bench/compare_generate.py --threads 2
  /work/venv-hf/bin/python bench/compare_generate.py --llama --batch 8 --threads 2

--batch B generates B prompts of --prompt-len at once (tokens/s counts all
B·N new tokens). --int8 also times `bench decode --dtype int8` and states
its bound (a byte per weight).
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
import safetensors_io  # noqa: E402
from peers import bench_decode_ms, median_ms, run  # noqa: E402



def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=os.path.join(ROOT, "models", "gpt2-small.json"))
    p.add_argument("--transfuse", default=os.path.join(ROOT, "build", "tools", "transfuse"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--min-seconds", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--llama", action="store_true", help="a ~125M LlamaForCausalLM directory")
    p.add_argument("--int8", action="store_true",
                   help="also time Transfuse with --dtype int8 (docs/int8.md)")
    args = p.parse_args()
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    tmp = tempfile.mkdtemp(prefix="compare-generate-")
    if args.llama:
        hf = LlamaForCausalLM(LlamaConfig(
            vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
            num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=512,
            bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)).eval()
        args.model = os.path.join(tmp, "llama")
        hf.save_pretrained(args.model, safe_serialization=True)
        weights = args.model
        cfg = {"vocab_size": 32000, "eos_id": 2}
    else:
        with open(args.model) as f:
            cfg = json.load(f)
        hf = GPT2LMHeadModel(GPT2Config(
            vocab_size=cfg["vocab_size"], n_positions=cfg["max_seq_len"], n_embd=cfg["d_model"],
            n_layer=cfg["num_layers"], n_head=cfg["num_heads"], n_inner=cfg.get("d_ff"),
            activation_function="gelu_new", layer_norm_epsilon=cfg.get("layer_norm_eps", 1e-5),
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)).eval()
        weights = os.path.join(tmp, "gpt2.safetensors")
        safetensors_io.write(weights, {k: v.detach().numpy() for k, v in hf.state_dict().items()})

    rng = np.random.default_rng(args.seed + 1)
    prompts = rng.integers(0, cfg["vocab_size"] - 1, (args.batch, args.prompt_len))
    prompt = [int(x) for x in prompts[0]]
    eos = cfg.get("eos_id", 50256)
    ids = torch.tensor(prompts)

    # Greedy agrees (the same model): 16 new tokens from a 16-token prompt.
    art = os.path.join(tmp, "artifact")
    run([args.transfuse, "compile", args.model, "--fusion", "all", "--max-batch", "1",
         "--max-beam", "1", "--max-seq-len", "64", "-o", art])
    ours = [int(x) for x in run([args.transfuse, "generate", art, "--weights", weights,
                                 "--prompt-ids", " ".join(map(str, prompt[:16])),
                                 "--max-new", "16", "--threads", str(args.threads)]).split()]
    with torch.inference_mode():
        theirs = hf.generate(ids[:1, :16], max_new_tokens=16, do_sample=False, use_cache=True,
                             pad_token_id=eos, eos_token_id=eos)[0, 16:].tolist()
    if eos in theirs:
        theirs = theirs[:theirs.index(eos)]
    print("greedy: Transfuse and transformers agree on %d of %d new tokens%s" %
          (sum(a == b for a, b in zip(ours, theirs)), max(len(ours), len(theirs)),
           "" if ours == theirs else "\n  transfuse:    %s\n  transformers: %s" % (ours, theirs)))

    def hf_run():
        def once():
            with torch.inference_mode():
                out = hf.generate(ids, max_new_tokens=args.new_tokens,
                                  min_new_tokens=args.new_tokens, do_sample=False,
                                  use_cache=True, pad_token_id=eos)
            assert out.shape == (args.batch, args.prompt_len + args.new_tokens)
        return median_ms(once, args.min_seconds)

    def ours_run(dtype="f32", new_tokens=args.new_tokens):
        return bench_decode_ms(args.transfuse, args.model, weights, args.threads,
                               args.min_seconds, batch=args.batch, src_len=args.prompt_len,
                               new_tokens=new_tokens, dtype=dtype)

    best = {"transfuse": 1e18, "transformers": 1e18}
    if args.int8:
        best["transfuse int8"] = best["int8 prefill"] = 1e18
    for _ in range(args.repeats):
        best["transfuse"] = min(best["transfuse"], ours_run())
        if args.int8:
            best["transfuse int8"] = min(best["transfuse int8"], ours_run("int8"))
            # The prompt and one token: the rest of the request is decode steps.
            best["int8 prefill"] = min(best["int8 prefill"], ours_run("int8", 1))
        best["transformers"] = min(best["transformers"], hf_run())
    tps = {k: args.batch * args.new_tokens / (ms / 1e3) for k, ms in best.items()
           if k != "int8 prefill"}
    # Parameters once each (the tied lm_head is wte); a step streams all but
    # an untied embedding table, of which it gathers one row per sequence.
    params = sum(p.numel() for p in hf.parameters())
    streamed = params
    if args.llama:
        streamed -= hf.model.embed_tokens.weight.numel()
    # The probe: the better of a 1 GiB torch.sum and torch.mv (either may
    # fall short of the memory system on a given host).
    m = torch.ones(1 << 14, 1 << 14)
    x = torch.ones(1 << 14)
    bw = {"sum": 0.0, "mv": 0.0}
    for _ in range(3):
        for name, f in (("sum", lambda: m.sum()), ("mv", lambda: torch.mv(m, x))):
            t0 = time.perf_counter()
            f()
            bw[name] = max(bw[name], m.numel() * 4 / (time.perf_counter() - t0) / 1e9)
    probe = max(bw, key=bw.get)
    print("%s (%s, %.0fM parameters), batch %d, prompt %d, %d new tokens, %d threads, torch %s, "
          "transformers %s" %
          ("Llama" if args.llama else "GPT-2", os.path.basename(args.model), params / 1e6,
           args.batch, args.prompt_len, args.new_tokens, args.threads, torch.__version__,
           __import__("transformers").__version__))
    print("transfuse     %8.2f tokens/s (request %.0f ms)" % (tps["transfuse"], best["transfuse"]))
    print("transformers  %8.2f tokens/s (request %.0f ms)" % (tps["transformers"], best["transformers"]))
    print("ratio         %8.2fx" % (tps["transfuse"] / tps["transformers"]))
    print("bandwidth bound: %.0f MB of weights per step at %.1f GB/s (torch.%s of 1 GiB; sum %.1f, "
          "mv %.1f) = %.0f tokens/s per sequence" %
          (streamed * 4 / 1e6, bw[probe], probe, bw["sum"], bw["mv"],
           bw[probe] * 1e9 / (streamed * 4)))
    if args.int8:
        # int8 streams a byte per weight (and two floats per column: scale
        # and compensation, under 1% here). Its bound is read at that size:
        # torch.sum over as many bytes, warm (in the last-level cache where
        # they fit, as the weights then are).
        small = torch.ones(streamed // 4)
        small.sum()
        bw8 = 0.0
        for _ in range(20):
            t0 = time.perf_counter()
            small.sum()
            bw8 = max(bw8, small.numel() * 4 / (time.perf_counter() - t0) / 1e9)
        bound = bw8 * 1e9 / streamed
        steps = (args.new_tokens - 1) / ((best["transfuse int8"] - best["int8 prefill"]) / 1e3)
        print("transfuse int8 %7.2f tokens/s (request %.0f ms): %.2fx float32; %.0f MB of int8 "
              "weights per step at %.1f GB/s (torch.sum of as many bytes) = %.0f tokens/s per "
              "sequence: %.0f%% of it; the decode steps alone (the request less prefill and its "
              "token, %.0f ms) %.0f tokens/s: %.0f%%" %
              (tps["transfuse int8"], best["transfuse int8"],
               tps["transfuse int8"] / tps["transfuse"], streamed / 1e6, bw8, bound,
               100 * tps["transfuse int8"] / args.batch / bound, best["int8 prefill"],
               steps * args.batch, 100 * steps / bound))

if __name__ == "__main__":
    main()
