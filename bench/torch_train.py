#!/usr/bin/python3
"""PyTorch eager training throughput: the peer figure for `transfuse bench train`.

Times one training step (forward, the loss, backward, the Adam update) of an
encoder_decoder config from models/*.json in PyTorch eager mode, float32, on the
CPU: the model of tests/oracle/check_against_torch.py (nn.Transformer with the
config's embeddings, sharing and tying; dropout as the config says, on PyTorch's
own sites), CrossEntropyLoss(label_smoothing=0.1, ignore_index=pad_id),
Adam(betas=(0.9, 0.98), eps=1e-9). The batch is what `transfuse bench train`
times: B = --batch-tokens // --seq-len sentences of --seq-len source and target
tokens, random ids, no padding.

With --autocast bf16 the step runs under torch.autocast("cpu",
dtype=torch.bfloat16): PyTorch's mixed precision (the products in bf16 on
oneDNN, AMX where the CPU has it; fp32 weights, Adam and the loss), the peer
of `transfuse bench train --dtype bf16`.

Reported: the median and minimum step time over --iters timed steps (after
--warmup), target tokens per second (B·T / median) and GFLOP/s counted as
`transfuse bench train` counts them: 3x the forward's matmul FLOPs (every linear
layer, attention's two products, the output projection).

  /usr/bin/python3 bench/torch_train.py --model models/multi30k-en-de.json \\
      --transfuse build/tools/transfuse --batch-tokens 3000 --seq-len 32 --threads 2
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "oracle"))
import check_against_torch as ct  # noqa: E402  (exits 77 without torch)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def resolved_config(transfuse, path):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([transfuse, "compile", path, "--emit", "mlir", "-o", tmp], check=True,
                       capture_output=True)
        with open(os.path.join(tmp, "manifest.json")) as f:
            return json.load(f)["config"]


def forward_flops(c, B, S, T):
    d, f, V = c["d_model"], c["d_ff"], c["tgt_vocab_size"]
    enc = c["num_encoder_layers"] * (2 * B * S * (4 * d * d + 2 * d * f) + 4 * B * S * S * d)
    dec = c["num_decoder_layers"] * (2 * B * T * (4 * d * d + 2 * d * f) + 4 * B * T * T * d
                                     + 2 * B * T * 2 * d * d + 2 * B * S * 2 * d * d
                                     + 4 * B * T * S * d)
    return enc + dec + 2 * B * T * d * V


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--transfuse", default="build/tools/transfuse",
                   help="resolves the config's defaults")
    p.add_argument("--batch-tokens", type=int, default=3000)
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=6)
    p.add_argument("--autocast", choices=("none", "bf16"), default="none",
                   help="bf16: the step under torch.autocast('cpu', dtype=torch.bfloat16)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    c = resolved_config(a.transfuse, a.model)
    if c["architecture"] != "encoder_decoder":
        sys.exit("torch_train.py: encoder_decoder configs only")
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    model = ct.Seq2SeqTransformer(c)
    for m in model.modules():  # the config's dropout on PyTorch's own sites
        if isinstance(m, nn.Dropout):
            m.p = c["dropout"]
        if isinstance(m, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
            for name in ("dropout", "dropout1", "dropout2", "dropout3"):
                if hasattr(m, name):
                    getattr(m, name).p = c["dropout"]
    model.train()
    B, L = max(1, a.batch_tokens // a.seq_len), a.seq_len
    lo = 3  # ids past pad, BOS, EOS
    src = torch.randint(lo, c["src_vocab_size"], (B, L))
    tgt = torch.randint(lo, c["tgt_vocab_size"], (B, L))
    labels = torch.randint(lo, c["tgt_vocab_size"], (B, L))
    pad = c["pad_id"]
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=-100 if pad is None else pad)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast == "bf16"):
            logits = model(src, tgt)
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    ms = []
    for _ in range(a.iters):
        t0 = time.perf_counter()
        step()
        ms.append((time.perf_counter() - t0) * 1e3)
    med = statistics.median(ms)
    gflop = 3 * forward_flops(c, B, L, L) / 1e9
    row = {"system": f"torch {torch.__version__}", "autocast": a.autocast, "batch": B, "seq_len": L, "threads": a.threads,
           "median_ms": med, "min_ms": min(ms), "tokens_per_s": B * L / (med / 1e3),
           "gflop": gflop, "gflops": gflop / (med / 1e3)}
    if a.json:
        print(json.dumps(row))
    else:
        print(f"torch {torch.__version__} train {a.model}"
              f"{' (autocast bf16)' if a.autocast == 'bf16' else ''}: B={B} S=T={L}, {a.threads} thread(s): "
              f"median {med:.1f} ms, min {min(ms):.1f} ms, {row['tokens_per_s']:.0f} tokens/s, "
              f"{gflop:.2f} GFLOP, {row['gflops']:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
