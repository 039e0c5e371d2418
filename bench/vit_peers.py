#!/usr/bin/env python3
"""Transfuse's ViT image classifier beside its peers: PyTorch eager/SDPA and ONNX Runtime, CPU, fp32.

Times a ViT-Base/16 ViTForImageClassification at 224x224 in Transfuse (`transfuse bench model
DIR --entry classify`, given --transfuse) and in its peers, interleaved in one run. Needs the
benchmark venv of bench/bert_peers.py (torch, transformers, onnx, onnxscript, onnxruntime).

Usage (from the repository root):
  /work/venv-hf/bin/python bench/vit_peers.py make-model /tmp/vit-base
  /work/venv-hf/bin/python bench/vit_peers.py check /tmp/vit-base --batch 2 --transfuse build/tools/transfuse
  /work/venv-hf/bin/python bench/vit_peers.py time /tmp/vit-base --batch 8 --threads 2 \\
      --transfuse build/tools/transfuse [--min-seconds 3] [--rounds 3] [--json]

make-model writes a randomly initialised ViTForImageClassification (google/vit-base-patch16-224's
shapes: hidden 768, 12 layers, 12 heads, MLP 3072, 1000 labels) with save_pretrained, and
ViTImageProcessor's preprocessor_config.json. No hub access.

What is timed, per call: pixel_values [B, 3, 224, 224] (fixed random) -> logits [B, 1000], fp32.
  torch-eager / torch-sdpa: ViTForImageClassification.from_pretrained(DIR, attn_implementation=
      eager|sdpa), torch.set_num_threads(T), set_num_interop_threads(1), inference_mode.
  ort: exported with the TorchScript exporter (torch.onnx.export, dynamo=False, opset 17, dynamic
      batch; DIR/onnx/model.onnx), fused by onnxruntime.transformers.optimizer (model_type "vit",
      opt_level 1; DIR/onnx/model-opt.onnx), an InferenceSession (CPU, intra_op_num_threads=T,
      inter_op_num_threads=1, ORT_ENABLE_ALL, sequential).
  transfuse: `transfuse bench model DIR --entry classify --fusion all` (random pixels: the same
      work), its median and min per round, the GFLOP it counts per call and their rate (the
      fraction of the FMA peak: against `transfuse bench gemm`'s probe run beside it).
Protocol: as bench/bert_peers.py (alternating rounds, 3 warm-up calls, at least 5 calls and
--min-seconds per round, the best round's median).
"""
import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers
from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_peers import measure, ort_session  # noqa: E402

logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()

FUSED_OPS = ["Attention", "MultiHeadAttention", "SkipLayerNormalization", "LayerNormalization",
             "BiasGelu", "Gelu", "FastGelu"]


def make_model(args):
    config = ViTConfig(hidden_size=768, num_hidden_layers=args.layers, num_attention_heads=12,
                       intermediate_size=3072, image_size=224, patch_size=16, num_labels=1000)
    torch.manual_seed(args.seed)
    model = ViTForImageClassification(config).eval()
    model.save_pretrained(args.dir, safe_serialization=True)
    ViTImageProcessor(size={"height": 224, "width": 224}).save_pretrained(args.dir)
    print(f"wrote {args.dir}: {sum(p.numel() for p in model.parameters())} parameters")


def pixels(batch, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (batch, 3, 224, 224)).astype(np.float32)


def torch_peer(model_dir, attn, x):
    model = ViTForImageClassification.from_pretrained(model_dir, attn_implementation=attn).eval()
    inputs = torch.from_numpy(x)

    def call():
        with torch.inference_mode():
            return model(pixel_values=inputs).logits.numpy()
    return call


def export_onnx(model_dir, config):
    onnx_dir = Path(model_dir) / "onnx"
    raw, fused = onnx_dir / "model.onnx", onnx_dir / "model-opt.onnx"
    if not raw.exists():
        onnx_dir.mkdir(exist_ok=True)
        model = ViTForImageClassification.from_pretrained(model_dir, attn_implementation="eager").eval()
        torch.onnx.export(model, (torch.from_numpy(pixels(2)),), str(raw),
                          input_names=["pixel_values"], output_names=["logits"],
                          dynamic_axes={"pixel_values": {0: "batch"}, "logits": {0: "batch"}},
                          opset_version=17, do_constant_folding=True, dynamo=False)
    from onnxruntime.transformers import optimizer
    opt = optimizer.optimize_model(str(raw), model_type="vit", num_heads=config.num_attention_heads,
                                   hidden_size=config.hidden_size, opt_level=1)
    opt.save_model_to_file(str(fused))
    stats = opt.get_fused_operator_statistics()
    return fused, {op: stats.get(op, 0) for op in FUSED_OPS if stats.get(op, 0)}


def ort_peer(model_dir, config, x, threads):
    path, stats = export_onnx(model_dir, config)
    session = ort_session(path, threads)
    return (lambda: session.run(["logits"], {"pixel_values": x})[0]), stats


