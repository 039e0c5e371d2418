#!/usr/bin/python3
"""Transfuse's tokenizers against Hugging Face's `tokenizers` (Rust), one thread each.

For each tokenizer.json of tests/tokenizers (byte-level BPE in the GPT-2, Llama 3
and Qwen2 layouts; WordPiece, BERT uncased), encodes a corpus (Multi30k's training
sentences, English and German, and the tokenizer test corpus: accents, CJK, emoji,
code, whitespace runs, long numbers) with `transfuse tokenize --time N` (the best
of N encodes of all lines, file reading and printing excluded) and with
`Tokenizer.encode_batch` under RAYON_NUM_THREADS=1 (the best of N), interleaved,
checks that the ids are the same, and prints tokens/s and the ratio.

  /work/venv-hf/bin/python bench/compare_tokenize.py [--repeats 5] [--rounds 3]
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its pool
from tokenizers import Tokenizer  # noqa: E402
import tokenizers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "multi30k")
if not os.path.isdir(DATA):
    DATA = "/work/shared/data/multi30k"
TOKENIZERS = [("GPT-2 layout (byte-level BPE)", "bpe/tokenizer-gpt2.json"),
              ("Llama 3 layout (byte-level BPE)", "bpe/tokenizer-llama3.json"),
              ("Qwen2 layout (NFC, byte-level BPE)", "bpe/tokenizer-qwen2.json"),
              ("BERT uncased (WordPiece)", "wordpiece/tokenizer.json")]


def corpus():
    lines = []
    for name in ("train.en.gz", "train.de.gz"):
        with gzip.open(os.path.join(DATA, name), "rt", encoding="utf-8") as f:
            lines += [line.rstrip("\n") for line in f]
    with gzip.open(os.path.join(ROOT, "tests", "tokenizers", "bpe", "golden.jsonl.gz"), "rt",
                   encoding="utf-8") as f:
        lines += [r["t"] for r in map(json.loads, f) if "t" in r and "\n" not in r["t"]
                  and "\r" not in r["t"]]
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--transfuse", default=os.path.join(ROOT, "build", "tools", "transfuse"))
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    lines = corpus()
    tmp = tempfile.mkdtemp(prefix="compare-tokenize-")
    path = os.path.join(tmp, "corpus.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    print(f"corpus: {len(lines)} lines, {os.path.getsize(path)} bytes; tokenizers "
          f"{tokenizers.__version__}, RAYON_NUM_THREADS=1")
    print(f"{'tokenizer':38s} {'Transfuse':>14s} {'tokenizers':>14s} {'ratio':>7s}  ids")
    for title, rel in TOKENIZERS:
        file = os.path.join(ROOT, "tests", "tokenizers", rel)
        hf = Tokenizer.from_file(file)
        best = {"ours": 1e18, "hf": 1e18}
        ours_ids = None
        for _ in range(args.rounds):
            r = subprocess.run([args.transfuse, "tokenize", file, "--input", path, "--time",
                                str(args.repeats)], capture_output=True, text=True, check=True)
            ms = float(r.stderr.split(" in ")[1].split(" ms")[0])
            best["ours"] = min(best["ours"], ms / 1e3)
            ours_ids = r.stdout
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                enc = hf.encode_batch(lines)
                best["hf"] = min(best["hf"], time.perf_counter() - t0)
        theirs = "".join(" ".join(map(str, e.ids)) + "\n" for e in enc)
        tokens = sum(len(e.ids) for e in enc)
        print(f"{title:38s} {tokens / best['ours']:>10.0f} t/s {tokens / best['hf']:>10.0f} t/s "
              f"{best['hf'] / best['ours']:>6.2f}x  {'same' if ours_ids == theirs else 'DIFFER'}")


if __name__ == "__main__":
    sys.exit(main())
