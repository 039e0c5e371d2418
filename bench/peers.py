"""What the peer comparisons (bench/compare_*.py) share: running a command,
timing a peer's request, and `transfuse bench decode`'s median."""
import json
import subprocess
import sys
import time

import numpy as np


def run(cmd):
    """stdout of `cmd`; on failure, exits with its command line and stderr."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), (r.stderr or r.stdout)[-2000:]))
    return r.stdout


def median_ms(once, min_seconds):
    """The median wall time of `once()` in ms: one warm-up call, then at least
    3 calls and at least `min_seconds` of them."""
    once()
    ms, start = [], time.perf_counter()
    while len(ms) < 3 or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        once()
        ms.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(ms))


def bench_decode_ms(transfuse, model, weights, threads, min_seconds, **sizes):
    """The median request of `transfuse bench decode MODEL --weights W --json`,
    with `sizes` as its flags (batch=8 -> --batch 8, src_len=24 -> --src-len 24)."""
    flags = []
    for name, value in sizes.items():
        flags += ["--" + name.replace("_", "-"), str(value)]
    out = run([transfuse, "bench", "decode", model, "--weights", weights, "--threads",
               str(threads), "--min-seconds", str(min_seconds), "--json"] + flags)
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


def ct2_request_ms(model_dir, kind, threads, inputs, beam, new_tokens, min_seconds):
    """CTranslate2's median translate_batch of `inputs` (token lists) in ms, on
    `kind` (float32, int8) weights, exactly `new_tokens` per sentence."""
    import ctranslate2
    t = ctranslate2.Translator(model_dir, device="cpu", intra_threads=threads, inter_threads=1,
                               compute_type=kind)

    def once():
        r = t.translate_batch(inputs, beam_size=beam, max_decoding_length=new_tokens,
                              min_decoding_length=new_tokens, length_penalty=0)
        assert all(len(x.hypotheses[0]) == new_tokens for x in r)
    return median_ms(once, min_seconds)


def ct2_table(cases, repeats, new_tokens, ours_ms, ct2_ms):
    """Per (batch, beam) case, the best of `repeats` interleaved medians of
    ours_ms(kind, batch, beam) and ct2_ms(kind, batch, beam) for float32 and
    int8, printed as tokens/s with each precision's ratio to CTranslate2's."""
    kinds = ("float32", "int8")
    print("%-10s %14s %14s %14s %14s %8s %8s" % (
        "case", "transfuse f32", "ct2 float32", "transfuse int8", "ct2 int8", "f32", "int8"))
    for batch, beam in cases:
        best = {(who, k): 1e18 for who in ("ours", "ct2") for k in kinds}
        for _ in range(repeats):
            for k in kinds:
                best["ours", k] = min(best["ours", k], ours_ms(k, batch, beam))
                best["ct2", k] = min(best["ct2", k], ct2_ms(k, batch, beam))
        tps = {key: batch * new_tokens / (ms / 1e3) for key, ms in best.items()}
        print("B=%d K=%d   %9.1f tok/s %9.1f tok/s %9.1f tok/s %9.1f tok/s %7.2fx %7.2fx" %
              (batch, beam, tps["ours", "float32"], tps["ct2", "float32"], tps["ours", "int8"],
               tps["ct2", "int8"], tps["ours", "float32"] / tps["ct2", "float32"],
               tps["ours", "int8"] / tps["ct2", "int8"]))
        sys.stdout.flush()