def transfuse_peer(args):
    """A round of `transfuse bench model --entry classify`: (median ms, min ms, GFLOP/s)."""
    def round_():
        out = subprocess.run([args.transfuse, "bench", "model", args.dir, "--entry", "classify",
                              "--fusion", "all", "--batch", str(args.batch), "--threads",
                              str(args.threads), "--min-seconds", str(args.min_seconds), "--json"],
                             capture_output=True, text=True, check=True).stdout
        row = json.loads(out.strip().splitlines()[-1])["rows"][0]
        return row["median_ms"], row["min_ms"], row["gflops"] * row["median_ms"] / 1e3, None
    return round_


def transfuse_logits(args, x):
    from safetensors.numpy import load_file, save_file
    with tempfile.TemporaryDirectory() as tmp:
        save_file({"pixel_values": x}, os.path.join(tmp, "in.safetensors"))
        subprocess.run([args.transfuse, "run", args.dir, "--entry", "classify", "--inputs",
                        os.path.join(tmp, "in.safetensors"), "--outputs",
                        os.path.join(tmp, "out.safetensors"), "--threads", str(args.threads)],
                       check=True, capture_output=True, env=dict(os.environ, XDG_CACHE_HOME=tmp))
        return load_file(os.path.join(tmp, "out.safetensors"))["logits"]


def make_peers(args):
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    config = ViTConfig.from_pretrained(args.dir)
    x = pixels(args.batch)
    peers = {"torch-eager": torch_peer(args.dir, "eager", x),
             "torch-sdpa": torch_peer(args.dir, "sdpa", x)}
    peers["ort"], stats = ort_peer(args.dir, config, x, args.threads)
    return peers, stats, x


def time_peers(args):
    peers, stats, _ = make_peers(args)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "onnxruntime": ort.__version__, "onnx": onnx.__version__}
    rounds = {name: (lambda c=call: measure(c, args.min_seconds) + (None, None))
              for name, call in peers.items()}
    if args.transfuse:
        rounds = {"transfuse": transfuse_peer(args), **rounds}
    best = {}
    for _ in range(args.rounds):
        for name, round_ in rounds.items():
            result = round_()
            if name not in best or result[0] < best[name][0]:
                best[name] = result
    rows = [{"peer": name, "batch": args.batch, "threads": args.threads,
             "median_ms": round(r[0], 3), "min_ms": round(r[1], 3),
             "images_per_s": round(args.batch * 1e3 / r[0], 2), "versions": versions}
            for name, r in best.items()]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    print(f"ViT-Base/16 224x224, batch {args.batch}, threads {args.threads}, fp32, best median of "
          f"{args.rounds} interleaved rounds; " + " ".join(f"{k} {v}" for k, v in versions.items()))
    print("ort fused operators: " + ", ".join(f"{k} {v}" for k, v in stats.items()))
    ours = best.get("transfuse")
    if ours:  # the fraction of the peak: against `transfuse bench gemm`'s probe
        print(f"transfuse: {ours[2]:.1f} GFLOP per call, {ours[2] * 1e3 / ours[0]:.1f} GFLOP/s "
              f"at its median")
    print(f"{'peer':<12} {'median ms':>10} {'min ms':>10} {'images/s':>10}"
          + ("  transfuse's speed-up" if ours else ""))
    for row in rows:
        print(f"{row['peer']:<12} {row['median_ms']:>10.2f} {row['min_ms']:>10.2f} "
              f"{row['images_per_s']:>10.2f}" + (f"  {row['median_ms'] / ours[0]:.2f}x" if ours else ""))


def check(args):
    peers, stats, x = make_peers(args)
    out = {name: call() for name, call in peers.items()}
    if args.transfuse:
        out["transfuse"] = transfuse_logits(args, x)
    print(f"ort fused operators: {stats}")
    ref = out["torch-eager"]
    for name, logits in out.items():
        print(f"{name:<12} shape {logits.shape}  max|x - torch-eager| = "
              f"{float(np.abs(logits - ref).max()):.3g}  top-1 agrees: "
              f"{bool((logits.argmax(1) == ref.argmax(1)).all())}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make-model", help="write a random ViT-Base/16 classifier")
    mk.add_argument("dir")
    mk.add_argument("--layers", type=int, default=12)
    mk.add_argument("--seed", type=int, default=0)
    tm = sub.add_parser("time", help="time the peers")
    ck = sub.add_parser("check", help="max abs difference between the peers' logits")
    for p, batch in [(tm, 8), (ck, 2)]:
        p.add_argument("dir")
        p.add_argument("--batch", type=int, default=batch)
        p.add_argument("--threads", type=int, default=os.cpu_count())
        p.add_argument("--transfuse", help="the transfuse binary: time (check) it beside the peers")
    tm.add_argument("--min-seconds", type=float, default=3.0)
    tm.add_argument("--rounds", type=int, default=3)
    tm.add_argument("--json", action="store_true")
    args = ap.parse_args()
    {"make-model": make_model, "time": time_peers, "check": check}[args.cmd](args)


if __name__ == "__main__":
    main()
