#!/usr/bin/python3
"""Property test of --fusion attention on random attention-like graphs.

Generates N random graphs (seeded) as MLIR text, each a variant of

    out = softmax(mask(scale·(Q·Kᵀ) + bias))·V      Q [B,H,Sq,D], K [B,H,Sk,D], V [B,H,Sk,Dv]

with random sizes (B, H, Sq, Sk, D, Dv; B, Sq, Sk, D, Dv static or dynamic, and
sometimes all of H, Sq, Sk, D, Dv equal so that a wrong permutation still
type-checks); the scale as `scale`, `mul` or `div` by a constant, after the
matmul or on Q / K before it; masks none, causal (transfuse.causal_mask),
key padding from a BOOL [B, Sk] input or from i32 tokens
(transfuse.key_padding_mask) reshaped to [B,1,1,Sk], a general boolean mask, an
additive float bias, in any combination and order; Q, K and V each either
plain or produced by a random transpose of an input (K also with or without
the matmul's transpose flag, so that permutations other than [0,1,3,2] feed
the matmul: the Inductor bug); optional dropout after the softmax. One graph
in four is "almost attention" and must NOT fuse: softmax over the query axis,
a scale by an input, a select with a finite fill, a second consumer of the
scores or of the probabilities, or a V whose dynamic length comes from another
input than K's.

Each graph is compiled with `transfuse compile --fusion attention --report`
and with `--fusion none`; both are run by the reference backend (fp64) on the
same random inputs. Checks:
  * the outputs agree within 1e-12 · max(1, max |out|);
  * a fusable graph: report.json says attention fused == 1 with no site left,
    and the fused model has one transfuse.attention and no transfuse.softmax;
  * an almost-attention graph: fused == 0 and the report lists the softmax's
    location with a non-empty reason that names the problem.

usage: property_test.py --transfuse BIN --workdir DIR [--count N] [--seed S]
Prints one line per graph and "N passed, M failed"; exits 1 on any failure.
"""
import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import safetensors_io  # noqa: E402

# Permutations of a rank-4 tensor that keep the batch dimension in place (an
# input's dynamic dimension 0 is the batch by the batch contract of docs/ir.md).
PERMS = [(0,) + p for p in itertools.permutations((1, 2, 3))]
IDENTITY = (0, 1, 2, 3)
SWAP_LAST = (0, 1, 3, 2)

# Almost-attention variants, with a word their not-fused reason must contain.
ALMOST = {
    "wrong_axis": "axis",
    "scale_by_input": "constant",
    "finite_fill": "-inf",
    "extra_scores_use": "second consumer",
    "extra_probs_use": "second consumer",
    "value_length": "length",
}


