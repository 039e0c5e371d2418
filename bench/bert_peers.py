#!/usr/bin/env python3
"""Transfuse's BERT sentence embedding beside its peers: PyTorch eager/SDPA and ONNX Runtime, CPU, fp32.

Times a MiniLM-L6-shaped sentence-transformers model in Transfuse (`transfuse bench model DIR
--entry embed`, given --transfuse) and in its peers, interleaved in one run. Needs the benchmark venv (torch, transformers, onnx, onnxscript, onnxruntime):
  python3 -m venv /work/venv-hf && /work/venv-hf/bin/pip install \\
      torch numpy transformers onnx onnxruntime onnxscript safetensors

Usage (from the repository root):
  /work/venv-hf/bin/python bench/bert_peers.py make-model /tmp/minilm
  /work/venv-hf/bin/python bench/bert_peers.py check /tmp/minilm --batch 2 --seq-len 16
  /work/venv-hf/bin/python bench/bert_peers.py time /tmp/minilm --batch 32 --seq-len 128 \\
      --threads 2 --runtime both --transfuse build/tools/transfuse [--min-seconds 3] [--rounds 3] [--json]

make-model writes a randomly initialised transformers.BertModel (all-MiniLM-L6-v2's shapes by
default) with save_pretrained (config.json + model.safetensors), plus the sentence-transformers
layout beside it (modules.json, 1_Pooling/config.json with mean pooling, 2_Normalize/).
No hub access: models are only ever loaded from a local directory.

What is timed, per call: the full sentence-embedding pipeline on fixed random int64 inputs
(input_ids in [1000, vocab), attention_mask all ones, token_type_ids zeros), i.e. the BERT
encoder + mean pooling over the attention mask + L2 normalisation, fp32.
  torch-eager / torch-sdpa: BertModel.from_pretrained(DIR, attn_implementation=eager|sdpa),
      torch.set_num_threads(T), set_num_interop_threads(1), inference_mode; pooling in torch.
  ort: the encoder exported with the classic TorchScript exporter (torch.onnx.export,
      dynamo=False, opset 17, dynamic batch/sequence axes; cached as DIR/onnx/model.onnx),
      fused by onnxruntime.transformers.optimizer (model_type "bert", opt_level 1, fp32;
      DIR/onnx/model-opt.onnx), run by an InferenceSession (CPU, intra_op_num_threads=T,
      inter_op_num_threads=1, ORT_ENABLE_ALL, sequential); pooling + normalise in NumPy,
      inside the timed call.
  transfuse: `transfuse bench model DIR --entry embed --fusion all` (compiled for the batch and
      length, random ids, all-ones mask: the same work), its median and min per round.
`check` also runs `transfuse run DIR --entry embed` on the same inputs (given --transfuse).
Protocol: peers run in alternating rounds (--rounds); in each round a peer gets 3 warm-up
calls, then is called until --min-seconds have passed (at least 5 calls). Each peer reports
the round with the best median: median and min ms per call, sentences/s from the median.
--json prints one object per peer and line (the ort one also carries "fused_ops").
"""
import argparse
import json
import logging
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers
from transformers import BertConfig, BertModel

logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()

INPUT_NAMES = ["input_ids", "attention_mask", "token_type_ids"]
FUSED_OPS = ["EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"]


def make_model(args):
    config = BertConfig(vocab_size=args.vocab, hidden_size=args.hidden,
                        num_hidden_layers=args.layers, num_attention_heads=args.heads,
                        intermediate_size=args.intermediate, max_position_embeddings=args.max_pos,
                        hidden_act="gelu", layer_norm_eps=1e-12)
    torch.manual_seed(args.seed)
    model = BertModel(config).eval()  # keeps the pooler, as all-MiniLM-L6-v2's checkpoint does
    out = Path(args.dir)
    model.save_pretrained(out, safe_serialization=True)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    (out / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")
    (out / "1_Pooling").mkdir(exist_ok=True)
    pooling = {"word_embedding_dimension": args.hidden, "pooling_mode_cls_token": False,
               "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
               "pooling_mode_mean_sqrt_len_tokens": False}
    (out / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2) + "\n")
    (out / "2_Normalize").mkdir(exist_ok=True)
    print(f"wrote {out}: {sum(p.numel() for p in model.parameters())} parameters")


