#!/usr/bin/env python3
"""Builds what tests/gpu/run.sh runs on a GPU machine, and checks here that
generated CUDA compiles and links (ctest `cuda_codegen`).

For each tiny config with fusion all, and for one of each architecture
with fusion none too (the unfused graph's matmuls, softmax, transposes,
masks and pointwise kernels): `transfuse compile --target cuda --fusion S` into
OUT/<config>-<S>/, random token inputs of two sizes (the last sequence ending in
padding where the model has a pad id) and the reference backend's outputs for
them with the seeded weights (seed 0) the GPU run draws too, listed in
OUT/<config>/cases.txt for cuda_model_check; the same config compiled for
the cpu target (OUT/<config>-<S>/cpu), against which the checker compares
decoding, and its inputs (decode.safetensors). With --bench, transformer-base
(--max-batch 32, for decode steps at batch 32)
as well, with a B=8, S=T=64 input to time. Highway's shared libraries go to
OUT/lib (the GPU machine has none).

bf16: configs compiled with --dtype bf16, fused (OUT/<config>-all-bf16)
and unfused (its unfused/), with reference outputs.

Training: configs compiled with --train for both targets into
OUT/<config>-<S>-train/ (and its cpu/), with a batch of loss_grad's inputs
(train.safetensors) for cuda_train_check.

    tests/gpu/prepare.py --transfuse build/tools/transfuse --out build/tests/gpu/models \
        [--full] [--bench] [--pack]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import safetensors_io  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TINY = ["tiny-encoder-decoder", "tiny-encoder-decoder-pre", "tiny-decoder-only",
        "tiny-decoder-only-padded"]


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("failed: " + " ".join(cmd) + "\n" + result.stdout + result.stderr)


def tokens(rng, config, vocab, batch, length, pad):
    """Ids in [0, vocab) other than the pad id; the last row ends in padding."""
    pad_id = config.get("pad_id")
    ids = rng.integers(0, vocab, size=(batch, length), dtype=np.int32)
    if pad_id is not None:
        ids[ids == pad_id] = (pad_id + 1) % vocab
        if pad and length > 2:
            ids[-1, length - length // 3:] = pad_id
    return ids


def inputs(config, batch, src, tgt, rng):
    if config["architecture"] == "encoder_decoder":
        return {"src_tokens": tokens(rng, config, config["src_vocab_size"], batch, src, True),
                "tgt_tokens": tokens(rng, config, config["tgt_vocab_size"], batch, tgt, True)}
    return {"tokens": tokens(rng, config, config["vocab_size"], batch, tgt, True)}


def prepare(transfuse, name, strategy, out, cases, bench=None):
    model = os.path.join(ROOT, "models", name + ".json")
    config = json.load(open(model))
    target = os.path.join(out, f"{name}-{strategy}")
    # The timed models decode at batch 32 (cuda_model_check --bench).
    extra = ["--max-batch", "32"] if bench else []
    run([transfuse, "compile", model, "-o", target, "--target", "cuda", "--fusion", strategy] + extra)
    run([transfuse, "compile", model, "-o", os.path.join(target, "cpu"), "--fusion", strategy] +
        extra)
    rng = np.random.default_rng(11)
    # Decoding appends 2 positions per call (at most 6 calls: within 16).
    safetensors_io.write(os.path.join(target, "decode.safetensors"), inputs(config, 3, 7, 2, rng))
    lines = []
    for i, (batch, src, tgt) in enumerate(cases):
        given = f"case{i}.in.safetensors"
        expected = f"case{i}.expected.safetensors"
        safetensors_io.write(os.path.join(target, given), inputs(config, batch, src, tgt, rng))
        run([transfuse, "run", target, "--backend", "reference", "--seed", "0",
             "--inputs", os.path.join(target, given), "--outputs", os.path.join(target, expected)])
        lines.append(f"{given} {expected}\n")
    with open(os.path.join(target, "cases.txt"), "w") as f:
        f.writelines(lines)
    if bench:
        safetensors_io.write(os.path.join(target, "bench.safetensors"), inputs(config, *bench, rng))
    print(f"{target}: libmodel.so for sm_80 and sm_90 (and the cpu one), {len(cases)} cases")


def prepare_bf16(transfuse, name, out, cases):
    """--dtype bf16 with fusion all, and beside it (unfused/) with fusion none:
    cuda_model_check holds the fused model to FlashAttention's rule, its error
    against the reference at most twice the unfused bf16 model's."""
    model = os.path.join(ROOT, "models", name + ".json")
    config = json.load(open(model))
    target = os.path.join(out, f"{name}-all-bf16")
    for strategy, where in [("all", target), ("none", os.path.join(target, "unfused"))]:
        run([transfuse, "compile", model, "-o", where, "--target", "cuda", "--dtype", "bf16",
             "--fusion", strategy])
    rng = np.random.default_rng(17)
    lines = []
    for i, (batch, src, tgt) in enumerate(cases):
        given, expected = f"case{i}.in.safetensors", f"case{i}.expected.safetensors"
        safetensors_io.write(os.path.join(target, given), inputs(config, batch, src, tgt, rng))
        run([transfuse, "run", os.path.join(target, "unfused"), "--backend", "reference",
             "--seed", "0", "--inputs", os.path.join(target, given),
             "--outputs", os.path.join(target, expected)])
        lines.append(f"{given} {expected}\n")
    with open(os.path.join(target, "cases.txt"), "w") as f:
        f.writelines(lines)
    print(f"{target}: bf16 fused and unfused for sm_80 and sm_90, {len(cases)} cases")