class Graph:
    """Builds the MLIR text of one graph. Values are (ssa name, dims), dims a
    list of size names ("B", "Sq", ...) or literal ints."""

    def __init__(self, sizes, dyn):
        self.sizes, self.dyn = sizes, dyn
        self.args, self.lines, self.results = [], [], []
        self.count = 0
        self.softmax_line = None  # 1-based line of the softmax in the file
        self.notes = []

    def dim(self, d):
        if isinstance(d, int):
            return str(d)
        return "?" if d in self.dyn else str(self.sizes[d])

    def type(self, dims, elem="f32"):
        return "tensor<" + "".join(self.dim(d) + "x" for d in dims) + elem + ">"

    def shape(self, dims):
        return [d if isinstance(d, int) else self.sizes[d] for d in dims]

    def fresh(self):
        self.count += 1
        return f"%v{self.count}"

    def emit(self, text):
        self.lines.append(text)

    def arg(self, name, dims, elem="f32", kind="float"):
        self.args.append({"name": name, "dims": dims, "elem": elem, "kind": kind})
        return (f"%{name}", dims, elem)

    def constant(self, literal, dims=()):
        r = self.fresh()
        self.emit(f"{r} = transfuse.constant dense<{literal}> : {self.type(list(dims))}")
        return (r, list(dims), "f32")

    def transpose(self, v, perm):
        if tuple(perm) == IDENTITY:
            return v
        r, dims = self.fresh(), [v[1][p] for p in perm]
        self.emit(f"{r} = transfuse.transpose {v[0]} {{permutation = array<i64: "
                  f"{', '.join(map(str, perm))}>}} : ({self.type(v[1], v[2])}) -> "
                  f"{self.type(dims, v[2])}")
        return (r, dims, v[2])

    def unary(self, op, v, attrs=""):
        r = self.fresh()
        self.emit(f"{r} = transfuse.{op} {v[0]}{attrs} : {self.type(v[1])}")
        return (r, v[1], "f32")

    def binary(self, op, a, b, dims):
        r = self.fresh()
        self.emit(f"{r} = transfuse.{op} {a[0]}, {b[0]} : ({self.type(a[1], a[2])}, "
                  f"{self.type(b[1], b[2])}) -> {self.type(dims)}")
        return (r, dims, "f32")

    def matmul(self, a, b, transpose_rhs, dims):
        r = self.fresh()
        flag = " {transpose_rhs = true}" if transpose_rhs else ""
        self.emit(f"{r} = transfuse.matmul {a[0]}, {b[0]}{flag} : ({self.type(a[1])}, "
                  f"{self.type(b[1])}) -> {self.type(dims)}")
        return (r, dims, "f32")

    def text(self):
        args = ", ".join(f"%{a['name']}: {self.type(a['dims'], a['elem'])} "
                         f"{{transfuse.name = \"{a['name']}\"}}" for a in self.args)
        results = ", ".join(f"{self.type(d)} {{transfuse.name = \"{n}\"}}"
                            for _, d, n in self.results)
        header = [f"// generated by tests/fusion/property_test.py; {'; '.join(self.notes)}",
                  f"func.func @forward({args}) -> ({results}) attributes "
                  "{transfuse.max_batch = 4 : i64, transfuse.max_seq_len = 16 : i64} {"]
        body = ["  " + line for line in self.lines]
        ret = ("  return " + ", ".join(v for v, _, _ in self.results) + " : " +
               ", ".join(self.type(d) for _, d, _ in self.results))
        for i, line in enumerate(body):
            if "transfuse.softmax" in line:
                self.softmax_line = len(header) + i + 1
        return "\n".join(header + body + [ret, "}"]) + "\n"


def operand(g, rng, name, target, allow_perm=True):
    """An input that becomes `target` dims: the input itself, or a random
    transpose of an input whose dims are the inverse permutation."""
    perm = PERMS[rng.integers(len(PERMS))] if allow_perm and rng.random() < 0.5 else IDENTITY
    src = [None] * 4
    for i, p in enumerate(perm):
        src[p] = target[i]
    v = g.transpose(g.arg(name, src), perm)
    return v, perm


def prescale(g, rng, v):
    """Optionally scales a matmul operand by a constant; returns (value, factor)."""
    r = rng.random()
    if r < 0.15:
        f = float(rng.choice([0.5, 0.25, 2.0]))
        return g.unary("scale", v, f" {{factor = {f!r} : f64}}"), f
    if r < 0.25:
        f = float(rng.choice([0.5, 0.7071067811865476]))
        c = g.constant(repr(f))
        return g.binary("mul", v, c, v[1]) if rng.random() < 0.5 else g.binary("mul", c, v, v[1]), f
    return v, 1.0