def make_inputs(config, batch, seq_len, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, config.vocab_size, size=(batch, seq_len), dtype=np.int64)
    return {"input_ids": ids, "attention_mask": np.ones_like(ids),
            "token_type_ids": np.zeros_like(ids)}


def load_encoder(model_dir, attn):
    return BertModel.from_pretrained(model_dir, attn_implementation=attn,
                                     add_pooling_layer=False).eval()


def torch_peer(model_dir, attn, feeds):
    """Returns a call computing the embeddings with PyTorch (a float32 NumPy array)."""
    model = load_encoder(model_dir, attn)
    inputs = {k: torch.from_numpy(v) for k, v in feeds.items()}

    def call():
        with torch.inference_mode():
            hidden = model(**inputs).last_hidden_state
            mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1).numpy()
    return call


class _Encoder(torch.nn.Module):
    """BertModel with positional inputs in INPUT_NAMES order and last_hidden_state as output."""

    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                         token_type_ids=token_type_ids).last_hidden_state


def export_onnx(model_dir, config):
    """Exports the encoder once (DIR/onnx/model.onnx), then fuses it (DIR/onnx/model-opt.onnx)."""
    onnx_dir = Path(model_dir) / "onnx"
    raw, fused = onnx_dir / "model.onnx", onnx_dir / "model-opt.onnx"
    if not raw.exists():
        onnx_dir.mkdir(exist_ok=True)
        example = tuple(torch.from_numpy(v) for v in make_inputs(config, 2, 16).values())
        axes = {0: "batch", 1: "sequence"}
        torch.onnx.export(_Encoder(load_encoder(model_dir, "eager")), example, str(raw),
                          input_names=INPUT_NAMES, output_names=["last_hidden_state"],
                          dynamic_axes={**{n: axes for n in INPUT_NAMES}, "last_hidden_state": axes},
                          opset_version=17, do_constant_folding=True, dynamo=False)
    from onnxruntime.transformers import optimizer
    opt = optimizer.optimize_model(str(raw), model_type="bert", num_heads=config.num_attention_heads,
                                   hidden_size=config.hidden_size, opt_level=1)
    opt.save_model_to_file(str(fused))
    stats = opt.get_fused_operator_statistics()
    return fused, {op: stats.get(op, 0) for op in FUSED_OPS}


