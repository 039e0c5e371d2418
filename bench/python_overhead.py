#!/usr/bin/env python3
"""What a call from Python costs over the C ABI: Model.run on a tiny model at batch 1, beside the
same entry point called through the C ABI in a C++ loop, in one process.

Usage (from the repository root, after `bash scripts/build.sh`):
  PYTHONPATH=build/python ~/.cache/transfuse/python-venv/bin/python bench/python_overhead.py \\
      [--config models/tiny-encoder-decoder.json] [--len 8] [--rounds 15] [--calls 2000] [--json]

The model is compiled once (fusion all, max_batch 1, one thread). Per round, interleaved:
  c-abi:         the binding's C++ loop (Model._native._time_runs): `calls` runs of the entry
                 through the runtime's C ABI on inputs read once and outputs allocated once;
  numpy-int32:   `calls` of model.run("forward", src_tokens=..., tgt_tokens=...) on NumPy int32
                 arrays: argument parsing, the buffer protocol, shape checks, fresh output
                 arrays, GIL release and reacquire;
  torch-int64:   the same on PyTorch int64 tensors (DLPack, int64 ids), when torch imports.
Each reports the mean time per call of its round; the table gives the best round and the median
round, and the overhead is each Python path's figure less c-abi's.
"""
import argparse
import json
import os
import statistics
import time

import numpy as np

import transfuse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=os.path.join(ROOT, "models", "tiny-encoder-decoder.json"))
    p.add_argument("--len", type=int, default=8, help="source and target length")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=2000, help="calls per round and path")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = p.parse_args()

    model = transfuse.compile(args.config, max_batch=1, max_seq_len=max(args.len, 8), seed=0,
                              threads=1)
    ids = np.arange(5, 5 + args.len, dtype=np.int32).reshape(1, args.len) % 16 + 3
    inputs = {"src_tokens": ids, "tgt_tokens": ids.copy()}
    paths = {
        "c-abi": lambda n: model._native._time_runs("forward", inputs, n),
        "numpy-int32": lambda n: timed(lambda: model.run("forward", **inputs), n),
    }
    try:
        import torch
        tensors = {k: torch.from_numpy(v.astype(np.int64)) for k, v in inputs.items()}
        paths["torch-int64"] = lambda n: timed(lambda: model.run("forward", **tensors), n)
    except ImportError:
        pass

    for run in paths.values():  # warm-up
        run(max(1, args.calls // 10))
    per_call = {name: [] for name in paths}
    for _ in range(args.rounds):
        for name, run in paths.items():
            per_call[name].append(run(args.calls) / args.calls * 1e6)

    base_best, base_median = min(per_call["c-abi"]), statistics.median(per_call["c-abi"])
    rows = []
    for name, times in per_call.items():
        best, median = min(times), statistics.median(times)
        rows.append({"path": name, "best_us": best, "median_us": median,
                     "overhead_best_us": best - base_best,
                     "overhead_median_us": median - base_median})
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{os.path.basename(args.config)} forward, batch 1, length {args.len}, 1 thread; "
          f"{args.rounds} rounds x {args.calls} calls, us per call")
    print(f"{'path':<13} {'best':>8} {'median':>8} {'overhead (best)':>16} "
          f"{'overhead (median)':>18}")
    for r in rows:
        print(f"{r['path']:<13} {r['best_us']:8.2f} {r['median_us']:8.2f} "
              f"{r['overhead_best_us']:16.2f} {r['overhead_median_us']:18.2f}")


def timed(call, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        call()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
