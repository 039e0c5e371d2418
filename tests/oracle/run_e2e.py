#!/usr/bin/python3
"""End-to-end check: the reference backend against the NumPy oracle, and
every fusion strategy against the unfused graph.

For one model config: `transfuse compile` it (unfused, and with each
strategy of --fusion), draw random weights for every
parameter in manifest.json (with alias copies, ignored buffers, a name prefix
and an absent optional tensor where the model has them), draw token inputs
with trailing padding at several dynamic sizes, run `transfuse run --backend
reference`, run oracle.forward on the same files, and compare logits:
max |ref - oracle| <= 1e-6 * max(1, max |logit|), both in fp64; a fused
graph must match the unfused one within 1e-12 * max(1, max |logit|) (the
fused ops compute the same fp64 sums; only rounding order may differ).

usage: run_e2e.py --transfuse BIN --config CFG.json --workdir DIR [--seed N]
                  [--fusion S1,S2,...]
Exit code 0 on match, 1 on mismatch or error.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402
import safetensors_io  # noqa: E402


def random_weights(manifest, rng, variant):
    """Weights for every parameter; `variant` picks which optional features show."""
    params = {}
    for p in manifest["parameters"]:
        shape = tuple(p["shape"])
        if p["optional"] and variant % 2 == 1:
            continue  # absent optional tensor: the model must use zeros
        if p["init"] == "ones":  # layer norm gains: keep them near 1 but not 1
            params[p["name"]] = 1.0 + 0.2 * rng.standard_normal(shape)
        else:
            params[p["name"]] = 0.5 * rng.standard_normal(shape) / np.sqrt(max(1, shape[-1]))
    for alias, target in manifest["weight_aliases"].items():
        if variant % 2 == 0 and target in params:
            params[alias] = params[target]  # PyTorch saves tied copies
    if manifest["weight_prefixes"] and variant % 2 == 1:
        prefix = manifest["weight_prefixes"][0]
        params = {prefix + k: v for k, v in params.items()}
    for pattern in manifest["ignored_weights"]:
        params[pattern.replace("*", "0")] = np.zeros((2, 2))  # e.g. h.0.attn.bias
    return {k: np.asarray(v, dtype=np.float32) for k, v in params.items()}


def random_tokens(rng, batch, length, vocab, pad_id):
    t = rng.integers(0, vocab, size=(batch, length))
    if pad_id is not None:
        t[t == pad_id] = (pad_id + 1) % vocab
        for b in range(batch):  # trailing padding of a different length per row
            n = (b * length) // (batch + 1)
            if n:
                t[b, length - n:] = pad_id
    return t.astype(np.int32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--transfuse", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fusion", default="", help="comma-separated strategies to check too")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    strategies = ["none"] + [s for s in args.fusion.split(",") if s]
    arts = {}
    for strategy in strategies:
        arts[strategy] = os.path.join(args.workdir, "artifact-" + strategy)
        subprocess.run([args.transfuse, "compile", args.config, "-o", arts[strategy], "--emit",
                        "mlir", "--max-batch", "4", "--fusion", strategy], check=True,
                       stdout=subprocess.DEVNULL)
    art = arts["none"]
    with open(os.path.join(art, "manifest.json")) as f:
        manifest = json.load(f)
    cfg = manifest["config"]
    rng = np.random.default_rng(args.seed)
    failures = 0
    # (batch, source length, target length): several dynamic sizes per compiled model.
    for variant, (batch, src_len, tgt_len) in enumerate([(3, 7, 5), (1, 4, 9), (4, 16, 16)]):
        weights = random_weights(manifest, rng, variant)
        if cfg["architecture"] == "encoder_decoder":
            inputs = {"src_tokens": random_tokens(rng, batch, src_len, cfg["src_vocab_size"], cfg["pad_id"]),
                      "tgt_tokens": random_tokens(rng, batch, tgt_len, cfg["tgt_vocab_size"], cfg["pad_id"])}
        else:
            inputs = {"tokens": random_tokens(rng, batch, tgt_len, cfg["vocab_size"], cfg["pad_id"])}
        wpath = os.path.join(args.workdir, f"weights{variant}.safetensors")
        ipath = os.path.join(args.workdir, f"inputs{variant}.safetensors")
        safetensors_io.write(wpath, weights)
        safetensors_io.write(ipath, inputs)
        want = oracle.forward(cfg, weights, inputs)
        unfused = None
        for strategy in strategies:
            opath = os.path.join(args.workdir, f"outputs{variant}-{strategy}.safetensors")
            subprocess.run([args.transfuse, "run", arts[strategy], "--backend", "reference",
                            "--weights", wpath, "--inputs", ipath, "--outputs", opath,
                            "--f64-outputs"], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            got = safetensors_io.read(opath)["logits"].astype(np.float64)
            scale = max(1.0, float(np.max(np.abs(want))))
            checks = [("oracle", want, 1e-6 * scale)]
            if unfused is not None:
                checks.append(("unfused", unfused, 1e-12 * scale))
            for name, ref, tol in checks:
                err = float(np.max(np.abs(got - ref))) if got.shape == ref.shape else float("inf")
                ok = np.isfinite(got).all() and err <= tol
                failures += not ok
                print(f"{os.path.basename(args.config)} fusion={strategy} B={batch} S={src_len} "
                      f"T={tgt_len}: vs {name} max abs err {err:.3e} (tolerance {tol:.1e}) "
                      f"{'ok' if ok else 'MISMATCH'}")
            if unfused is None:
                unfused = got
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
