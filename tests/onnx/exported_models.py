#!/usr/bin/env python3
"""Exported models compiled, fused and run: PyTorch modules exported by torch.onnx, and the
stored opset-23 fixtures.

Tiny random models of the four families written here as PyTorch modules the
way their reference implementations write them, exported by Debian's
python3-torch (torch.onnx.export, opset 17, dynamic batch and sequence), then
`transfuse compile --fusion all`:
  - bert: post-LN, nn.LayerNorm (LayerNormalization), the padding mask made
    arithmetic ((1 - float(mask)) · -10000 added), the scale after Q·Kᵀ,
    erf GELU, positions from arange;
  - bert-pre: pre-LN with a LayerNorm written out (ReduceMean, Sub, Pow,
    Sqrt, Div), the mask by Where(bool(mask), s, -inf), the scale on Q
    before Q·Kᵀ, the weights stored as fp16 and cast to fp32 in the graph
    (converted with the onnx venv's onnx package);
  - gpt2: Conv1D projections (addmm: Gemm), one c_attn split into Q, K and
    V, the causal mask sliced from a tril buffer and applied by Where with
    finfo.min, tanh GELU written out (Pow, Tanh);
  - vit: Conv2d patch embedding, a class token, learned positions, pre-LN,
    nn.GELU;
  - bert-softcap: the scores through tanh, which attention does not absorb:
    the report's why-not names each exported node it broke at;
  - llama: RMSNorm written out (Pow, ReduceMean, Add, Sqrt, Reciprocal),
    rotary embeddings from cos/sin buffers by rotate-half (Slice, Neg,
    Concat), grouped K/V heads repeated by Expand and Reshape, the causal
    mask by masked_fill, SwiGLU (Sigmoid, Mul).
The opset-23 fixtures (tests/onnx/fixtures, written by make_opset23_fixtures.py
with the onnx package's helper API: BERT-shaped layers with LayerNormalization,
Attention and Gelu; Llama-shaped with RMSNormalization, RotaryEmbedding and
grouped-head causal Attention) are compiled the same way and compared with the
outputs stored beside them (onnx's ReferenceEvaluator's).
Each compiled artifact is checked on its IR and report: one fused attention
per layer and no softmax left, the norms fused with their residual adds, the
activations in the linear epilogues, and no decomposed GELU, SiLU or norm
left; then run on two input sizes against the exporting module's outputs,
within 1e-4 of scale.

    exported_models.py --transfuse build/tools/transfuse --onnx-python PY --workdir DIR [--only NAME]
"""
import argparse
import json
import math
import os
import re
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import safetensors_io  # noqa: E402
from artifact_check import check_output, run  # noqa: E402


def split_heads(t, h):
    b, s, d = t.shape
    return t.view(b, s, h, d // h).transpose(1, 2)


def merge_heads(t):
    b, h, s, dh = t.shape
    return t.transpose(1, 2).reshape(b, s, h * dh)


class DecomposedLayerNorm(nn.Module):
    """A LayerNorm written out, as older exports and hand-written models do."""

    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(d))
        self.bias = nn.Parameter(0.1 * torch.randn(d))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        d = x - mean
        var = d.pow(2).mean(-1, keepdim=True)
        return d / torch.sqrt(var + self.eps) * self.weight + self.bias


class BertLayer(nn.Module):
    def __init__(self, d, h, pre_ln, mask_by_where, scale_first, softcap):
        super().__init__()
        self.h, self.pre_ln, self.mask_by_where, self.scale_first = h, pre_ln, mask_by_where, scale_first
        self.softcap = softcap
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.f1, self.f2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        norm = DecomposedLayerNorm if pre_ln else nn.LayerNorm
        self.ln1, self.ln2 = norm(d), norm(d)

    def attention(self, x, mask):
        q, k, v = (split_heads(p(x), self.h) for p in (self.q, self.k, self.v))
        scale = 1.0 / math.sqrt(q.shape[-1])
        if self.scale_first:
            s = (q * scale) @ k.transpose(-1, -2)
        else:
            s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if self.softcap:  # what attention fusion does not absorb: its why-not names the node
            s = torch.tanh(s / 8.0) * 8.0
        m = mask[:, None, None, :]
        if self.mask_by_where:
            s = torch.where(m.bool(), s, torch.tensor(float("-inf")))
        else:
            s = s + (1.0 - m.to(s.dtype)) * -10000.0
        return self.o(merge_heads(torch.softmax(s, -1) @ v))

    def forward(self, x, mask):
        if self.pre_ln:
            x = x + self.attention(self.ln1(x), mask)
            return x + self.f2(F.gelu(self.f1(self.ln2(x))))
        x = self.ln1(x + self.attention(x, mask))
        return self.ln2(x + self.f2(F.gelu(self.f1(x))))


