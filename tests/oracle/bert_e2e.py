#!/usr/bin/python3
"""The BERT family from Hugging Face directories, end to end.

Writes tiny BERT directories as Hugging Face saves them (config.json with the
keys transformers writes, model.safetensors with BertModel's names: F32, and
F16 with the `bert.` prefix of a task model plus its pooler and classifier),
compiles each with `transfuse compile DIR` (F32: fusion none and all; F16:
all), runs
`encode` compiled and on the reference backend through `transfuse run` on a
padded batch with token types, and compares with oracle.bert (NumPy, fp64):
reference within 1e-6 and compiled within 1e-4 of max(1, max |h|). Where
Debian's torch is present, oracle.bert is itself checked against a BERT
written here with torch.nn.functional (fp64). Bad directories (a pickle only,
another family, an unsupported key value) must each fail with one error
naming the file and key, and leave no output. Sharded weights, the
classify head and --train with it, `transfuse embed` from text, the
compile cache, and golden outputs of Hugging Face's own modelling code
(bert-golden/, make_bert_golden.py) for two tiny configs: encode, classify
and embed within 1e-5 of max(1, max |output|).

usage: bert_e2e.py --transfuse BIN --workdir DIR
"""
import argparse
import functools
import gzip
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402
import safetensors_io  # noqa: E402

TOKENIZERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tokenizers",
                          "wordpiece")

CONFIG = {
    "_name_or_path": "tiny-bert", "architectures": ["BertModel"], "model_type": "bert",
    "attention_probs_dropout_prob": 0.1, "classifier_dropout": None, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "hidden_size": 32, "initializer_range": 0.02,
    "intermediate_size": 64, "layer_norm_eps": 1e-12, "max_position_embeddings": 24,
    "num_attention_heads": 4, "num_hidden_layers": 2, "pad_token_id": 0,
    "position_embedding_type": "absolute", "torch_dtype": "float32",
    "transformers_version": "4.46.0", "type_vocab_size": 2, "use_cache": True,
    "vocab_size": 50,
}


# The configs of the golden outputs of Hugging Face's modelling code
# (make_bert_golden.py; bert-golden/NAME.safetensors).
GOLDEN_CONFIGS = {
    "gelu": dict(CONFIG, architectures=["BertForSequenceClassification"], num_labels=3,
                 id2label={"0": "a", "1": "b", "2": "c"}, label2id={"a": 0, "b": 1, "c": 2}),
    "gelu-tanh": dict(CONFIG, hidden_act="gelu_new", hidden_size=24, num_attention_heads=3,
                      intermediate_size=40, layer_norm_eps=1e-5, type_vocab_size=3,
                      architectures=["BertForSequenceClassification"], num_labels=2),
}


def golden_weights(cfg):
    """The golden models' weights: BertForSequenceClassification's names,
    drawn from a fixed seed (NumPy's PCG64 normal draws are stable)."""
    rng = np.random.default_rng(2026)
    w = {"bert." + k: v for k, v in bert_weights(cfg, rng).items()}
    d, n = cfg["hidden_size"], cfg.get("num_labels", 2)
    w["bert.pooler.dense.weight"] = (0.3 * rng.standard_normal((d, d))).astype(np.float32)
    w["bert.pooler.dense.bias"] = (0.1 * rng.standard_normal(d)).astype(np.float32)
    w["classifier.weight"] = (0.5 * rng.standard_normal((n, d))).astype(np.float32)
    w["classifier.bias"] = (0.1 * rng.standard_normal(n)).astype(np.float32)
    return w


def golden_inputs(cfg):
    return {k: v.astype(np.int64)
            for k, v in inputs(dict(cfg, type_vocab_size=2), np.random.default_rng(5), 3, 9).items()}