def ort_session(path, threads):
    """An ONNX Runtime CPU session as the benchmarks run it: `threads` intra-op, one inter-op,
    every graph optimization, sequential execution."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def ort_peer(model_dir, config, feeds, threads):
    """Returns a call computing the embeddings with ONNX Runtime, and the fusion statistics."""
    path, stats = export_onnx(model_dir, config)
    session = ort_session(path, threads)

    def call():
        (hidden,) = session.run(["last_hidden_state"], feeds)
        mask = feeds["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return call, stats


def transfuse_peer(args):
    """Returns a round of `transfuse bench model --entry embed`: (median ms, min ms)."""
    def round_():
        out = subprocess.run([args.transfuse, "bench", "model", args.dir, "--entry", "embed",
                              "--fusion", "all", "--batch", str(args.batch), "--src-len",
                              str(args.seq_len), "--tgt-len", str(args.seq_len), "--threads",
                              str(args.threads), "--min-seconds", str(args.min_seconds), "--json"],
                             capture_output=True, text=True, check=True).stdout
        row = json.loads(out.strip().splitlines()[-1])["rows"][0]
        return row["median_ms"], row["min_ms"]
    return round_


def transfuse_embeddings(args, feeds):
    """`transfuse run DIR --entry embed` on `feeds` (compiled into a temporary cache)."""
    from safetensors.numpy import load_file, save_file
    with tempfile.TemporaryDirectory() as tmp:
        save_file(feeds, os.path.join(tmp, "in.safetensors"))
        subprocess.run([args.transfuse, "run", args.dir, "--entry", "embed", "--inputs",
                        os.path.join(tmp, "in.safetensors"), "--outputs",
                        os.path.join(tmp, "out.safetensors"), "--threads", str(args.threads)],
                       check=True, capture_output=True, env=dict(os.environ, XDG_CACHE_HOME=tmp))
        return load_file(os.path.join(tmp, "out.safetensors"))["sentence_embedding"]


def make_peers(args, runtimes):
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    config = BertConfig.from_pretrained(args.dir)
    feeds = make_inputs(config, args.batch, args.seq_len)
    peers, stats = {}, None
    if "torch" in runtimes:
        peers["torch-eager"] = torch_peer(args.dir, "eager", feeds)
        peers["torch-sdpa"] = torch_peer(args.dir, "sdpa", feeds)
    if "onnxruntime" in runtimes:
        peers["ort"], stats = ort_peer(args.dir, config, feeds, args.threads)
    return peers, stats


def measure(call, min_seconds):
    for _ in range(3):
        call()
    times, start = [], time.perf_counter()
    while len(times) < 5 or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times)


def time_peers(args):
    runtimes = ["torch", "onnxruntime"] if args.runtime == "both" else [args.runtime]
    peers, stats = make_peers(args, runtimes)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "onnxruntime": ort.__version__, "onnx": onnx.__version__, "numpy": np.__version__}
    rounds = {name: (lambda c=call: measure(c, args.min_seconds)) for name, call in peers.items()}
    if args.transfuse:
        rounds = {"transfuse": transfuse_peer(args), **rounds}
    best = {}
    for _ in range(args.rounds):
        for name, round_ in rounds.items():
            med, mn = round_()
            if name not in best or med < best[name][0]:
                best[name] = (med, mn)
    rows = [{"peer": name, "batch": args.batch, "seq_len": args.seq_len, "threads": args.threads,
             "median_ms": round(med, 3), "min_ms": round(mn, 3),
             "sentences_per_s": round(args.batch * 1e3 / med, 2), "versions": versions}
            for name, (med, mn) in best.items()]
    for row in rows:
        if row["peer"] == "ort":
            row["fused_ops"] = stats
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    print(f"batch {args.batch}, seq_len {args.seq_len}, threads {args.threads}, fp32, "
          f"best median of {args.rounds} interleaved rounds; "
          + " ".join(f"{k} {v}" for k, v in versions.items()))
    if stats is not None:
        print("ort fused operators: " + ", ".join(f"{k} {v}" for k, v in stats.items())
              + "  (pooling + normalise in NumPy, inside the timed call)")
    ours = best.get("transfuse", (None,))[0]
    print(f"{'peer':<12} {'median ms':>10} {'min ms':>10} {'sentences/s':>12}"
          + ("  transfuse's speed-up" if ours else ""))
    for row in rows:
        print(f"{row['peer']:<12} {row['median_ms']:>10.2f} {row['min_ms']:>10.2f} "
              f"{row['sentences_per_s']:>12.1f}"
              + (f"  {row['median_ms'] / ours:.2f}x" if ours else ""))


def check(args):
    peers, stats = make_peers(args, ["torch", "onnxruntime"])
    out = {name: call() for name, call in peers.items()}
    if args.transfuse:
        config = BertConfig.from_pretrained(args.dir)
        out["transfuse"] = transfuse_embeddings(args, make_inputs(config, args.batch, args.seq_len))
    print(f"ort fused operators: {stats}")
    ref = out["torch-eager"]
    for name, emb in out.items():
        print(f"{name:<12} shape {emb.shape}  max|x - torch-eager| = "
              f"{float(np.abs(emb - ref).max()):.3g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make-model", help="write a random MiniLM-L6-shaped BertModel")
    mk.add_argument("dir")
    for flag, default in [("layers", 6), ("hidden", 384), ("heads", 12), ("intermediate", 1536),
                          ("vocab", 30522), ("max-pos", 512), ("seed", 0)]:
        mk.add_argument(f"--{flag}", type=int, default=default)
    tm = sub.add_parser("time", help="time the peers")
    ck = sub.add_parser("check", help="max abs difference between the peers' embeddings")
    for p, batch, seq_len in [(tm, None, None), (ck, 2, 16)]:
        p.add_argument("dir")
        p.add_argument("--batch", type=int, default=batch, required=batch is None)
        p.add_argument("--seq-len", type=int, default=seq_len, required=seq_len is None)
        p.add_argument("--threads", type=int, default=os.cpu_count())
        p.add_argument("--transfuse", help="the transfuse binary: time (check) it beside the peers")
    tm.add_argument("--min-seconds", type=float, default=3.0)
    tm.add_argument("--rounds", type=int, default=3)
    tm.add_argument("--runtime", choices=["torch", "onnxruntime", "both"], default="both")
    tm.add_argument("--json", action="store_true")
    args = ap.parse_args()
    {"make-model": make_model, "time": time_peers, "check": check}[args.cmd](args)


if __name__ == "__main__":
    main()