class Bert(nn.Module):
    def __init__(self, pre_ln=False, mask_by_where=False, scale_first=False, softcap=False, layers=2,
                 d=32, h=4):
        super().__init__()
        self.tok, self.pos = nn.Embedding(100, d), nn.Embedding(64, d)
        self.ln = nn.LayerNorm(d)
        self.layers = nn.ModuleList(
            BertLayer(d, h, pre_ln, mask_by_where, scale_first, softcap) for _ in range(layers))

    def forward(self, input_ids, attention_mask):
        pos = torch.arange(input_ids.shape[1]).unsqueeze(0)
        x = self.ln(self.tok(input_ids) + self.pos(pos))
        for layer in self.layers:
            x = layer(x, attention_mask)
        return x


def bert_inputs(batch, seq):
    g = torch.Generator().manual_seed(batch * 100 + seq)
    ids = torch.randint(0, 100, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    for b in range(1, batch):
        mask[b, seq - b:] = 0  # padding at the end; every row keeps a token
    return {"input_ids": ids, "attention_mask": mask}


class Conv1D(nn.Module):
    """GPT-2's projection: addmm(bias, x, W) with W [in, out]."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(0.2 * torch.randn(n_in, n_out))
        self.bias = nn.Parameter(0.1 * torch.randn(n_out))

    def forward(self, x):
        shape = x.shape[:-1] + (self.weight.shape[1],)
        return torch.addmm(self.bias, x.view(-1, x.shape[-1]), self.weight).view(shape)


def new_gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Gpt2Block(nn.Module):
    def __init__(self, d, h, positions):
        super().__init__()
        self.h = h
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = Conv1D(d, 3 * d), Conv1D(d, d)
        self.c_fc, self.c_proj2 = Conv1D(d, 4 * d), Conv1D(4 * d, d)
        self.register_buffer("bias", torch.tril(torch.ones(positions, positions, dtype=torch.bool))
                             .view(1, 1, positions, positions))

    def forward(self, x):
        q, k, v = self.c_attn(self.ln_1(x)).split(x.shape[-1], dim=2)
        q, k, v = (split_heads(t, self.h) for t in (q, k, v))
        w = torch.matmul(q, k.transpose(-1, -2)) / torch.full([], v.size(-1) ** 0.5)
        ql, kl = q.size(-2), k.size(-2)
        causal = self.bias[:, :, kl - ql:kl, :kl]
        w = torch.where(causal, w, torch.tensor(torch.finfo(w.dtype).min))
        x = x + self.c_proj(merge_heads(torch.softmax(w, -1) @ v))
        return x + self.c_proj2(new_gelu(self.c_fc(self.ln_2(x))))


class Gpt2(nn.Module):
    def __init__(self, layers=2, d=32, h=4, positions=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(100, d), nn.Embedding(positions, d)
        self.h = nn.ModuleList(Gpt2Block(d, h, positions) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, input_ids):
        pos = torch.arange(0, input_ids.shape[-1], dtype=torch.long).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


def gpt2_inputs(batch, seq):
    g = torch.Generator().manual_seed(batch * 100 + seq)
    return {"input_ids": torch.randint(0, 100, (batch, seq), generator=g)}


class VitLayer(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.norm1, self.norm2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.query, self.key, self.value, self.out = (nn.Linear(d, d) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.act = nn.GELU()

    def forward(self, x):
        y = self.norm1(x)
        q, k, v = (split_heads(p(y), self.h) for p in (self.query, self.key, self.value))
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        x = x + self.out(merge_heads(F.softmax(s, dim=-1) @ v))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class Vit(nn.Module):
    def __init__(self, layers=2, d=32, h=4, image=16, patch=4):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, stride=patch)
        self.cls = nn.Parameter(0.2 * torch.randn(1, 1, d))
        self.pos = nn.Parameter(0.2 * torch.randn(1, (image // patch) ** 2 + 1, d))
        self.layers = nn.ModuleList(VitLayer(d, h) for _ in range(layers))
        self.norm = nn.LayerNorm(d, eps=1e-12)

    def forward(self, pixel_values):
        x = self.patch(pixel_values).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


def vit_inputs(batch, _):
    g = torch.Generator().manual_seed(batch)
    return {"pixel_values": torch.randn(batch, 3, 16, 16, generator=g)}


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(d))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class LlamaLayer(nn.Module):
    def __init__(self, d, h, kv, positions):
        super().__init__()
        self.h, self.kv, self.dh = h, kv, d // h
        dh = self.dh
        self.q_proj, self.o_proj = nn.Linear(d, h * dh, bias=False), nn.Linear(h * dh, d, bias=False)
        self.k_proj, self.v_proj = (nn.Linear(d, kv * dh, bias=False) for _ in range(2))
        self.gate_proj, self.up_proj = (nn.Linear(d, 2 * d, bias=False) for _ in range(2))
        self.down_proj = nn.Linear(2 * d, d, bias=False)
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(d), RMSNorm(d)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dh, 2).float() / dh))
        freqs = torch.outer(torch.arange(positions).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos())
        self.register_buffer("sin_cached", emb.sin())
        self.register_buffer("masked", torch.triu(torch.ones(positions, positions, dtype=torch.bool), 1))

    def forward(self, x):
        b, s, _ = x.shape
        y = self.input_layernorm(x)
        q = self.q_proj(y).view(b, s, self.h, self.dh).transpose(1, 2)
        k = self.k_proj(y).view(b, s, self.kv, self.dh).transpose(1, 2)
        v = self.v_proj(y).view(b, s, self.kv, self.dh).transpose(1, 2)
        cos, sin = self.cos_cached[:s], self.sin_cached[:s]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.h // self.kv  # repeat_kv
        k = k[:, :, None, :, :].expand(b, self.kv, rep, s, self.dh).reshape(b, self.h, s, self.dh)
        v = v[:, :, None, :, :].expand(b, self.kv, rep, s, self.dh).reshape(b, self.h, s, self.dh)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.dh)
        w = w.masked_fill(self.masked[:s, :s], float("-inf"))
        a = torch.matmul(F.softmax(w, dim=-1), v).transpose(1, 2).reshape(b, s, self.h * self.dh)
        x = x + self.o_proj(a)
        y = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))


class Llama(nn.Module):
    def __init__(self, layers=2, d=32, h=4, kv=2, positions=64):
        super().__init__()
        self.embed_tokens = nn.Embedding(100, d)
        self.layers = nn.ModuleList(LlamaLayer(d, h, kv, positions) for _ in range(layers))
        self.norm = RMSNorm(d)

    def forward(self, input_ids):
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


MODELS = {
    # name: (module, inputs, dynamic axes, sizes, expected counts)
    "bert": (lambda: Bert(), bert_inputs, {"input_ids": {0: "batch", 1: "seq"},
                                          "attention_mask": {0: "batch", 1: "seq"}},
             [(1, 5), (3, 11)], {"attention": 2, "add_layer_norm": 5, "gelu": 2}),
    "bert-pre": (lambda: Bert(pre_ln=True, mask_by_where=True, scale_first=True).half().float(),
                 bert_inputs, {"input_ids": {0: "batch", 1: "seq"},
                               "attention_mask": {0: "batch", 1: "seq"}},
                 [(1, 5), (3, 11)], {"attention": 2, "add_layer_norm": 4, "layer_norm": 1,
                                     "gelu": 2, "fp16_weights": True}),
    "bert-softcap": (lambda: Bert(softcap=True), bert_inputs,
                     {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}},
                     [(2, 7)], {"attention": 0, "why_not": ("/layers.0/Tanh (Tanh)",
                                                             "/layers.1/Tanh (Tanh)")}),
    "gpt2": (lambda: Gpt2(), gpt2_inputs, {"input_ids": {0: "batch", 1: "seq"}},
             [(1, 5), (2, 13)], {"attention": 2, "add_layer_norm": 5, "gelu_tanh": 2}),
    "llama": (lambda: Llama(), gpt2_inputs, {"input_ids": {0: "batch", 1: "seq"}},
              [(1, 5), (2, 13)], {"attention": 2, "add_layer_norm": 4, "layer_norm": 1,
                                  "rotary": 2, "gated_silu": 2, "kv_heads": 2}),
    "vit": (lambda: Vit(), vit_inputs, {"pixel_values": {0: "batch"}},
            [(1, 0), (3, 0)], {"attention": 2, "add_layer_norm": 5, "gelu": 2}),
}


FP16_WEIGHTS = """
import sys
import onnx
from onnx import TensorProto, helper, numpy_helper
m = onnx.load(sys.argv[1])
casts = []
for t in list(m.graph.initializer):
    if t.data_type != TensorProto.FLOAT or len(t.dims) == 0:
        continue
    half = numpy_helper.from_array(numpy_helper.to_array(t).astype("float16"), t.name + "_fp16")
    m.graph.initializer.remove(t)
    m.graph.initializer.append(half)
    casts.append(helper.make_node("Cast", [half.name], [t.name], to=TensorProto.FLOAT))
for n in reversed(casts):
    m.graph.node.insert(0, n)
onnx.save(m, sys.argv[1])
"""


def to_fp16_weights(path, onnx_python):
    """Stores the float weights as float16, each cast to float32 in the graph (what fp16 weight
    conversion writes), with the onnx venv's onnx package."""
    rc, out = run([onnx_python, "-c", FP16_WEIGHTS, path])
    assert rc == 0, out


# The stored opset-23 fixtures: name -> expected counts.
FIXTURES = {
    "bert23": {"attention": 2, "add_layer_norm": 5, "gelu": 2},
    "llama23": {"attention": 2, "add_layer_norm": 4, "layer_norm": 1, "rotary": 2,
                "gated_silu": 2, "kv_heads": 2},
}
FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def export(name, module, make_inputs, axes, path):
    example = make_inputs(2, 7)
    outputs = ["output"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, tuple(example.values()), path, input_names=list(example),
                          output_names=outputs, opset_version=17,
                          dynamic_axes={**axes, "output": {0: "batch", 1: "seq"}})


def check_ir(name, art, expect):
    with open(os.path.join(art, "report.json")) as f:
        report = json.load(f)
    with open(os.path.join(art, "model.mlir")) as f:
        ir = f.read()
    forward = ir.split("func.func @prepare")[0]
    ops = re.findall(r"= (transfuse\.[a-z_]+)", forward)
    count = {op: ops.count(op) for op in set(ops)}
    att = report.get("attention", {})
    assert att.get("fused") == expect["attention"], \
        f"{name}: attention fused {att.get('fused')}, expected {expect['attention']}: {att}"
    if "why_not" in expect:  # a near miss: the report names the node each site broke at
        reasons = [m["reason"] for m in att["not_fused"]]
        for node in expect["why_not"]:
            assert any(f"at {node}, which attention cannot absorb" in r for r in reasons), \
                f"{name}: no why-not names {node}: {reasons}"
        print(f"{name}: not fused, the report names the nodes: {reasons}")
        return
    assert count.get("transfuse.softmax", 0) == 0, f"{name}: a softmax is left"
    assert count.get("transfuse.add_layer_norm", 0) == expect["add_layer_norm"], \
        f"{name}: {count.get('transfuse.add_layer_norm', 0)} add_layer_norm, expected {expect['add_layer_norm']}"
    assert count.get("transfuse.layer_norm", 0) == expect.get("layer_norm", 0), \
        f"{name}: {count.get('transfuse.layer_norm', 0)} layer_norm, expected {expect.get('layer_norm', 0)}"
    for left in ("erf", "tanh", "sigmoid", "reduce_mean", "sqrt", "pow", "silu", "gelu"):
        assert count.get("transfuse." + left, 0) == 0, f"{name}: transfuse.{left} is left unfused"
    linears = re.findall(r"transfuse\.linear .*", forward)
    for act in ("gelu", "gelu_tanh", "silu"):
        n = sum(f"activation = #transfuse.activation<{act}>" in l and "gated" not in l for l in linears)
        assert n == expect.get(act, 0), f"{name}: {n} linear ops with {act}, expected {expect.get(act, 0)}"
    n = sum("activation = #transfuse.activation<silu>" in l and "gated" in l for l in linears)
    assert n == expect.get("gated_silu", 0), f"{name}: {n} gated silu linear ops"
    # Rotary embeddings in the merged Q/K/V projection's epilogue, one per layer.
    rotary = sum("rotary_columns" in l for l in linears)
    assert rotary == expect.get("rotary", 0) and count.get("transfuse.rotary", 0) == 0, \
        f"{name}: {rotary} rotary epilogues, expected {expect.get('rotary', 0)}"
    if "kv_heads" in expect:  # grouped K/V heads read as they are, not repeated
        for line in re.findall(r"transfuse\.attention .*", forward):
            key = re.findall(r"tensor<\?x(\d+)x", line.split(":")[-1])[1]
            assert int(key) == expect["kv_heads"], f"{name}: attention reads {key} K heads: {line}"
    print(f"{name}: {expect['attention']} attention fused, {expect['add_layer_norm']} add_layer_norm, "
          f"activations{' and rotary' if rotary else ''} in the epilogues; {len(ops)} ops")


def check(name, args):
    make, make_inputs, axes, sizes, expect = MODELS[name]
    torch.manual_seed(0)
    module = make().eval()
    d = os.path.join(args.workdir, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    export(name, module, make_inputs, axes, path)
    if expect.get("fp16_weights"):
        to_fp16_weights(path, args.onnx_python)
    art = os.path.join(d, "artifact")
    compile_checked(name, path, art, args, expect)
    for batch, seq in sizes:
        feeds = make_inputs(batch, seq)
        with torch.no_grad():
            want = module(*feeds.values()).numpy().astype(np.float64)
        ins = {k: (v.numpy().astype(np.int32) if v.dtype == torch.long else v.numpy())
               for k, v in feeds.items()}
        check_output(args.transfuse, art, ins, want, d, f"{name} B={batch} S={seq}")


def compile_checked(name, path, art, args, expect):
    rc, out = run([args.transfuse, "compile", path, "-o", art, "--fusion", "all", "--report"])
    assert rc == 0, f"{name}: compile failed:\n{out}"
    check_ir(name, art, expect)


def check_fixture(name, args):
    d = os.path.join(args.workdir, name)
    os.makedirs(d, exist_ok=True)
    art = os.path.join(d, "artifact")
    compile_checked(name, os.path.join(FIXTURE_DIR, name + ".onnx"), art, args, FIXTURES[name])
    io = safetensors_io.read(os.path.join(FIXTURE_DIR, name + ".io.safetensors"))
    for k in sorted({key.split("/")[0] for key in io}):
        ins = {key.split("/")[1]: v for key, v in io.items()
               if key.startswith(k + "/") and not key.endswith("/expected")}
        want = io[k + "/expected"].astype(np.float64)
        check_output(args.transfuse, art, ins, want, d,
                     name + " B=%d S=%d" % next(iter(ins.values())).shape[:2])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--transfuse", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--only", choices=sorted(MODELS) + sorted(FIXTURES))
    parser.add_argument("--onnx-python", required=True,
                        help="the onnx venv's python (fp16 weight conversion)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in [args.only] if args.only else list(MODELS) + list(FIXTURES):
        (check_fixture if name in FIXTURES else check)(name, args)
    print("all exports compiled, fused and matched")


if __name__ == "__main__":
    main()
