#!/usr/bin/env python3
"""Writes the opset-23 fixtures of tests/onnx/fixtures: small random graphs built with the onnx
package's helper API in the forms opset 23 gives exporters, and their expected outputs from
onnx's ReferenceEvaluator (the onnx venv's Python; the files are committed, so the test that
reads them needs neither onnx nor torch):
  - bert23: two post-LN encoder layers: LayerNormalization, Attention on 3-D Q, K and V with
    q_num_heads and a boolean padding mask made from the int64 attention_mask (Cast,
    Unsqueeze), Gelu (opset 20);
  - llama23: two decoder layers: RMSNormalization, RotaryEmbedding on 3-D Q and K with cos and
    sin caches and position_ids from Range, Attention with grouped K/V heads
    (kv_num_heads < q_num_heads) and is_causal, SwiGLU (Sigmoid, Mul).
Each FIXTURE.onnx has FIXTURE.io.safetensors beside it: for each size k, the inputs as
"k/NAME" (int32 ids) and the expected output as "k/expected".

    make_opset23_fixtures.py OUT_DIR   (tests/onnx/fixtures)
"""
import os
import sys

import numpy as np
from onnx import TensorProto, checker, helper, numpy_helper, save
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import safetensors_io  # noqa: E402

RNG = np.random.default_rng(23)
D, H, KV, P, V = 32, 4, 2, 64, 100
DH = D // H


def weight(name, shape, scale=0.2):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def ints(name, v):
    return numpy_helper.from_array(np.array(v, np.int64), name)


def positions(nodes, inits):
    """seq (a [1] tensor) and position_ids [1, seq] = Range(0, seq) from Shape(input_ids)."""
    nodes += [helper.make_node("Shape", ["input_ids"], ["ids_shape"]),
              helper.make_node("Gather", ["ids_shape", "one"], ["seq0"], axis=0),
              helper.make_node("Unsqueeze", ["seq0", "zero1"], ["seq"]),
              helper.make_node("Range", ["zero", "seq0", "one"], ["arange"]),
              helper.make_node("Unsqueeze", ["arange", "zero1"], ["position_ids"])]
    inits += [ints("zero", 0), ints("one", 1), ints("zero1", [0])]


def bert23():
    nodes, inits = [], [weight("tok", [V, D]), weight("pos", [P, D])]
    positions(nodes, inits)
    nodes += [helper.make_node("Gather", ["tok", "input_ids"], ["t"]),
              helper.make_node("Slice", ["pos", "zero1", "seq", "zero1"], ["p"]),
              helper.make_node("Add", ["t", "p"], ["e"]),
              helper.make_node("LayerNormalization", ["e", "ln_g", "ln_b"], ["x0"], epsilon=1e-5),
              helper.make_node("Cast", ["attention_mask"], ["keep"], to=TensorProto.BOOL),
              helper.make_node("Unsqueeze", ["keep", "axes12"], ["mask"])]
    inits += [weight("ln_g", [D]), weight("ln_b", [D]), ints("axes12", [1, 2])]
    x = "x0"
    for l in range(2):
        n = f"l{l}_"
        for p in "qkvo":
            inits += [weight(n + "w" + p, [D, D]), weight(n + "b" + p, [D])]
        for p in "qkv":
            nodes += [helper.make_node("MatMul", [x, n + "w" + p], [n + p + "0"]),
                      helper.make_node("Add", [n + p + "0", n + "b" + p], [n + p])]
        nodes += [
            helper.make_node("Attention", [n + "q", n + "k", n + "v", "mask"], [n + "a"],
                             q_num_heads=H, kv_num_heads=H),
            helper.make_node("MatMul", [n + "a", n + "wo"], [n + "o0"]),
            helper.make_node("Add", [n + "o0", n + "bo"], [n + "o"]),
            helper.make_node("Add", [x, n + "o"], [n + "r1"]),
            helper.make_node("LayerNormalization", [n + "r1", n + "g1", n + "c1"], [n + "h"],
                             epsilon=1e-5),
            helper.make_node("MatMul", [n + "h", n + "w1"], [n + "f0"]),
            helper.make_node("Add", [n + "f0", n + "b1"], [n + "f1"]),
            helper.make_node("Gelu", [n + "f1"], [n + "f2"]),
            helper.make_node("MatMul", [n + "f2", n + "w2"], [n + "f3"]),
            helper.make_node("Add", [n + "f3", n + "b2"], [n + "f4"]),
            helper.make_node("Add", [n + "h", n + "f4"], [n + "r2"]),
            helper.make_node("LayerNormalization", [n + "r2", n + "g2", n + "c2"], [n + "y"],
                             epsilon=1e-5)]
        inits += [weight(n + "g1", [D]), weight(n + "c1", [D]), weight(n + "g2", [D]),
                  weight(n + "c2", [D]), weight(n + "w1", [D, 4 * D]), weight(n + "b1", [4 * D]),
                  weight(n + "w2", [4 * D, D]), weight(n + "b2", [D])]
        x = n + "y"
    nodes.append(helper.make_node("Identity", [x], ["output"]))
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])]

    def feeds(batch, seq):
        mask = np.ones((batch, seq), np.int64)
        for b in range(1, batch):
            mask[b, seq - b:] = 0
        return {"input_ids": RNG.integers(0, V, (batch, seq)), "attention_mask": mask}
    return nodes, inits, inputs, feeds


