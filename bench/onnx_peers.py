#!/usr/bin/env python3
"""An ONNX file compiled by Transfuse beside ONNX Runtime on the same file, and beside the same
model compiled from its Hugging Face directory. CPU, fp32.

Needs the benchmark venv (torch, transformers, onnx, onnxruntime; see bench/bert_peers.py).

Usage (from the repository root):
  /work/venv-hf/bin/python bench/onnx_peers.py make-model /tmp/bert-base
  /work/venv-hf/bin/python bench/onnx_peers.py check /tmp/bert-base --transfuse build/tools/transfuse
  /work/venv-hf/bin/python bench/onnx_peers.py time /tmp/bert-base --batch 8 --seq-len 128 \\
      --threads 2 --transfuse build/tools/transfuse [--min-seconds 3] [--rounds 3] [--json]

make-model writes a randomly initialised transformers.BertModel (bert-base-uncased's shapes by
default: 12 layers, 768 wide, 12 heads, 3072 intermediate) with save_pretrained, and its encoder
(last_hidden_state over input_ids, attention_mask and token_type_ids) exported by the classic
TorchScript exporter (torch.onnx.export, dynamo=False, opset 17, dynamic batch and sequence,
eager attention) to DIR/model.onnx, its attention mask made as transformers 4 made it
(classic_mask says why). No hub access.

What is timed, per call, on the same inputs (ids in [1000, vocab), attention mask all ones,
token types zeros):
  transfuse-onnx: `transfuse bench model DIR/model.onnx --fusion all` (compiled from the file;
      its own random ids, the same work);
  transfuse-hf:   `transfuse bench model DIR --entry encode --fusion all` (the directory);
  ort:            an InferenceSession on DIR/model.onnx, CPU, intra_op_num_threads=T,
      inter_op_num_threads=1, ORT_ENABLE_ALL (its graph optimizations on the file as it is),
      sequential;
  ort-optimized:  the same on the file after onnxruntime.transformers.optimizer (model_type
      "bert", opt_level 1: its BERT recipe's fused Attention, SkipLayerNormalization, BiasGelu).
Protocol: peers run in alternating rounds (--rounds); in each round a peer gets 3 warm-up calls,
then is called until --min-seconds have passed (at least 5 calls). Each peer reports the round
with the best median.
`check` runs the ONNX file with `transfuse run` and ONNX Runtime on one input and prints the
largest difference.
"""
import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
import transformers
from transformers import BertConfig, BertModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_peers import measure, ort_session  # noqa: E402

logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()

INPUT_NAMES = ["input_ids", "attention_mask", "token_type_ids"]


class Encoder(torch.nn.Module):
    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                         token_type_ids=token_type_ids).last_hidden_state


def make_inputs(vocab, batch, seq_len, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, vocab, size=(batch, seq_len), dtype=np.int64)
    return {"input_ids": ids, "attention_mask": np.ones_like(ids),
            "token_type_ids": np.zeros_like(ids)}


def classic_mask(config, inputs_embeds, attention_mask, **_):
    """transformers 4's extended attention mask, (1 - mask[:, None, None, :]) · finfo.min:
    transformers 5 builds the mask with vmapped index functions, which export to index
    arithmetic (Range, Mul, Add and a Gather of the flattened mask) that the importer does not
    take yet (docs/onnx.md)."""
    m = attention_mask[:, None, None, :].to(inputs_embeds.dtype)
    return (1.0 - m) * torch.finfo(inputs_embeds.dtype).min


def make_model(args):
    config = BertConfig(vocab_size=30522, hidden_size=args.hidden, num_hidden_layers=args.layers,
                        num_attention_heads=args.heads, intermediate_size=args.intermediate,
                        hidden_act="gelu", layer_norm_eps=1e-12)
    torch.manual_seed(0)
    model = BertModel(config, add_pooling_layer=False).eval()
    out = Path(args.dir)
    model.save_pretrained(out, safe_serialization=True)
    model = BertModel.from_pretrained(out, attn_implementation="eager",
                                      add_pooling_layer=False).eval()
    example = tuple(torch.from_numpy(v) for v in make_inputs(config.vocab_size, 2, 16).values())
    import transformers.models.bert.modeling_bert as modeling_bert
    modeling_bert.create_bidirectional_mask = classic_mask
    axes = {0: "batch", 1: "sequence"}
    torch.onnx.export(Encoder(model), example, str(out / "model.onnx"), input_names=INPUT_NAMES,
                      output_names=["last_hidden_state"],
                      dynamic_axes={**{n: axes for n in INPUT_NAMES}, "last_hidden_state": axes},
                      opset_version=17, do_constant_folding=True, dynamo=False)
    print(f"wrote {out} and {out / 'model.onnx'}")