def bert_weights(cfg, rng):
    d, f, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    r = lambda *shape: 0.3 * rng.standard_normal(shape)
    w = {
        "embeddings.word_embeddings.weight": r(cfg["vocab_size"], d),
        "embeddings.position_embeddings.weight": r(cfg["max_position_embeddings"], d),
        "embeddings.token_type_embeddings.weight": r(cfg["type_vocab_size"], d),
        "embeddings.LayerNorm.weight": 1 + 0.2 * r(d), "embeddings.LayerNorm.bias": r(d),
    }
    for i in range(L):
        p = f"encoder.layer.{i}."
        for name, (o, n) in {"attention.self.query": (d, d), "attention.self.key": (d, d),
                             "attention.self.value": (d, d), "attention.output.dense": (d, d),
                             "intermediate.dense": (f, d), "output.dense": (d, f)}.items():
            w[p + name + ".weight"] = r(o, n) / np.sqrt(n)
            w[p + name + ".bias"] = r(o)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + ln + ".weight"] = 1 + 0.2 * r(d)
            w[p + ln + ".bias"] = r(d)
    return {k: np.asarray(v, dtype=np.float32) for k, v in w.items()}


def write_dir(path, cfg, weights, dtype="F32", prefix="", extra=None):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    tensors = {prefix + k: v for k, v in weights.items()}
    tensors.update(extra or {})
    safetensors_io.write(os.path.join(path, "model.safetensors"), tensors,
                         dtypes={k: dtype for k in tensors})


def write_sharded(path, cfg, weights, shards=2):
    """config.json, the weights cut into `shards` files and their index, as
    save_pretrained writes a model over max_shard_size."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    names = sorted(weights)
    weight_map = {}
    for i in range(shards):
        shard = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: weights[n] for n in names[i::shards]}
        safetensors_io.write(os.path.join(path, shard), part)
        weight_map.update({n: shard for n in part})
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(w.nbytes for w in weights.values())},
                   "weight_map": weight_map}, f, indent=2)


def sharded_cases(args, weights, in_path, exact):
    """A sharded directory compiled and run; bad shards and indexes refused."""
    ok = True
    model = os.path.join(args.workdir, "model-sharded")
    write_sharded(model, CONFIG, weights)
    out = os.path.join(args.workdir, "out-sharded")
    run([args.transfuse, "compile", model, "-o", out])
    got = os.path.join(out, "got.safetensors")
    run([args.transfuse, "run", out, "--entry", "encode", "--inputs", in_path,
         "--weights", model, "--outputs", got])
    ok &= check_close("sharded F32 compiled", safetensors_io.read(got)["last_hidden_state"],
                      exact, 1e-4)
    # `run` on the directory itself: compiled on first use, its own weights.
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(args.workdir, "cache-run"))
    p = subprocess.run([args.transfuse, "run", model, "--entry", "encode", "--inputs", in_path,
                        "--outputs", got], capture_output=True, text=True, env=env)
    ok &= p.returncode == 0 and check_close(
        "run on the sharded directory", safetensors_io.read(got)["last_hidden_state"], exact, 1e-4)
    index_path = os.path.join(model, "model.safetensors.index.json")
    index = json.load(open(index_path))
    first = "model-00001-of-00002.safetensors"
    some = next(n for n, s in index["weight_map"].items() if s == first)
    bad = {
        "overlapping shards": (lambda d: safetensors_io.write(
            os.path.join(d, "model-00002-of-00002.safetensors"),
            dict(safetensors_io.read(os.path.join(d, "model-00002-of-00002.safetensors")),
                 **{some: weights[some]})), "(shards overlap)"),
        "a truncated shard": (lambda d: open(os.path.join(d, first), "r+b").truncate(100),
                              f"shard '{first}'"),
        "an index outside its folder": (lambda d: json.dump(
            {"weight_map": dict(index["weight_map"], **{some: "../" + first})},
            open(os.path.join(d, "model.safetensors.index.json"), "w")),
            "which is not a file name beside the index"),
        "a tensor not in its shard": (lambda d: json.dump(
            {"weight_map": dict(index["weight_map"], **{some: "model-00002-of-00002.safetensors"})},
            open(os.path.join(d, "model.safetensors.index.json"), "w")),
            f"tensor '{some}' is not in its shard"),
    }
    def rewrite_first(d, change):
        path = os.path.join(d, first)
        tensors = safetensors_io.read(path)
        change(tensors)
        safetensors_io.write(path, tensors)
        index_map = {n: s for n, s in index["weight_map"].items() if s != first or n in tensors}
        json.dump({"weight_map": index_map},
                  open(os.path.join(d, "model.safetensors.index.json"), "w"))
    bad["a missing weight"] = (lambda d: rewrite_first(d, lambda t: t.pop(some)),
                               f"missing tensor '{some}'")
    bad["a misshapen weight"] = (lambda d: rewrite_first(
        d, lambda t: t.update({some: np.zeros((2, 3), np.float32)})),
        f"tensor '{some}' has shape [2, 3]")
    for what, (spoil, expect) in bad.items():
        write_sharded(model, CONFIG, weights)
        spoil(model)
        if os.path.exists(got):
            os.remove(got)
        p = run([args.transfuse, "run", out, "--entry", "encode", "--inputs", in_path,
                 "--weights", model, "--outputs", got], expect_ok=False)
        fine = (p.returncode != 0 and expect in p.stderr and p.stderr.count("error:") == 1
                and not os.path.exists(got))
        print(f"{what}: {'refused' if fine else 'NOT REFUSED AS EXPECTED'}: {p.stderr.strip()}")
        ok &= fine
    return ok


def write_sentence_transformers(path, pooling, normalize, hidden=CONFIG["hidden_size"]):
    """modules.json and 1_Pooling/config.json as sentence-transformers saves them."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    with open(os.path.join(path, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)
    os.makedirs(os.path.join(path, "1_Pooling"), exist_ok=True)
    with open(os.path.join(path, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": hidden,
                   "pooling_mode_cls_token": pooling == "cls",
                   "pooling_mode_mean_tokens": pooling == "mean",
                   "pooling_mode_max_tokens": pooling == "max",
                   "pooling_mode_mean_sqrt_len_tokens": False}, f, indent=2)


