#!/usr/bin/env python3
"""Data-parallel training on one machine: the Multi30k model (scripts/train-multi30k.sh's config
and flags) trained by 2 MPI ranks of 1 thread each against 1 process of 2 threads, and the same
2-shard run in one process, which the ranks must equal bit for bit.

Usage (from the repository root, after `bash scripts/build.sh`):
  python3 bench/distributed_train.py [--steps 60] [--rounds 2] [--data ../shared/data/multi30k]
      [--transfuse build/tools/transfuse] [--workdir /tmp/transfuse-dist-bench] [--json]

Runs, interleaved per round, each from raw text (tokenizer and compile included in its wall
time, not in its rate):
  1 rank x 2 threads:   transfuse train ... --threads 2
  --shards 2 (1 proc):  transfuse train ... --threads 2 --shards 2
  2 ranks x 1 thread:   mpirun -np 2 transfuse train ... --threads 1
Rates are tokens/s of the steps after the first 5 (the sum of their tokens over the sum of their
seconds, from --log-json), best round; reduce is the median per-step time the ranks spend
summing gradients (reduce_s). The ranks' final weights and Adam moments are compared with the
one-process 2-shard run's (cmp). From the gradient bytes and the measured reduction, the
bandwidth the sum achieved on loopback and, on paper, its time at 8 and 64 nodes on a 10 Gb/s
network (reduce-scatter + all-gather: each node sends and receives 2 (N-1)/N of the gradients).
"""
import argparse
import filecmp
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(args, name, ranks, threads, shards, steps):
    out = os.path.join(args.workdir, name)
    shutil.rmtree(out, ignore_errors=True)
    d = args.data
    argv = [args.transfuse, "train", os.path.join(ROOT, "models", "multi30k-en-de.json"),
            "--src-train", f"{d}/train.en.gz", "--tgt-train", f"{d}/train.de.gz",
            "--tokenizer", "sentencepiece", "--vocab-size", "8000", "--batch-tokens", "3000",
            "--warmup", "400", "--lr-factor", "0.4", "--label-smoothing", "0.1", "--seed", "1",
            "--steps", str(steps), "--threads", str(threads), "--checkpoint-dir", out,
            "--no-progress", "--log-json", out + ".jsonl"]
    if shards > 1:
        argv += ["--shards", str(shards)]
    if ranks > 1:
        argv = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none", *argv]
    start = time.time()
    p = subprocess.run(argv, capture_output=True, text=True, env=ENV)
    wall = time.time() - start
    if p.returncode != 0:
        sys.exit(f"{name} failed:\n{p.stderr[-3000:]}")
    with open(out + ".jsonl") as f:
        rows = [json.loads(line) for line in f if '"loss"' in line]
    timed = rows[5:]
    seconds = sum(r["tokens"] / r["tokens_per_s"] for r in timed)
    return {"run": name, "tokens_per_s": sum(r["tokens"] for r in timed) / seconds,
            "step_s": seconds / len(timed), "wall_s": wall,
            "reduce_s": statistics.median([r["reduce_s"] for r in timed]) if ranks > 1 else 0.0,
            "dir": out, "steps": [(r["loss"], r["grad_norm"]) for r in rows]}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "multi30k"))
    p.add_argument("--transfuse", default=os.path.join(ROOT, "build", "tools", "transfuse"))
    p.add_argument("--workdir", default="/tmp/transfuse-dist-bench")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    configs = [("1 rank x 2 threads", 1, 2, 1), ("--shards 2, 1 process x 2 threads", 1, 2, 2),
               ("2 ranks x 1 thread", 2, 1, 1)]
    best = {}
    for _ in range(args.rounds):
        for name, ranks, threads, shards in configs:
            r = run(args, f"r{ranks}t{threads}s{shards}", ranks, threads, shards, args.steps)
            r["name"] = name
            if name not in best or r["tokens_per_s"] > best[name]["tokens_per_s"]:
                best[name] = r
    one, sharded, ranks = (best[c[0]] for c in configs)
    step = f"step-{args.steps:08d}"
    same = sharded["steps"] == ranks["steps"] and all(
        filecmp.cmp(os.path.join(sharded["dir"], step, f), os.path.join(ranks["dir"], step, f),
                    shallow=False) for f in ("model.safetensors", "optimizer.safetensors"))
    grad_bytes = os.path.getsize(os.path.join(ranks["dir"], step, "model.safetensors"))
    moved = 2 * (2 - 1) / 2 * grad_bytes  # per rank, 2 ranks
    loopback = moved / ranks["reduce_s"]
    compute = ranks["step_s"] - ranks["reduce_s"]
    projection = []
    for nodes in (8, 64):
        t = 2 * (nodes - 1) / nodes * grad_bytes / 1.25e9
        projection.append({"nodes": nodes, "reduce_s": t, "step_s": compute + t,
                           "efficiency": compute / (compute + t)})
    result = {"rows": [{k: v for k, v in r.items() if k not in ("steps", "dir")}
                       for r in (one, sharded, ranks)],
              "bit_equal": same, "gradient_bytes": grad_bytes,
              "loopback_gb_per_s": loopback / 1e9, "projection_10gbps": projection}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"Multi30k model, {args.steps} steps from raw text, best of {args.rounds} "
          f"interleaved rounds")
    print(f"{'run':<36} {'tokens/s':>9} {'step s':>7} {'reduce s':>9} {'wall s':>7}")
    for r in (one, sharded, ranks):
        print(f"{r['name']:<36} {r['tokens_per_s']:9.0f} {r['step_s']:7.3f} "
              f"{r['reduce_s']:9.4f} {r['wall_s']:7.1f}")
    print(f"2 ranks vs --shards 2 in one process: "
          f"{'bit for bit equal' if same else 'DIFFERENT'} (losses, grad norms, weights, moments)")
    print(f"gradients {grad_bytes / 1e6:.1f} MB; reduction {ranks['reduce_s'] * 1e3:.1f} ms per "
          f"step = {100 * ranks['reduce_s'] / ranks['step_s']:.1f}% of a step; loopback "
          f"{loopback / 1e9:.2f} GB/s per rank")
    for pr in projection:
        print(f"on paper, {pr['nodes']} nodes at 10 Gb/s, this shard size per node: reduce "
              f"{pr['reduce_s'] * 1e3:.0f} ms, step {pr['step_s']:.3f} s, "
              f"{100 * pr['efficiency']:.0f}% of it computing")


if __name__ == "__main__":
    main()
