"""Benchmarks as data: fusion strategies timed side by side (`transfuse bench model`)."""

from __future__ import annotations

import os
from typing import Any, Sequence


STRATEGIES = ("none", "attention", "layernorm", "epilogue", "projections", "all")


def fma_peak() -> float:
    """This machine's FMA peak of one thread in GFLOP/s, probed now."""
    from . import _compiler
    return _compiler._fma_peak()


def model(definition: "str | os.PathLike[str]", fusion: "Sequence[str]" = STRATEGIES, *,
          batch: int = 8, src_len: int = 64, tgt_len: int = 64, entry: str = "forward",
          threads: int = 0, train: bool = False, min_seconds: float = 2.0, rounds: int = 1,
          keep_dir: "str | None" = None) -> "list[dict[str, Any]]":
    """Compiles `definition` once per fusion strategy and times `entry` on random
    inputs (or, with train, the train step), as `transfuse bench model`.

    With rounds > 1 the strategies are timed in interleaved rounds (every
    strategy once per round, as a noisy host needs) and each keeps its round
    with the best median. One dict per strategy: strategy, median_ms, min_ms,
    gflop, gflops, arena_bytes, kernel_calls, runs, compile_seconds, threads,
    target, and peak_gflops: the FMA peak of those threads, probed in the
    same call.
    """
    from . import _compiler
    peak = fma_peak()
    best: "dict[str, dict[str, Any]]" = {}
    for _ in range(max(1, rounds)):
        for strategy in fusion:
            row = _compiler._bench_model(os.fspath(definition), strategy, batch, src_len,
                                          tgt_len, entry, threads, train, min_seconds, keep_dir)
            if strategy not in best or row["median_ms"] < best[strategy]["median_ms"]:
                best[strategy] = row
    rows = []
    for strategy in fusion:
        row = best[strategy]
        row.update(batch=batch, src_len=src_len, tgt_len=tgt_len, entry=entry, rounds=rounds,
                   peak_gflops=peak * row["threads"])
        rows.append(row)
    return rows