def embed_oracle(cfg, weights, id_rows, pooling, normalize):
    """sentence-transformers' Pooling (and Normalize) over oracle.bert, fp64."""
    out = []
    for ids in id_rows:
        x = np.asarray([ids], np.int64)
        h = oracle.bert(cfg, weights, x, np.ones_like(x), np.zeros_like(x))[0]
        e = {"cls": h[0], "mean": h.mean(axis=0), "max": h.max(axis=0)}[pooling]
        out.append(e / max(np.linalg.norm(e), 1e-12) if normalize else e)
    return np.asarray(out)


def embed_cases(args, rng):
    """`transfuse embed` from text on sentence-transformers directories: the
    tokenizer's ids (golden, from Hugging Face's tokenizers) through the
    oracle, in every pooling mode; batching that does not change a vector;
    the cache reused and nothing written into the model's directory."""
    ok = True
    with gzip.open(os.path.join(TOKENIZERS, "golden.jsonl.gz"), "rt") as f:
        golden = [json.loads(line) for _, line in zip(range(400), f)]
    golden = [g for g in golden if "\n" not in g["t"] and len(g["u"][0]) <= 48][::13][:23]
    text = os.path.join(args.workdir, "lines.txt")
    with open(text, "w") as f:
        f.write("".join(g["t"] + "\n" for g in golden))
    cfg = dict(CONFIG, vocab_size=3000, max_position_embeddings=64)
    weights = bert_weights(cfg, rng)
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(args.workdir, "cache"))
    shutil.rmtree(env["XDG_CACHE_HOME"], ignore_errors=True)
    for pooling, normalize in (("mean", True), ("cls", False), ("max", True)):
        model = os.path.join(args.workdir, f"st-{pooling}")
        write_dir(model, cfg, weights)
        shutil.copy(os.path.join(TOKENIZERS, "tokenizer.json"), model)
        write_sentence_transformers(model, pooling, normalize)
        before = sorted(os.listdir(model))
        want = embed_oracle(cfg, weights, [g["u"][0] for g in golden], pooling, normalize)
        got = {}
        for batch in ("32", "5") if pooling == "mean" else ("32",):
            out = os.path.join(args.workdir, f"embed-{pooling}-{batch}.npy")
            p = subprocess.run([args.transfuse, "embed", model, "--input", text, "--out", out,
                                "--batch", batch], capture_output=True, text=True, env=env)
            if p.returncode != 0:
                print(f"embed {pooling} --batch {batch} failed: {p.stderr}")
                return False
            got[batch] = np.load(out)
        ok &= check_close(f"embed {pooling}{' + normalize' if normalize else ''}", got["32"], want,
                          1e-4)
        if "5" in got:  # other batches, other padded lengths: the same vectors
            same = np.array_equal(got["32"], got["5"])
            close = float(np.abs(got["32"] - got["5"]).max())
            print(f"embed {pooling}: --batch 5 against 32: "
                  f"{'the same bits' if same else f'max |difference| {close:.3g}'}")
            ok &= close <= 1e-6
        if sorted(os.listdir(model)) != before:
            print(f"embed {pooling}: files written into the model's directory")
            ok = False
    # JSON lines on stdout, the cache reused (one artifact per model and batch size).
    model = os.path.join(args.workdir, "st-mean")
    p = subprocess.run([args.transfuse, "embed", model, "--input", text], capture_output=True,
                       text=True, env=env)
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    reused = p.returncode == 0 and "compiled" not in p.stderr
    ok &= check_close("embed as JSON lines", np.asarray(rows), np.load(
        os.path.join(args.workdir, "embed-mean-32.npy")), 1e-7) and reused
    cached = [d for d in os.listdir(os.path.join(env["XDG_CACHE_HOME"], "transfuse"))]
    print(f"cache: {len(cached)} artifacts for 3 models at batch 32 and one at 5, "
          f"{'reused' if reused else 'NOT REUSED'} on the third call")
    ok &= len(cached) == 4
    # The key covers the modules' folders and not the directory's path:
    # st-mean's pooling turned to max is st-max's files, and gets its artifact.
    write_sentence_transformers(model, "max", True)
    out = os.path.join(args.workdir, "embed-mean-as-max.npy")
    p = subprocess.run([args.transfuse, "embed", model, "--input", text, "--out", out],
                       capture_output=True, text=True, env=env)
    fine = (p.returncode == 0 and "compiled" not in p.stderr and
            np.array_equal(np.load(out), np.load(os.path.join(args.workdir, "embed-max-32.npy"))))
    print(f"a changed 1_Pooling/config.json: {'st-max artifact' if fine else 'NOT AS EXPECTED'}")
    ok &= fine
    write_sentence_transformers(model, "mean", True)
    # --dtype int8 and bf16: each its own artifact (int8: linear layers on
    # int8 weights; bf16: every product on bf16 operands); the vectors
    # (normalized) near the float32 ones, not the same.
    for dtype in ("int8", "bf16"):
        out = os.path.join(args.workdir, f"embed-{dtype}.npy")
        p = subprocess.run([args.transfuse, "embed", model, "--dtype", dtype, "--input", text,
                            "--out", out], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            print(f"embed --dtype {dtype} failed: {p.stderr}")
            return False
        got, want = np.load(out), np.load(os.path.join(args.workdir, "embed-mean-32.npy"))
        cosine = float((got * want).sum(axis=1).min())
        print(f"embed --dtype {dtype}: least cosine to float32 {cosine:.6f}, "
              f"max |difference| {float(np.abs(got - want).max()):.3g}, "
              f"{'compiled' if 'compiled' in p.stderr else 'NOT COMPILED'}")
        ok &= cosine > 0.999 and not np.array_equal(got, want) and "compiled" in p.stderr
    # An artifact compiled from the directory takes text alone (its tokenizer
    # carried), with the weights named; without them it says so.
    art = os.path.join(args.workdir, "st-mean-artifact")
    run([args.transfuse, "compile", model, "-o", art, "--fusion", "all", "--max-batch", "32",
         "--max-seq-len", "64"])
    out = os.path.join(args.workdir, "embed-artifact.npy")
    p = subprocess.run([args.transfuse, "embed", art, "--weights", model, "--input", text,
                        "--out", out], capture_output=True, text=True)
    ok &= p.returncode == 0 and check_close(
        "embed from an artifact", np.load(out), np.load(os.path.join(args.workdir,
                                                                      "embed-mean-32.npy")), 1e-6)
    # Bad input: one clear error, no output.
    bad = [
        ([art, "--input", text, "--out", "x.npy"], "give its weights with --weights",
         "an artifact without --weights"),
        ([art, "--weights", model, "--dtype", "int8", "--input", text, "--out", "x.npy"],
         "is a compiled artifact", "--dtype on an artifact"),
        ([model, "--dtype", "int4", "--input", text, "--out", "x.npy"],
         "--dtype int4 is not one of f32, bf16, int8", "an unknown --dtype"),
        ([model, "--input", text, "--no-truncate", "--max-seq-len", "12", "--out", "x.npy"],
         "tokens", "a line over --max-seq-len with --no-truncate"),
        ([os.path.join(args.workdir, "model-f32"), "--input", text], "has no embed entry",
         "a model without a Pooling module"),
        ([model, "--input", os.path.join(args.workdir, "none.txt")], "none.txt", "a missing input"),
    ]
    for argv, expect, what in bad:
        out = os.path.join(args.workdir, "x.npy")
        if os.path.exists(out):
            os.remove(out)
        p = subprocess.run([args.transfuse, "embed"] + [a if a != "x.npy" else out for a in argv],
                           capture_output=True, text=True, env=env)
        fine = p.returncode != 0 and expect in p.stderr and not os.path.exists(out)
        print(f"{what}: {'refused' if fine else 'NOT REFUSED AS EXPECTED'}: {p.stderr.strip()}")
        ok &= fine
    return ok


def golden_cases(args):
    """encode, classify and embed against Hugging Face's BertModel,
    BertForSequenceClassification and sentence-transformers' pooling
    (bert-golden/, made by make_bert_golden.py), on a padded batch."""
    ok = True
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(args.workdir, "cache-golden"))
    for name, cfg in GOLDEN_CONFIGS.items():
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bert-golden",
                            name + ".safetensors")
        golden = safetensors_io.read(path)
        if json.loads(safetensors_io.read_metadata(path)["config"]) != cfg:
            print(f"golden {name}: {path} was made from another config: run make_bert_golden.py")
            ok = False
            continue
        model = os.path.join(args.workdir, "golden-" + name)
        write_dir(model, cfg, golden_weights(cfg))
        write_sentence_transformers(model, "mean", True, cfg["hidden_size"])
        feeds = os.path.join(args.workdir, f"golden-{name}-inputs.safetensors")
        safetensors_io.write(feeds, {k: golden[k] for k in ("input_ids", "attention_mask",
                                                           "token_type_ids")})
        for entry, output in (("encode", "last_hidden_state"), ("classify", "logits"),
                              ("embed", "sentence_embedding")):
            got = os.path.join(args.workdir, f"golden-{name}-{entry}.safetensors")
            p = subprocess.run([args.transfuse, "run", model, "--entry", entry, "--inputs", feeds,
                                "--outputs", got], capture_output=True, text=True, env=env)
            if p.returncode != 0:
                print(f"golden {name} {entry}: {p.stderr.strip()}")
                ok = False
                continue
            ok &= check_close(f"{name} {entry} against Hugging Face's",
                              safetensors_io.read(got)[output], golden[output], 1e-5)
    return ok


