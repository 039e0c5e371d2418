"""Pictures of benchmarks and training runs (matplotlib).

    python -m transfuse.plot bench ROWS.json -o bench.png
    python -m transfuse.plot training LOG.jsonl -o training.png

`bench` takes what transfuse.bench.model returns (or `transfuse bench model
--json`'s object); `training` a `transfuse train --log-json` file (or a
Trainer's log_json).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence


def _pyplot() -> Any:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def bench(rows: "Sequence[dict] | dict", output: "str | None" = None, title: "str | None" = None):
    """Fusion strategies side by side: GFLOP/s of each as a bar, the FMA peak of
    the threads used as a line (when the rows carry peak_gflops), the median
    latency written on each bar. Returns the matplotlib Figure; with `output`,
    also saves it (PNG or SVG by extension)."""
    if isinstance(rows, dict):  # `transfuse bench model --json`
        rows = rows["rows"]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    names = [r["strategy"] for r in rows]
    gflops = [r["gflops"] for r in rows]
    bars = ax.bar(names, gflops, color=["#9aa5b1" if n == "none" else "#3b7dd8" for n in names])
    for bar, r in zip(bars, rows):
        ax.annotate(f"{r['median_ms']:.1f} ms", (bar.get_x() + bar.get_width() / 2,
                                                 bar.get_height()),
                    ha="center", va="bottom", fontsize=8)
    peak = max((r.get("peak_gflops", 0) for r in rows), default=0)
    if peak:
        ax.axhline(peak, color="#c0392b", linestyle="--", linewidth=1)
        ax.annotate(f"FMA peak {peak:.0f} GFLOP/s", (0, peak), xytext=(2, -12),
                    textcoords="offset points", color="#c0392b", fontsize=8)
        ax.set_ylim(0, peak * 1.1)
    ax.set_ylabel("GFLOP/s")
    first = rows[0] if rows else {}
    ax.set_title(title or "fusion strategies: {} thread(s), {}".format(
        first.get("threads", "?"), first.get("target", "?")), fontsize=10)
    fig.tight_layout()
    if output:
        fig.savefig(output, dpi=120)
    return fig


def _read_log(path: str) -> "list[dict]":
    if os.path.isdir(path):
        path = os.path.join(path, "log.jsonl")
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    raise ValueError(f"{path}: line {number}: not JSON ({e})") from None
    return rows


def training(log: "str | os.PathLike[str] | Sequence[dict]", output: "str | None" = None):
    """Loss and learning rate per step, and validation loss (and BLEU or
    accuracy) per epoch, from a --log-json file (or its rows). Returns the
    Figure; with `output`, also saves it."""
    rows = _read_log(os.fspath(log)) if isinstance(log, (str, os.PathLike)) else list(log)
    steps = [r for r in rows if "loss" in r]
    valid = [r for r in rows if "valid_loss" in r]
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    left.plot([r["step"] for r in steps], [r["loss"] for r in steps], color="#3b7dd8",
              linewidth=1, label="train loss")
    if valid:
        left.plot([r["step"] for r in valid], [r["valid_loss"] for r in valid], "o-",
                  color="#c0392b", label="valid loss")
    left.set_xlabel("step")
    left.set_ylabel("loss")
    left.legend(fontsize=8)
    right.plot([r["step"] for r in steps], [r["lr"] for r in steps], color="#7f8c8d")
    right.set_xlabel("step")
    right.set_ylabel("learning rate")
    metric = next((k for k in ("valid_bleu", "valid_accuracy") if valid and k in valid[0]), None)
    if metric:
        twin = right.twinx()
        twin.plot([r["step"] for r in valid], [r[metric] for r in valid], "s-", color="#27ae60")
        twin.set_ylabel({"valid_bleu": "valid BLEU", "valid_accuracy": "valid accuracy"}[metric])
    fig.tight_layout()
    if output:
        fig.savefig(output, dpi=120)
    return fig


def main(argv: "Sequence[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transfuse.plot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=("bench", "training"))
    parser.add_argument("input", help="bench: a JSON file of rows; training: a --log-json file")
    parser.add_argument("-o", "--output", required=True, help="the picture (.png or .svg)")
    args = parser.parse_args(argv)
    try:
        if args.kind == "bench":
            with open(args.input) as f:
                bench(json.load(f), args.output)
        else:
            training(args.input, args.output)
    except (OSError, ValueError, KeyError) as e:
        print(f"transfuse.plot: error: {args.input}: {e}", file=sys.stderr)
        return 1
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