def build(rng, index):
    almost = None
    if rng.random() < 0.25:
        almost = list(ALMOST)[rng.integers(len(ALMOST))]
    trap = rng.random() < 0.3
    if trap:  # every non-batch size equal: any permutation type-checks
        s = int(rng.integers(2, 4))
        sizes = {"B": int(rng.integers(1, 4)), "H": s, "Sq": s, "Sk": s, "D": s, "Dv": s}
    else:
        sizes = {"B": int(rng.integers(1, 4)), "H": int(rng.integers(1, 4)),
                 "Sq": int(rng.integers(1, 6)), "Sk": int(rng.integers(1, 6)),
                 "D": int(rng.integers(1, 5)), "Dv": int(rng.integers(1, 5))}
    dyn = {d for d, p in (("B", 0.5), ("Sq", 0.5), ("Sk", 0.5), ("D", 0.3), ("Dv", 0.3))
           if rng.random() < p}
    if almost == "value_length":
        dyn.add("Sk")
    if almost is not None:  # one static head size, so that the near miss is the reason
        sizes["Dv"] = sizes["D"]
        dyn -= {"D", "Dv"}
    kinds = [m for m, p in (("causal", 0.35), ("padding", 0.35), ("bool_mask", 0.15),
                            ("bias", 0.3)) if rng.random() < p]
    if almost == "finite_fill" and not any(m in kinds for m in ("causal", "padding", "bool_mask")):
        kinds.append("padding")
    if "bool_mask" in kinds and sizes["Sq"] == 1:
        sizes["Sq"] = 2  # a [.., 1, Sq, Sk] mask with Sq = 1 would be key padding
    g = Graph(sizes, dyn)
    # What the pass can prove about the masks (docs/fusion.md): a causal_mask
    # of Q's and K's lengths is `causal`; a [B,1,1,Sk] mask is `key_padding`
    # when its Sk is provably K's (static here: a dynamic one comes from
    # another input); any other boolean mask leaves the pattern unfused, as
    # do head sizes that are dynamic or differ: the attention kernels take
    # causal and key-padding masks and one static head size.
    general = kinds.count("bool_mask") + (1 if "padding" in kinds and "Sk" in dyn else 0)
    # (V is tanh of K, of K's head size, when Sk is dynamic: see below.)
    v_from_k = "Sk" in dyn and almost != "value_length"
    one_head_size = "D" not in dyn and (v_from_k or (sizes["D"] == sizes["Dv"] and "Dv" not in dyn))
    if almost is None and (general or not one_head_size):
        # Either reason may be the one reported when both apply.
        expect = {"fuse": False,
                  "keyword": (("neither causal nor key padding",) if general else ()) +
                             (() if one_head_size else ("one static head size",))}
    else:
        expect = {"fuse": almost is None, "keyword": ALMOST.get(almost)}

    # Q [B,H,Sq,D]
    q, qperm = operand(g, rng, "q", ["B", "H", "Sq", "D"])
    q0 = q
    q, qf = prescale(g, rng, q)
    # K: [B,H,Sk,D] with the transpose flag, or [B,H,D,Sk] without it.
    flag = bool(rng.random() < 0.5)
    k, kperm = operand(g, rng, "k", ["B", "H", "Sk", "D"] if flag else ["B", "H", "D", "Sk"])
    k0 = k
    k, kf = prescale(g, rng, k)
    g.notes.append(f"q perm {list(qperm)}, k perm {list(kperm)} "
                   f"{'with' if flag else 'without'} transpose_rhs")
    scores = ["B", "H", "Sq", "Sk"]
    s = g.matmul(q, k, flag, scores)
    scale = qf * kf

    # V [B,H,Sk,Dv]: its own input when Sk is static (or for the
    # value_length variant), else tanh of K itself so that its length is K's.
    if "Sk" not in dyn or almost == "value_length":
        vflag = bool(rng.random() < 0.3)
        v, _ = operand(g, rng, "v", ["B", "H", "Dv", "Sk"] if vflag else ["B", "H", "Sk", "Dv"])
        vdims = ["B", "H", "Sq", "Dv"]
    else:
        kk = k0 if flag else g.transpose(k0, SWAP_LAST)
        v, vflag, vdims = g.unary("tanh", kk), False, ["B", "H", "Sq", "D"]

    # The steps between the matmul and the softmax, in random order.
    steps = list(kinds)
    post = rng.choice(["none", "scale", "mul", "div", "two"], p=[0.15, 0.3, 0.2, 0.2, 0.15])
    if post == "two":
        steps += ["scale", "div"]
    elif post != "none":
        steps.append(str(post))
    if almost == "scale_by_input":
        steps.append("input_scale")
    order = list(rng.permutation(len(steps)))
    steps = [steps[i] for i in order]
    g.notes.append("scores: " + (" -> ".join(steps) or "plain"))
    ninf = g.constant("0xFF800000")
    fill = g.constant("-1.000000e+09") if almost == "finite_fill" else ninf
    extra = None
    for i, step in enumerate(steps):
        if step == "causal":
            n, m, c, r = g.fresh(), g.fresh(), g.fresh(), g.fresh()
            g.emit(f"{n} = transfuse.dim {q0[0]}, 2 : {g.type(q0[1])}")
            g.emit(f"{m} = transfuse.dim {k0[0]}, {2 if flag else 3} : {g.type(k0[1])}")
            g.emit(f"{c} = transfuse.causal_mask {n}, {m} : {g.type(['Sq', 'Sk'], 'i1')}")
            g.emit(f"{r} = transfuse.select {c}, {s[0]}, {fill[0]} : ({g.type(['Sq', 'Sk'], 'i1')}, "
                   f"{g.type(scores)}, tensor<f32>) -> {g.type(scores)}")
            s = (r, scores, "f32")
        elif step in ("padding", "bool_mask"):
            if step == "padding" and rng.random() < 0.5:
                tok = g.arg("tokens", ["B", "Sk"], "i32", kind="tokens")
                kp = g.fresh()
                g.emit(f"{kp} = transfuse.key_padding_mask {tok[0]} {{pad_id = 0 : i64}} : "
                       f"({g.type(['B', 'Sk'], 'i32')}) -> {g.type(['B', 'Sk'], 'i1')}")
                src = (kp, ["B", "Sk"], "i1")
            elif step == "padding":
                src = g.arg("keep", ["B", "Sk"], "i1", kind="keep")
            if step == "padding":
                mdims = ["B", 1, 1, "Sk"]
                m = g.fresh()
                g.emit(f"{m} = transfuse.reshape {src[0]} : ({g.type(src[1], 'i1')}) -> "
                       f"{g.type(mdims, 'i1')}")
            else:
                mdims = [[1, "H", "Sq", "Sk"], ["B", 1, "Sq", "Sk"], ["Sq", "Sk"]][
                    rng.integers(2 if "Sq" in dyn else 3)]  # dim 0 of an input is B if dynamic
                m = g.arg("mask", mdims, "i1", kind="keep")[0]
            r = g.fresh()
            g.emit(f"{r} = transfuse.select {m}, {s[0]}, {fill[0]} : ({g.type(mdims, 'i1')}, "
                   f"{g.type(scores)}, tensor<f32>) -> {g.type(scores)}")
            s = (r, scores, "f32")
        elif step == "bias":
            bdims = [["B", 1, 1, "Sk"], [1, "H", "Sq", "Sk"], ["B", "H", "Sq", "Sk"],
                     ["Sq", "Sk"]][rng.integers(3 if "Sq" in dyn else 4)]
            b = g.arg("bias", bdims)
            s = g.binary("add", s, b, scores) if rng.random() < 0.5 else g.binary("add", b, s, scores)
        elif step == "scale":
            f = float(rng.choice([0.125, 0.25, 0.35355339059327373, 0.5, 2.0]))
            scale *= f
            s = g.unary("scale", s, f" {{factor = {f!r} : f64}}")
        elif step == "mul":
            f = float(rng.choice([0.125, 0.5, 0.7071067811865476]))
            scale *= f
            shape = [[], [1], [1, 1, 1, 1]][rng.integers(3)]
            c = g.constant(repr(f), shape)
            s = g.binary("mul", s, c, scores) if rng.random() < 0.5 else g.binary("mul", c, s, scores)
        elif step == "div":
            f = float(rng.choice([2.0, 4.0, 2.8284271247461903, 8.0]))
            scale /= f
            c = g.constant(repr(f), [[], [1, 1]][rng.integers(2)])
            s = g.binary("div", s, c, scores)
        elif step == "input_scale":
            c = g.arg("factor", [], kind="factor")
            s = g.binary("mul", s, c, scores)
        if almost == "extra_scores_use" and extra is None and (i == len(steps) - 1 or rng.random() < 0.5):
            extra = s
    if almost == "extra_scores_use" and extra is None:
        extra = s  # no steps: the raw scores
    axis = 2 if almost == "wrong_axis" else int(rng.choice([3, -1]))
    p = g.unary("softmax", s, f" {{axis = {axis} : i64}}")
    if almost == "extra_probs_use":
        extra = p
    if rng.random() < 0.3:
        rate = float(rng.choice([0.1, 0.25]))
        p = g.unary("dropout", p, f" {{rate = {rate!r} : f64, seed = {int(rng.integers(100))} : i64, "
                                  f"stream = {int(rng.integers(8))} : i64}}")
        g.notes.append(f"dropout {rate}")
    out = g.matmul(p, v, vflag, vdims)
    g.results.append((out[0], out[1], "out"))
    if extra is not None:
        g.results.append((extra[0], extra[1], "extra"))
    g.notes.insert(0, f"graph {index}: " + (f"almost ({almost})" if almost else "attention") +
                   f", sizes {sizes}, dynamic {sorted(dyn)}, scale {scale!r}")
    return g, expect


