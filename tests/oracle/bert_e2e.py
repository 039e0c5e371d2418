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
naming the file and key, and leave no output.

usage: bert_e2e.py --transfuse BIN --workdir DIR
"""
import argparse
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

    # Task-model extras the encoder ignores, and an unknown key (a warning).
    extra = {"bert.pooler.dense.weight": np.zeros((32, 32), np.float32),
             "bert.pooler.dense.bias": np.zeros(32, np.float32),
             "classifier.weight": np.zeros((2, 32), np.float32),
             "classifier.bias": np.zeros(2, np.float32)}
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
            if name == "f32" and fusion == "all":
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
    for name, cfg, expect in bad:
        model = os.path.join(args.workdir, "bad-" + name)
        shutil.rmtree(model, ignore_errors=True)
        os.makedirs(model)
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
