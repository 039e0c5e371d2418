#!/usr/bin/python3
"""Transfuse against CTranslate2 on translation decoding, same weights, side by side.

Draws one set of weights for an encoder_decoder config (the PyTorch
translation tutorial's state dict names), writes them as safetensors for
Transfuse and builds a CTranslate2 model from the same arrays with
ctranslate2.specs (float32 and int8). Then, per case
(batch, beam) and precision, interleaved and repeated:
  - `transfuse bench decode MODEL --weights W --json [--dtype int8]`
    (encode + exactly --new-tokens steps per sentence, EOS ignored);
  - CTranslate2's translate_batch with min = max decoding length =
    --new-tokens on the same sources, same threads;
and prints tokens/s (generated tokens of the best hypotheses per second of
the whole request) with each engine's best median, and each precision's
ratio to CTranslate2's (compute_type float32, int8). Before timing, greedy
outputs of both engines on a few sources are compared (EOS allowed): the
same model must give the same tokens.

For batch 1 it also states the bandwidth bound: every step streams the
decoder's weights and the generator once, so tokens/s <= read bandwidth /
those bytes (bandwidth measured here with numpy).

  /work/venv-hf/bin/python bench/compare_decode.py --threads 2 [--vocab 8000]
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
from oracle import sinusoidal  # noqa: E402
from peers import bench_decode_ms, ct2_request_ms, ct2_table, run  # noqa: E402



def parameters(transfuse, model, tmp):
    """(name, shape) of every parameter, from a compiled manifest."""
    out = os.path.join(tmp, "mlir")
    run([transfuse, "compile", model, "--emit", "mlir", "-o", out])
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    return manifest["config"], [(p["name"], p["shape"]) for p in manifest["parameters"]]


def draw_weights(params, seed):
    rng = np.random.default_rng(seed)
    w = {}
    for name, shape in params:
        if ".norm" in name and name.endswith(".weight"):
            w[name] = (1.0 + 0.05 * rng.standard_normal(shape)).astype(np.float32)
        elif len(shape) == 1:
            w[name] = (0.02 * rng.standard_normal(shape)).astype(np.float32)
        else:
            w[name] = (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
    return w


def ct2_model(cfg, w, out_dir, quantization):
    import ctranslate2
    from ctranslate2.specs import common_spec, transformer_spec

    d, h = cfg["d_model"], cfg["num_heads"]
    assert cfg["norm_position"] == "post" and cfg["positional"] == "sinusoidal"
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg["num_encoder_layers"], cfg["num_decoder_layers"]), h, pre_norm=False,
        activation=common_spec.Activation.RELU if cfg["activation"] == "relu"
        else common_spec.Activation.GELU)
    spec.config.layer_norm_epsilon = cfg["layer_norm_eps"]
    src_table = w["src_tok_emb.embedding.weight"]
    tgt_table = src_table if cfg["share_embeddings"] else w["tgt_tok_emb.embedding.weight"]
    pe = sinusoidal(cfg["max_seq_len"], d).astype(np.float32)

    def linear(s, weight, bias):
        s.weight = weight
        s.bias = bias

    def norm(s, prefix):
        s.gamma, s.beta = w[prefix + ".weight"], w[prefix + ".bias"]

    spec.encoder.embeddings[0].weight = src_table
    spec.encoder.position_encodings.encodings = pe
    spec.decoder.embeddings.weight = tgt_table
    spec.decoder.position_encodings.encodings = pe
    for i, layer in enumerate(spec.encoder.layer):
        p = "transformer.encoder.layers.%d." % i
        linear(layer.self_attention.linear[0], w[p + "self_attn.in_proj_weight"],
               w[p + "self_attn.in_proj_bias"])
        linear(layer.self_attention.linear[1], w[p + "self_attn.out_proj.weight"],
               w[p + "self_attn.out_proj.bias"])
        norm(layer.self_attention.layer_norm, p + "norm1")
        linear(layer.ffn.linear_0, w[p + "linear1.weight"], w[p + "linear1.bias"])
        linear(layer.ffn.linear_1, w[p + "linear2.weight"], w[p + "linear2.bias"])
        norm(layer.ffn.layer_norm, p + "norm2")
    for i, layer in enumerate(spec.decoder.layer):
        p = "transformer.decoder.layers.%d." % i
        linear(layer.self_attention.linear[0], w[p + "self_attn.in_proj_weight"],
               w[p + "self_attn.in_proj_bias"])
        linear(layer.self_attention.linear[1], w[p + "self_attn.out_proj.weight"],
               w[p + "self_attn.out_proj.bias"])
        norm(layer.self_attention.layer_norm, p + "norm1")
        cw, cb = w[p + "multihead_attn.in_proj_weight"], w[p + "multihead_attn.in_proj_bias"]
        linear(layer.attention.linear[0], cw[:d], cb[:d])
        linear(layer.attention.linear[1], cw[d:], cb[d:])
        linear(layer.attention.linear[2], w[p + "multihead_attn.out_proj.weight"],
               w[p + "multihead_attn.out_proj.bias"])
        norm(layer.attention.layer_norm, p + "norm2")
        linear(layer.ffn.linear_0, w[p + "linear1.weight"], w[p + "linear1.bias"])
        linear(layer.ffn.linear_1, w[p + "linear2.weight"], w[p + "linear2.bias"])
        norm(layer.ffn.layer_norm, p + "norm3")
    generator = tgt_table if cfg["tie_output"] else w["generator.weight"]
    linear(spec.decoder.projection, generator,
           w.get("generator.bias", np.zeros(generator.shape[0], np.float32)))
    # Vocabularies: the token of id i is its position; the specials are the
    # config's ids (pad 1 is never fed to the decoder).
    specials = {cfg.get("unk_id"): "<unk>", cfg.get("pad_id"): "<blank>",
                cfg["bos_id"]: "<s>", cfg["eos_id"]: "</s>"}
    for vocab, size in ((spec.register_source_vocabulary, cfg["src_vocab_size"]),
                        (spec.register_target_vocabulary, cfg["tgt_vocab_size"])):
        vocab([specials.get(i, "w%d" % i) for i in range(size)])

    class FromSpec(ctranslate2.converters.Converter):
        def _load(self):
            return spec

    FromSpec().convert(out_dir, quantization=quantization, force=True)
    return out_dir


def read_bandwidth():
    """GB/s of a matrix-vector product over a 1 GiB float32 matrix (BLAS sgemv,
    its threads): bandwidth-bound, as a decode step at batch 1 is. Best of 3."""
    m = np.ones((1 << 14, 1 << 14), dtype=np.float32)
    x = np.ones(1 << 14, dtype=np.float32)
    best = 1e9
    for _ in range(3):
        t = time.perf_counter()
        m @ x
        best = min(best, time.perf_counter() - t)
    return m.nbytes / best / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=os.path.join(ROOT, "models", "transformer-base.json"))
    p.add_argument("--transfuse", default=os.path.join(ROOT, "build", "tools", "transfuse"))
    p.add_argument("--vocab", type=int, default=0,
                   help="source and target vocabulary sizes (default: the config's)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--src-len", type=int, default=24)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--cases", default="1x1,8x1,8x4", help="BATCHxBEAM, comma-separated")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--min-seconds", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    import ctranslate2

    tmp = tempfile.mkdtemp(prefix="compare-decode-")
    if args.vocab:
        with open(args.model) as f:
            config = json.load(f)
        config["src_vocab_size"] = config["tgt_vocab_size"] = args.vocab
        args.model = os.path.join(tmp, "model.json")
        with open(args.model, "w") as f:
            json.dump(config, f)
    cfg, params = parameters(args.transfuse, args.model, tmp)
    w = draw_weights(params, args.seed)
    weights = os.path.join(tmp, "weights.safetensors")
    safetensors_io.write(weights, w)
    ct2 = {"float32": ct2_model(cfg, w, os.path.join(tmp, "ct2-f32"), None),
           "int8": ct2_model(cfg, w, os.path.join(tmp, "ct2-int8"), "int8")}
    cases = [tuple(int(x) for x in c.split("x")) for c in args.cases.split(",")]
    max_batch = max(b for b, _ in cases)
    max_beam = max(k for _, k in cases)

    # Greedy outputs agree (the same model): a few sources, EOS allowed.
    check_len = min(20, cfg["max_seq_len"] - 2)
    rng = np.random.default_rng(args.seed + 1)
    words = lambda n: [int(x) for x in rng.integers(4, cfg["src_vocab_size"], n)]  # noqa: E731
    sources = [words(args.src_len) for _ in range(max_batch)]
    art = os.path.join(tmp, "artifact")
    run([args.transfuse, "compile", args.model, "--fusion", "all", "--max-batch", "4",
         "--max-beam", "1", "-o", art])
    src_file = os.path.join(tmp, "src.txt")
    with open(src_file, "w") as f:
        f.write("".join(" ".join(map(str, s)) + "\n" for s in sources[:4]))
    ours = [list(map(int, line.split())) for line in
            run([args.transfuse, "translate", art, "--weights", weights, "--input", src_file,
                 "--max-len", str(check_len), "--threads", str(args.threads)]).splitlines()]
    translator = ctranslate2.Translator(ct2["float32"], device="cpu", intra_threads=args.threads)
    tok = lambda ids: ["<s>"] + ["w%d" % i for i in ids] + ["</s>"]  # noqa: E731
    theirs = [[int(t[1:]) if t.startswith("w") else t for t in r.hypotheses[0]]
              for r in translator.translate_batch([tok(s) for s in sources[:4]],
                                                  beam_size=1, max_decoding_length=check_len)]
    same = sum(a == b for a, b in zip(ours, theirs))
    print("greedy outputs of Transfuse and CTranslate2 float32 agree on %d of %d sources" %
          (same, len(ours)))
    if same != len(ours):
        for a, b in zip(ours, theirs):
            print("  transfuse:   %s\n  ctranslate2: %s" % (a, b))

    def ct2_run(kind, batch, beam):
        return ct2_request_ms(ct2[kind], kind, args.threads, [tok(s) for s in sources[:batch]],
                              beam, args.new_tokens, args.min_seconds)

    def ours_run(kind, batch, beam):
        return bench_decode_ms(args.transfuse, args.model, weights, args.threads,
                               args.min_seconds, batch=batch, beam=beam, src_len=args.src_len,
                               new_tokens=args.new_tokens,
                               dtype="int8" if kind == "int8" else "f32")

    bw = read_bandwidth()
    d, v = cfg["d_model"], cfg["tgt_vocab_size"]
    per_layer = 4 * d * d + 2 * d + 2 * d * d + 2 * d + 2 * d * cfg["d_ff"]  # self, cross q/o, ffn
    step_bytes = 4 * (cfg["num_decoder_layers"] * per_layer + v * d)
    print("read bandwidth %.1f GB/s (sgemv of 1 GiB); a step streams %.0f MB of weights: batch 1 is "
          "bounded by %.0f tokens/s when they come from memory (not when they fit in the "
          "last-level cache: see lscpu)" % (bw, step_bytes / 1e6, bw * 1e9 / step_bytes))
    ct2_table(cases, args.repeats, args.new_tokens, ours_run, ct2_run)

if __name__ == "__main__":
    main()
