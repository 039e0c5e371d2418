#!/usr/bin/python3
"""Transfuse against PyTorch, end to end, side by side in one run.

Measures, on this machine and thread count:
  1. the FMA peak per thread (`transfuse bench gemm --json` probes it);
  2. `transfuse bench model MODEL --json` for the given fusion strategies
     (each compiled for the CPU and timed);
  3. bench/torch_e2e.py (the PyTorch tutorial's Seq2SeqTransformer, or GPT-2,
     inference mode, same threads) under every Python given with --python that
     has torch, e.g. a venv with PyPI's torch and Debian's python3-torch, and,
     under every Python given with --ort-python, the same model exported to
     ONNX and run by ONNX Runtime (torch_e2e.py --runtime onnxruntime). Each
     peer is timed before and after Transfuse; the faster median counts.
With --dtype bf16, Transfuse builds with --dtype bf16 (docs/bf16.md) and the
PyTorch peers convert the model with .to(torch.bfloat16) (ONNX Runtime
peers are left out). It prints one table: median and min ms, GFLOP/s, the fraction of the
machine's FMA peak (threads x per-thread peak), and Transfuse's best strategy's
speed-up over each peer.

  /usr/bin/python3 bench/compare_e2e.py --model models/transformer-base.json \\
      --batch 8 --src-len 64 --tgt-len 64 --threads 2 \\
      --python /work/venv-torch/bin/python --python /usr/bin/python3 \\
      --ort-python /work/venv-ort/bin/python
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_json(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr or r.stdout).strip()[-400:]
    return json.loads(r.stdout.strip().splitlines()[-1]), None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=os.path.join(ROOT, "models", "transformer-base.json"))
    p.add_argument("--transfuse", default=os.path.join(ROOT, "build", "tools", "transfuse"))
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--src-len", type=int, default=64)
    p.add_argument("--tgt-len", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--fusion", default="none,all")
    p.add_argument("--min-seconds", type=float, default=3.0)
    p.add_argument("--iters", type=int, default=10, help="PyTorch timed forwards")
    p.add_argument("--python", action="append", default=None,
                   help="a Python with torch (repeatable; default /usr/bin/python3)")
    p.add_argument("--ort-python", action="append", default=[],
                   help="a Python with torch and onnxruntime (repeatable; default none)")
    p.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    args = p.parse_args()
    if args.dtype == "bf16":
        args.ort_python = []
    pythons = args.python or ["/usr/bin/python3"]
    peers = [(py, "pytorch") for py in pythons] + [(py, "onnxruntime") for py in args.ort_python]

    peak, err = run_json([args.transfuse, "bench", "gemm", "--m", "64", "--n", "64", "--k", "64",
                          "--min-seconds", "0.2", "--json"])
    if err:
        sys.exit(f"compare_e2e: FMA probe failed: {err}")
    peak_total = peak["peak_gflops_per_thread"] * args.threads

    sizes = ["--batch", str(args.batch), "--tgt-len", str(args.tgt_len)]
    decoder_only = json.load(open(args.model))["architecture"] == "decoder_only"
    if not decoder_only:
        sizes += ["--src-len", str(args.src_len)]
    torch_cmd = ["bench/torch_e2e.py", "--model", args.model, "--threads", str(args.threads),
                 "--warmup", "3", "--iters", str(args.iters), "--dtype", args.dtype, "--json"] + sizes

    def peer_runs():
        out = {}
        for py, runtime in peers:
            res, e = run_json([py, os.path.join(ROOT, torch_cmd[0])] + torch_cmd[1:] +
                              ["--runtime", runtime])
            out[(py, runtime)] = res if res else e
        return out

    before = peer_runs()
    ours, err = run_json([args.transfuse, "bench", "model", args.model, "--fusion", args.fusion,
                          "--threads", str(args.threads), "--min-seconds", str(args.min_seconds),
                          "--dtype", args.dtype, "--json"] + sizes)
    if err:
        sys.exit(f"compare_e2e: transfuse bench model failed: {err}")
    after = peer_runs()

    print(f"{os.path.basename(args.model)}: B={args.batch}"
          + ("" if decoder_only else f" S={args.src_len}") + f" T={args.tgt_len}, "
          f"{args.threads} thread(s), {args.dtype}, FMA peak {peak['peak_gflops_per_thread']:.1f} GFLOP/s/thread "
          f"({peak_total:.0f} total), {ours['rows'][0]['gflop']:.2f} GFLOP per forward")
    print(f"{'system':44} {'median ms':>10} {'min ms':>9} {'GFLOP/s':>8} {'% peak':>7}")
    best = None
    for row in ours["rows"]:
        gflops = row["gflop"] / (row["median_ms"] / 1e3)
        print(f"{'transfuse ' + row['strategy']:44} {row['median_ms']:10.1f} {row['min_ms']:9.1f} "
              f"{gflops:8.1f} {100 * gflops / peak_total:6.1f}%")
        if best is None or row["median_ms"] < best["median_ms"]:
            best = row
    for key in peers:
        py, runtime = key
        runs = [r for r in (before[key], after[key]) if isinstance(r, dict)]
        if not runs:
            print(f"{runtime + ' (' + py + ')':44} unavailable: {before[key]}")
            continue
        r = min(runs, key=lambda x: x["median_ms"])
        label = f"{runtime} {r.get('version', r['torch_version'])} ({py})"
        print(f"{label[:44]:44} {r['median_ms']:10.1f} {r['min_ms']:9.1f} {r['gflops']:8.1f} "
              f"{100 * r['gflops'] / peak_total:6.1f}%   transfuse {best['strategy']} is "
              f"{r['median_ms'] / best['median_ms']:.2f}x faster")


if __name__ == "__main__":
    main()