def optimized(args, config):
    from onnxruntime.transformers import optimizer
    path = Path(args.dir) / "model-ort-opt.onnx"
    if not path.exists():
        opt = optimizer.optimize_model(str(Path(args.dir) / "model.onnx"), model_type="bert",
                                       num_heads=config.num_attention_heads,
                                       hidden_size=config.hidden_size, opt_level=1)
        opt.save_model_to_file(str(path))
    return path


def transfuse_round(args, model, extra):
    def round_():
        out = subprocess.run([args.transfuse, "bench", "model", model, "--fusion", "all",
                              "--batch", str(args.batch), "--src-len", str(args.seq_len),
                              "--tgt-len", str(args.seq_len), "--threads", str(args.threads),
                              "--min-seconds", str(args.min_seconds), "--json"] + extra,
                             capture_output=True, text=True, check=True).stdout
        row = json.loads(out.strip().splitlines()[-1])["rows"][0]
        return row["median_ms"], row["min_ms"]
    return round_


def time_peers(args):
    config = BertConfig.from_pretrained(args.dir)
    feeds = make_inputs(config.vocab_size, args.batch, args.seq_len)
    rounds = {"transfuse-onnx": transfuse_round(args, str(Path(args.dir) / "model.onnx"), []),
              "transfuse-hf": transfuse_round(args, args.dir, ["--entry", "encode"])}
    for name, path in [("ort", Path(args.dir) / "model.onnx"), ("ort-optimized", optimized(args, config))]:
        session = ort_session(path, args.threads)
        rounds[name] = (lambda s=session: measure(lambda: s.run(None, feeds), args.min_seconds))
    best = {}
    for _ in range(args.rounds):
        for name, round_ in rounds.items():
            med, mn = round_()
            if name not in best or med < best[name][0]:
                best[name] = (med, mn)
    versions = {"onnxruntime": ort.__version__, "torch": torch.__version__,
                "transformers": transformers.__version__}
    rows = [{"peer": name, "batch": args.batch, "seq_len": args.seq_len, "threads": args.threads,
             "median_ms": round(med, 3), "min_ms": round(mn, 3), "versions": versions}
            for name, (med, mn) in best.items()]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    ours = best["transfuse-onnx"][0]
    print(f"batch {args.batch}, seq_len {args.seq_len}, threads {args.threads}, fp32, best median "
          f"of {args.rounds} interleaved rounds; " + " ".join(f"{k} {v}" for k, v in versions.items()))
    print(f"{'peer':<16} {'median ms':>10} {'min ms':>10}  transfuse-onnx's speed-up")
    for row in rows:
        print(f"{row['peer']:<16} {row['median_ms']:>10.2f} {row['min_ms']:>10.2f}  "
              f"{row['median_ms'] / ours:.2f}x")


def check(args):
    config = BertConfig.from_pretrained(args.dir)
    feeds = make_inputs(config.vocab_size, 2, 16)
    feeds["attention_mask"][1, 10:] = 0
    (want,) = ort_session(Path(args.dir) / "model.onnx", args.threads).run(None, feeds)
    from safetensors.numpy import load_file, save_file
    with tempfile.TemporaryDirectory() as tmp:
        save_file({k: v.astype(np.int32) for k, v in feeds.items()}, os.path.join(tmp, "in.safetensors"))
        art = os.path.join(tmp, "art")
        subprocess.run([args.transfuse, "compile", str(Path(args.dir) / "model.onnx"), "-o", art,
                        "--fusion", "all", "--report"], check=True)
        subprocess.run([args.transfuse, "run", art, "--inputs", os.path.join(tmp, "in.safetensors"),
                        "--outputs", os.path.join(tmp, "out.safetensors")], check=True)
        got = load_file(os.path.join(tmp, "out.safetensors"))["last_hidden_state"]
    print(f"max |transfuse - onnxruntime| = {float(np.abs(got - want).max()):.3g} "
          f"(max |onnxruntime| {float(np.abs(want).max()):.3g})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make-model", help="write a random bert-base-shaped BertModel and its ONNX export")
    mk.add_argument("dir")
    for flag, default in [("layers", 12), ("hidden", 768), ("heads", 12), ("intermediate", 3072)]:
        mk.add_argument(f"--{flag}", type=int, default=default)
    tm = sub.add_parser("time", help="time the peers")
    ck = sub.add_parser("check", help="the largest difference between transfuse and onnxruntime")
    for p in (tm, ck):
        p.add_argument("dir")
        p.add_argument("--threads", type=int, default=os.cpu_count())
        p.add_argument("--transfuse", required=True, help="the transfuse binary")
    tm.add_argument("--batch", type=int, default=8)
    tm.add_argument("--seq-len", type=int, default=128)
    tm.add_argument("--min-seconds", type=float, default=3.0)
    tm.add_argument("--rounds", type=int, default=3)
    tm.add_argument("--json", action="store_true")
    args = ap.parse_args()
    {"make-model": make_model, "time": time_peers, "check": check}[args.cmd](args)


if __name__ == "__main__":
    main()