def inputs_for(g, rng):
    tensors = {}
    for a in g.args:
        shape = g.shape(a["dims"])
        if a["kind"] == "keep":
            keep = rng.random(shape) < 0.7
            if rng.random() < 0.4 and keep.size:  # a row with every key masked
                keep.reshape(-1, shape[-1])[0] = False
            tensors[a["name"]] = keep
        elif a["kind"] == "tokens":
            t = rng.integers(0, 4, size=shape).astype(np.int32)
            tensors[a["name"]] = t
        elif a["kind"] == "factor":
            tensors[a["name"]] = np.asarray(0.3, dtype=np.float32)
        else:
            tensors[a["name"]] = rng.standard_normal(shape).astype(np.float32)
    return tensors


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def check(args, g, expect, rng, index):
    base = os.path.join(args.workdir, f"graph{index:03d}")
    mlir = base + ".mlir"
    with open(mlir, "w") as f:
        f.write(g.text())
    problems = []
    outs = {}
    for strategy in ("none", "attention"):
        out_dir = f"{base}-{strategy}"
        shutil.rmtree(out_dir, ignore_errors=True)
        c = run([args.transfuse, "compile", mlir, "-o", out_dir, "--fusion", strategy, "--report",
                 "--emit", "mlir"])
        if c.returncode != 0:
            what = "the generated graph is invalid" if strategy == "none" else "fusion broke it"
            return [f"compile --fusion {strategy} failed ({what}): {c.stdout.strip()[-600:]}"]
    inputs = base + "-inputs.safetensors"
    safetensors_io.write(inputs, inputs_for(g, rng))
    for strategy in ("none", "attention"):
        out = f"{base}-{strategy}.out.safetensors"
        c = run([args.transfuse, "run", f"{base}-{strategy}", "--inputs", inputs, "--outputs",
                 out, "--f64-outputs", "--backend", "reference"])
        if c.returncode != 0:
            return [f"run --fusion {strategy} failed: {c.stdout.strip()[-600:]}"]
        outs[strategy] = safetensors_io.read(out)
    for name, ref in outs["none"].items():
        got = outs["attention"].get(name)
        if got is None or got.shape != ref.shape:
            problems.append(f"output {name}: shape {None if got is None else got.shape} != {ref.shape}")
            continue
        if np.isnan(ref).any():
            problems.append(f"output {name}: the unfused graph gives NaN")
        # Equal values (masked scores are -inf in both) differ by 0; a value
        # against NaN or an infinity against a number differs by inf.
        with np.errstate(invalid="ignore"):
            same = (got == ref) | (np.isnan(got) & np.isnan(ref))
            diff = np.nan_to_num(np.where(same, 0.0, np.abs(got - ref)), nan=np.inf)
        finite = np.abs(ref[np.isfinite(ref)])
        tol = 1e-12 * max(1.0, float(finite.max()) if finite.size else 1.0)
        err = float(diff.max()) if diff.size else 0.0
        if err > tol:
            problems.append(f"output {name}: max |fused - unfused| = {err:.3e} > {tol:.1e}")
    with open(f"{base}-attention/report.json") as f:
        report = json.load(f).get("attention", {"fused": 0, "not_fused": []})
    with open(f"{base}-attention/model.mlir") as f:
        fused_ir = f.read()
    if expect["fuse"]:
        if report["fused"] != 1 or report["not_fused"]:
            problems.append(f"expected to fuse; report says {json.dumps(report)}")
        if fused_ir.count("transfuse.attention") != 1 or "transfuse.softmax" in fused_ir:
            problems.append("expected one transfuse.attention and no softmax in the fused IR")
    else:
        if report["fused"] != 0 or "transfuse.attention" in fused_ir:
            problems.append(f"must not fuse; report says {json.dumps(report)}")
        sites = report["not_fused"]
        where = f":{g.softmax_line}:"
        if len(sites) != 1 or where not in sites[0]["location"]:
            problems.append(f"expected one not-fused site at line {g.softmax_line}; got {sites}")
        else:
            keywords = expect["keyword"]
            keywords = keywords if isinstance(keywords, tuple) else (keywords,)
            if not sites[0]["reason"] or not any(k in sites[0]["reason"] for k in keywords):
                problems.append(f"reason {sites[0]['reason']!r} does not mention any of {keywords!r}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--transfuse", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    start = time.time()
    passed = failed = 0
    for i in range(args.count):
        g, expect = build(rng, i)
        try:
            problems = check(args, g, expect, rng, i)
        except Exception as e:  # a broken output file, a missing report: a failure, not a crash
            problems = [f"{type(e).__name__}: {e}"]
        summary = g.notes[0]
        if problems:
            failed += 1
            print(f"FAIL {summary}  [{os.path.join(args.workdir, f'graph{i:03d}.mlir')}]")
            for p in problems:
                print(f"     {p}")
        else:
            passed += 1
            print(f"ok   {summary}")
    print(f"{passed} passed, {failed} failed ({time.time() - start:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