def llama23():
    nodes, inits = [], [weight("tok", [V, D])]
    positions(nodes, inits)
    inv_freq = 1.0 / (10000 ** (np.arange(0, DH, 2, dtype=np.float32) / DH))
    angles = np.outer(np.arange(P, dtype=np.float32), inv_freq).astype(np.float32)
    inits += [numpy_helper.from_array(np.cos(angles).astype(np.float32), "cos_cache"),
              numpy_helper.from_array(np.sin(angles).astype(np.float32), "sin_cache")]
    nodes.append(helper.make_node("Gather", ["tok", "input_ids"], ["x0"]))
    x = "x0"
    for l in range(2):
        n = f"l{l}_"
        inits += [weight(n + "wq", [D, H * DH]), weight(n + "wk", [D, KV * DH]),
                  weight(n + "wv", [D, KV * DH]), weight(n + "wo", [H * DH, D]),
                  numpy_helper.from_array((1 + 0.1 * RNG.standard_normal(D)).astype(np.float32), n + "g1"),
                  numpy_helper.from_array((1 + 0.1 * RNG.standard_normal(D)).astype(np.float32), n + "g2"),
                  weight(n + "wg", [D, 2 * D]), weight(n + "wu", [D, 2 * D]), weight(n + "wd", [2 * D, D])]
        nodes += [
            helper.make_node("RMSNormalization", [x, n + "g1"], [n + "h"], epsilon=1e-6),
            helper.make_node("MatMul", [n + "h", n + "wq"], [n + "q0"]),
            helper.make_node("MatMul", [n + "h", n + "wk"], [n + "k0"]),
            helper.make_node("MatMul", [n + "h", n + "wv"], [n + "v"]),
            helper.make_node("RotaryEmbedding", [n + "q0", "cos_cache", "sin_cache", "position_ids"],
                             [n + "q"], num_heads=H),
            helper.make_node("RotaryEmbedding", [n + "k0", "cos_cache", "sin_cache", "position_ids"],
                             [n + "k"], num_heads=KV),
            helper.make_node("Attention", [n + "q", n + "k", n + "v"], [n + "a"], q_num_heads=H,
                             kv_num_heads=KV, is_causal=1),
            helper.make_node("MatMul", [n + "a", n + "wo"], [n + "o"]),
            helper.make_node("Add", [x, n + "o"], [n + "r1"]),
            helper.make_node("RMSNormalization", [n + "r1", n + "g2"], [n + "m"], epsilon=1e-6),
            helper.make_node("MatMul", [n + "m", n + "wg"], [n + "gate"]),
            helper.make_node("Sigmoid", [n + "gate"], [n + "sg"]),
            helper.make_node("Mul", [n + "gate", n + "sg"], [n + "silu"]),
            helper.make_node("MatMul", [n + "m", n + "wu"], [n + "up"]),
            helper.make_node("Mul", [n + "silu", n + "up"], [n + "gu"]),
            helper.make_node("MatMul", [n + "gu", n + "wd"], [n + "down"]),
            helper.make_node("Add", [n + "r1", n + "down"], [n + "y"])]
        x = n + "y"
    inits.append(numpy_helper.from_array(np.ones(D, np.float32), "gf"))
    nodes.append(helper.make_node("RMSNormalization", [x, "gf"], ["output"], epsilon=1e-6))
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])]
    return nodes, inits, inputs, lambda batch, seq: {"input_ids": RNG.integers(0, V, (batch, seq))}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, make in [("bert23", bert23), ("llama23", llama23)]:
        nodes, inits, inputs, feeds = make()
        y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", "seq", D])
        graph = helper.make_graph(nodes, name, inputs, [y], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
        model.ir_version = 10
        checker.check_model(model)
        path = os.path.join(out, name + ".onnx")
        save(model, path)
        ref = ReferenceEvaluator(model)
        tensors = {}
        for k, (batch, seq) in enumerate([(1, 5), (3, 11)]):
            f = feeds(batch, seq)
            (want,) = ref.run(None, f)
            tensors.update({f"{k}/{n}": v.astype(np.int32) for n, v in f.items()})
            tensors[f"{k}/expected"] = want.astype(np.float32)
        safetensors_io.write(os.path.join(out, name + ".io.safetensors"), tensors)
        print(f"wrote {path} ({os.path.getsize(path)} bytes) and its inputs and outputs")


if __name__ == "__main__":
    main()