def prepare_train(transfuse, name, strategy, out):
    model = os.path.join(ROOT, "models", name + ".json")
    config = json.load(open(model))
    target = os.path.join(out, f"{name}-{strategy}-train")
    run([transfuse, "compile", model, "-o", target, "--target", "cuda", "--train",
         "--fusion", strategy])
    run([transfuse, "compile", model, "-o", os.path.join(target, "cpu"), "--train",
         "--fusion", strategy])
    rng = np.random.default_rng(13)
    batch = inputs(config, 4, 9, 8, rng)
    vocab = config.get("tgt_vocab_size", config.get("vocab_size"))
    # Labels of the target's shape, the last row ending in padding (ignored).
    batch["labels"] = tokens(rng, config, vocab, 4, 8, True)
    safetensors_io.write(os.path.join(target, "train.safetensors"), batch)
    print(f"{target}: the train step for sm_80 and sm_90 (and the cpu one), a batch")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--transfuse", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--bench", action="store_true", help="also transformer-base, to time")
    p.add_argument("--full", action="store_true",
                   help="every bf16 and train config (CI compiles one of each kind)")
    p.add_argument("--pack", action="store_true",
                   help="also OUT.tar.xz, the whole of OUT in a tenth of its size (what a GPU "
                        "machine is sent; run.sh unpacks it)")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in TINY:
        # Unfused: one model of each architecture, with padding (the masks,
        # selects, matmuls and softmax of every unfused graph here).
        unfused = name in ("tiny-encoder-decoder", "tiny-decoder-only-padded")
        for strategy in ["all", "none"] if unfused else ["all"]:
            prepare(a.transfuse, name, strategy, a.out, [(2, 7, 5), (3, 16, 16)])
    # bf16: both architectures (attention on the tensor cores needs head
    # dims 64 or 128: the tiny configs take the CUDA-core form). Training:
    # both architectures fused, the encoder-decoder unfused too, and learned
    # positions (the pre-norm config: a slice gradient). CI (no --full)
    # compiles one of each kind, the GPU run all.
    bf16 = ["tiny-encoder-decoder", "tiny-decoder-only-padded"]
    train = [("tiny-encoder-decoder", "none"), ("tiny-encoder-decoder-pre", "all"),
             ("tiny-encoder-decoder", "all"), ("tiny-decoder-only-padded", "all")]
    for name in bf16 if a.full else bf16[:1]:
        prepare_bf16(a.transfuse, name, a.out, [(2, 7, 5), (3, 16, 16)])
    for name, strategy in train if a.full else train[:2]:
        prepare_train(a.transfuse, name, strategy, a.out)
    if a.bench:
        for strategy in ["all", "none"]:
            prepare(a.transfuse, "transformer-base", strategy, a.out, [(1, 9, 7)],
                    bench=(8, 64, 64))
    lib = os.path.join(a.out, "lib")
    os.makedirs(lib, exist_ok=True)
    for so in ["libhwy.so.1", "libhwy_contrib.so.1"]:
        shutil.copy(os.path.join("/usr/lib/x86_64-linux-gnu", so), lib)
    if a.pack:
        packed = os.path.normpath(a.out) + ".tar.xz"
        with tarfile.open(packed + ".tmp", "w:xz") as tar:
            tar.add(a.out, arcname=os.path.basename(os.path.normpath(a.out)))
        os.replace(packed + ".tmp", packed)
        print(f"{packed}: {os.path.getsize(packed) / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