def inputs(cfg, rng, batch, length):
    ids = rng.integers(1, cfg["vocab_size"], size=(batch, length)).astype(np.int32)
    mask = np.ones((batch, length), dtype=np.int32)
    for b in range(1, batch):  # trailing padding of another length per row
        n = (b * length) // (batch + 1)
        if n:
            mask[b, -n:] = 0
            ids[b, -n:] = 0
    types = (rng.integers(0, 2, size=(batch, length)) * (np.arange(length) >= length // 2)).astype(np.int32)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def run(cmd, expect_ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if expect_ok and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stdout}{p.stderr}")
    return p


def torch_bert(cfg, weights, ids, mask, types):
    """BertModel's forward in torch.nn.functional, fp64."""
    import torch
    import torch.nn.functional as F
    W = {k[5:] if k.startswith("bert.") else k: torch.tensor(np.asarray(v, np.float64))
         for k, v in weights.items()}
    d, H, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    ids, types = torch.tensor(ids, dtype=torch.long), torch.tensor(types, dtype=torch.long)
    B, S = ids.shape
    e = "embeddings."
    h = (F.embedding(ids, W[e + "word_embeddings.weight"]) + W[e + "position_embeddings.weight"][:S]
         + F.embedding(types, W[e + "token_type_embeddings.weight"]))
    h = F.layer_norm(h, (d,), W[e + "LayerNorm.weight"], W[e + "LayerNorm.bias"], eps)
    keep = torch.tensor(mask != 0)[:, None, None, :]
    lin = lambda x, p: F.linear(x, W[p + ".weight"], W[p + ".bias"])
    heads = lambda x: x.view(B, S, H, d // H).transpose(1, 2)
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = (heads(lin(h, p + "attention.self." + n)) for n in ("query", "key", "value"))
        s = (q @ k.transpose(-1, -2)) / (d // H) ** 0.5
        a = torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ v
        a = lin(a.transpose(1, 2).reshape(B, S, d), p + "attention.output.dense")
        ln = lambda x, n: F.layer_norm(x, (d,), W[p + n + ".weight"], W[p + n + ".bias"], eps)
        h = ln(h + a, "attention.output.LayerNorm")
        f = lin(F.gelu(lin(h, p + "intermediate.dense")), p + "output.dense")
        h = ln(h + f, "output.LayerNorm")
    return h.numpy()


def check_close(what, got, want, tol):
    scale = max(1.0, float(np.abs(want).max()))
    err = float(np.abs(np.asarray(got, np.float64) - want).max())
    ok = err <= tol * scale
    print(f"{what}: max |error| = {err:.3g} (bound {tol * scale:.3g}) {'ok' if ok else 'FAILED'}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--transfuse", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    rng = np.random.default_rng(7)
    ok = True
    weights = bert_weights(CONFIG, rng)
    x = inputs(CONFIG, rng, 3, 9)
    in_path = os.path.join(args.workdir, "inputs.safetensors")
    safetensors_io.write(in_path, x)
    in64_path = os.path.join(args.workdir, "inputs-int64.safetensors")  # the reference reads these
    safetensors_io.write(in64_path, {k: v.astype(np.int64) for k, v in x.items()})

    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    want = oracle.bert(CONFIG, weights, x["input_ids"], x["attention_mask"], x["token_type_ids"])
    if have_torch:
        ok &= check_close("oracle.bert against torch", want,
                          torch_bert(CONFIG, weights, x["input_ids"], x["attention_mask"],
                                     x["token_type_ids"]), 1e-10)
    else:
        print("torch is absent: oracle.bert not checked against torch")

    # A BertForSequenceClassification's head (classify), and an unknown key (a warning).
    extra = {"bert.pooler.dense.weight": (0.2 * rng.standard_normal((32, 32))).astype(np.float32),
             "bert.pooler.dense.bias": (0.1 * rng.standard_normal(32)).astype(np.float32),
             "classifier.weight": (0.3 * rng.standard_normal((3, 32))).astype(np.float32),
             "classifier.bias": (0.1 * rng.standard_normal(3)).astype(np.float32)}
    f16 = dict(CONFIG, architectures=["BertForSequenceClassification"], some_new_key=1)
    for name, cfg, dtype, prefix, more in (("f32", CONFIG, "F32", "", None),
                                           ("f16", f16, "F16", "bert.", extra)):
        model = os.path.join(args.workdir, "model-" + name)
        write_dir(model, cfg, weights, dtype, prefix, more)
        shutil.copy(os.path.join(TOKENIZERS, "tokenizer.json"), model)
        shutil.copy(os.path.join(TOKENIZERS, "vocab.txt"), model)
        stored = safetensors_io.read(os.path.join(model, "model.safetensors"))
        exact = oracle.bert(CONFIG, stored, x["input_ids"], x["attention_mask"], x["token_type_ids"])
        for fusion in ("none", "all") if name == "f32" else ("all",):
            out = os.path.join(args.workdir, f"out-{name}-{fusion}")
            p = run([args.transfuse, "compile", model, "-o", out, "--fusion", fusion])
            for f in ("config.json", "tokenizer.json", "vocab.txt"):  # an artifact takes text alone
                with open(os.path.join(model, f), "rb") as a, open(os.path.join(out, f), "rb") as b:
                    if a.read() != b.read():
                        print(f"compile {name}: {f} not carried into the artifact as it is")
                        ok = False
            if name == "f16" and "unknown key 'some_new_key'" not in p.stderr:
                print(f"compile {name}: no warning naming the unknown key:\n{p.stderr}")
                ok = False
            got = os.path.join(out, "got.safetensors")
            run([args.transfuse, "run", out, "--entry", "encode", "--inputs", in_path,
                 "--weights", os.path.join(model, "model.safetensors"), "--outputs", got])
            ok &= check_close(f"{name} compiled, fusion {fusion}",
                              safetensors_io.read(got)["last_hidden_state"], exact, 1e-4)
            if name == "f16":
                # classify: the classifier over tanh(pooler(h[:, 0])), fp64 from the stored weights.
                st = {k[5:] if k.startswith("bert.") else k: v.astype(np.float64)
                      for k, v in stored.items()}
                pooled = np.tanh(exact[:, 0] @ st["pooler.dense.weight"].T + st["pooler.dense.bias"])
                logits = pooled @ st["classifier.weight"].T + st["classifier.bias"]
                run([args.transfuse, "run", out, "--entry", "classify", "--inputs", in_path,
                     "--weights", model, "--outputs", got])
                ok &= check_close("f16 classify", safetensors_io.read(got)["logits"], logits, 1e-4)
                # --train: the classifier's loss and its gradients, fused, against the reference.
                p = run([args.transfuse, "compile", model, "-o", out + "-train", "--train",
                         "--fusion", "all", "--verify", "--max-batch", "3", "--max-seq-len", "9"],
                        expect_ok=False)
                fine = p.returncode == 0 and "verify @loss_grad" in p.stdout
                print(f"--train with a classifier head: {'verified' if fine else 'FAILED'}\n"
                      f"{p.stdout.strip()}{p.stderr.strip()}")
                ok &= fine
            if name == "f32" and fusion == "all":
                p = run([args.transfuse, "compile", model, "-o", out + "-train", "--train"],
                        expect_ok=False)
                fine = (p.returncode != 0 and "training a bert model needs a task head" in p.stderr
                        and not os.path.exists(out + "-train"))
                print(f"--train without a head: {'refused' if fine else 'NOT REFUSED'}: "
                      f"{p.stderr.strip()}")
                ok &= fine
                # Ids as int64 (what PyTorch and Hugging Face pass): the same bits;
                # an id outside int32 is refused, naming the input.
                in64 = os.path.join(args.workdir, "inputs-big.safetensors")
                got64 = os.path.join(out, "got64.safetensors")
                run([args.transfuse, "run", out, "--entry", "encode", "--inputs", in64_path,
                     "--weights", os.path.join(model, "model.safetensors"), "--outputs", got64])
                same = np.array_equal(safetensors_io.read(got64)["last_hidden_state"],
                                      safetensors_io.read(got)["last_hidden_state"])
                print(f"int64 ids: {'the same bits as int32' if same else 'DIFFERENT from int32'}")
                ok &= same
                big = dict(x, input_ids=x["input_ids"].astype(np.int64))
                big["input_ids"][1, 2] = 2**32 + 3
                safetensors_io.write(in64, big)
                p = run([args.transfuse, "run", out, "--entry", "encode", "--inputs", in64,
                         "--outputs", got64], expect_ok=False)
                refused = p.returncode != 0 and "input 'input_ids' holds 4294967299" in p.stderr
                print(f"an id outside int32: {'refused' if refused else 'NOT REFUSED'}: "
                      f"{p.stderr.strip()}")
                ok &= refused
            if name == "f32" and fusion == "none":
                ref = os.path.join(out, "ref.safetensors")
                run([args.transfuse, "run", out, "--backend", "reference", "--entry", "encode",
                     "--f64-outputs", "--inputs", in64_path,
                     "--weights", os.path.join(model, "model.safetensors"), "--outputs", ref])
                ok &= check_close(f"{name} reference", safetensors_io.read(ref)["last_hidden_state"],
                                  exact, 1e-6)

    ok &= sharded_cases(args, weights, in_path, oracle.bert(
        CONFIG, weights, x["input_ids"], x["attention_mask"], x["token_type_ids"]))

    ok &= embed_cases(args, rng)
    ok &= golden_cases(args)

    # The artifact may not go into the model's own directory (its files would go).
    model = os.path.join(args.workdir, "model-f32")
    p = run([args.transfuse, "compile", model, "-o", model], expect_ok=False)
    kept = os.path.exists(os.path.join(model, "config.json"))
    fine = p.returncode != 0 and "is the model's own directory" in p.stderr and kept
    print(f"-o the model's directory: {'refused' if fine else 'NOT REFUSED'}: {p.stderr.strip()}")
    ok &= fine

    # Bad directories: one error naming the file and the key, no output.
    bad = [
        ("pickle", None, "pytorch_model.bin"),
        ("roberta", dict(CONFIG, model_type="roberta"), "'roberta' is not supported yet"),
        ("relative", dict(CONFIG, position_embedding_type="relative_key"),
         "key 'position_embedding_type'"),
        ("act", dict(CONFIG, hidden_act="quick_gelu"), "key 'hidden_act'"),
        ("decoder", dict(CONFIG, is_decoder=True), "key 'is_decoder'"),
        ("heads", dict(CONFIG, num_attention_heads=5), "key 'num_attention_heads'"),
        ("type", None, "key 'model_type': missing"),
    ]
    # sentence-transformers modules that are not supported, by name.
    dense = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
             {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
             {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]
    modes = {"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True}
    bad += [
        ("dense", ("modules.json", dense), "module type 'sentence_transformers.models.Dense'"),
        ("sqrt", ("1_Pooling/config.json", dict(modes, pooling_mode_mean_tokens=False,
                                                 pooling_mode_mean_sqrt_len_tokens=True)),
         "key 'pooling_mode_mean_sqrt_len_tokens': not supported"),
        ("two-modes", ("1_Pooling/config.json", dict(modes, pooling_mode_max_tokens=True)),
         "exactly one pooling_mode_* must be true (2 are)"),
        ("width", ("1_Pooling/config.json", dict(modes, word_embedding_dimension=31)),
         "key 'word_embedding_dimension': 31 is not the model's hidden_size 32"),
        ("deep", ("modules.json", functools.reduce(lambda a, _: [a], range(200), [])),
         "brackets nest deeper than"),
    ]
    for name, cfg, expect in bad:
        model = os.path.join(args.workdir, "bad-" + name)
        shutil.rmtree(model, ignore_errors=True)
        os.makedirs(model)
        if isinstance(cfg, tuple):  # a sentence-transformers directory with one bad file
            write_sentence_transformers(model, "mean", False)
            os.makedirs(os.path.dirname(os.path.join(model, cfg[0])), exist_ok=True)
            with open(os.path.join(model, cfg[0]), "w") as f:
                json.dump(cfg[1], f)
            cfg = CONFIG
        if name == "pickle":
            with open(os.path.join(model, "config.json"), "w") as f:
                json.dump(CONFIG, f)
            open(os.path.join(model, "pytorch_model.bin"), "wb").close()
        else:
            with open(os.path.join(model, "config.json"), "w") as f:
                json.dump(cfg if cfg else {k: v for k, v in CONFIG.items() if k != "model_type"}, f)
        out = os.path.join(args.workdir, "out-bad-" + name)
        shutil.rmtree(out, ignore_errors=True)
        p = run([args.transfuse, "compile", model, "-o", out], expect_ok=False)
        fine = (p.returncode != 0 and expect in p.stderr and p.stderr.count("error:") == 1
                and not os.path.exists(out))
        print(f"bad directory {name}: {'refused' if fine else 'NOT REFUSED AS EXPECTED'}: "
              f"{p.stderr.strip()}")
        ok &= fine
    print("bert_e2e: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
