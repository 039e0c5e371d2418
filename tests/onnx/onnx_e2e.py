#!/usr/bin/env python3
"""ONNX files compiled and run end to end (the onnx venv's Python: numpy and
onnx, no torch).

Models written here with onnx.helper, in the forms exporters write:
  - an encoder layer: Gather embeddings, positions sliced to the sequence
    length through Shape -> Gather, heads split and merged by Reshape with
    shapes computed from Shape (folded when compiling), a bool key mask by
    Where, decomposed GELU (Div, Erf, Add, Mul), LayerNormalization;
    dynamic batch and sequence (dim_params), float16 weights;
  - a patch embedding (Conv with stride = kernel) and Gemm;
  - opset 23's Attention, RMSNormalization and RotaryEmbedding.
Each is compiled with `transfuse compile` (cpu target, fusion all), run with
`transfuse run` (compiled and reference backends) on two input sizes, and
compared with onnx's ReferenceEvaluator within 1e-4 of scale. Each is also
compiled for the cuda target (the generated CUDA built by nvcc; nothing
runs). Bad files are refused with one error naming the node or tensor.

    onnx_e2e.py --transfuse build/tools/transfuse --workdir DIR [--cuda-only]

ctest runs it twice: onnx_e2e (cpu) and cuda_onnx_e2e (--cuda-only: the
nvcc builds, which the sanitizer runs skip with the other cuda_* tests).
"""
import argparse
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import safetensors_io  # noqa: E402
from artifact_check import check_output, run  # noqa: E402

RNG = np.random.default_rng(0)


def init(name, shape, dtype=np.float32, scale=0.2):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(dtype), name)


def const(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


def encoder_layer(fp16_weights):
    """One post-LN encoder layer over token ids [batch, seq] and a bool mask:
    applied by Where, or (with fp16 weights) made arithmetic as BERT's export
    writes it, (1 - float(mask)) · -10000 added to the scores."""
    D, H, V, P = 16, 2, 50, 32
    dh = D // H
    wt = np.float16 if fp16_weights else np.float32
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["tok"]),
        helper.make_node("Shape", ["input_ids"], ["ids_shape"]),
        helper.make_node("Gather", ["ids_shape", "one"], ["seq"], axis=0),
        helper.make_node("Unsqueeze", ["seq", "zero1"], ["seq1"]),
        helper.make_node("Slice", ["pos", "zero1", "seq1", "zero1"], ["pos_s"]),
        helper.make_node("Add", ["tok", "pos_s"], ["x0"]),
        helper.make_node("LayerNormalization", ["x0", "ln0_g", "ln0_b"], ["x"], epsilon=1e-5),
        helper.make_node("Gather", ["ids_shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "zero1"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "seq1", "heads", "hd"], ["split_shape"], axis=0),
        helper.make_node("Concat", ["batch1", "seq1", "dmodel"], ["merge_shape"], axis=0),
    ]
    for p in "qkv":
        nodes += [
            helper.make_node("MatMul", ["x", f"w{p}"], [f"{p}0"]),
            helper.make_node("Add", [f"{p}0", f"b{p}"], [f"{p}1"]),
            helper.make_node("Reshape", [f"{p}1", "split_shape"], [f"{p}2"]),
            helper.make_node("Transpose", [f"{p}2"], [f"{p}h"], perm=[0, 2, 1, 3]),
        ]
    nodes += [
        helper.make_node("Transpose", ["kh"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["qh", "kt"], ["s0"]),
        helper.make_node("Div", ["s0", "sqrt_dh"], ["s1"]),
        helper.make_node("Unsqueeze", ["attention_mask", "axes12"], ["m4"]),
    ]
    if fp16_weights:
        nodes += [
            helper.make_node("Cast", ["m4"], ["mf"], to=TensorProto.FLOAT),
            helper.make_node("Sub", ["onef", "mf"], ["inv"]),
            helper.make_node("Mul", ["inv", "big_neg"], ["bias"]),
            helper.make_node("Add", ["s1", "bias"], ["s2"]),
        ]
    else:
        nodes += [helper.make_node("Where", ["m4", "s1", "ninf"], ["s2"])]
    nodes += [
        helper.make_node("Softmax", ["s2"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "vh"], ["o0"]),
        helper.make_node("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["o1", "merge_shape"], ["o2"]),
        helper.make_node("MatMul", ["o2", "wo"], ["o3"]),
        helper.make_node("Add", ["o3", "bo"], ["o4"]),
        helper.make_node("Add", ["x", "o4"], ["r1"]),
        helper.make_node("LayerNormalization", ["r1", "ln1_g", "ln1_b"], ["h1"], epsilon=1e-5),
        helper.make_node("MatMul", ["h1", "w1"], ["f0"]),
        helper.make_node("Div", ["f0", "sqrt2"], ["f1"]),
        helper.make_node("Erf", ["f1"], ["f2"]),
        helper.make_node("Add", ["f2", "onef"], ["f3"]),
        helper.make_node("Mul", ["f0", "f3"], ["f4"]),
        helper.make_node("Mul", ["f4", "half"], ["f5"]),
        helper.make_node("MatMul", ["f5", "w2"], ["f6"]),
        helper.make_node("Add", ["h1", "f6"], ["r2"]),
        helper.make_node("LayerNormalization", ["r2", "ln2_g", "ln2_b"], ["hidden"], epsilon=1e-5),
    ]
    inits = [
        init("emb", [V, D], wt), init("pos", [P, D], wt),
        init("wq", [D, D], wt), init("bq", [D], wt), init("wk", [D, D], wt), init("bk", [D], wt),
        init("wv", [D, D], wt), init("bv", [D], wt), init("wo", [D, D], wt), init("bo", [D], wt),
        init("w1", [D, 4 * D], wt), init("w2", [4 * D, D], wt),
        numpy_helper.from_array(np.ones(D, np.float32), "ln0_g"), init("ln0_b", [D]),
        init("ln1_g", [D], scale=1.0), init("ln1_b", [D]), init("ln2_g", [D], scale=1.0),
        init("ln2_b", [D]),
        const("one", 1), const("zero", 0), const("zero1", [0]), const("heads", [H]),
        const("hd", [dh]), const("dmodel", [D]), const("axes12", [1, 2]),
        const("sqrt_dh", np.sqrt(dh), np.float32), const("ninf", -np.inf, np.float32),
        const("sqrt2", np.sqrt(2.0), np.float32), const("onef", 1.0, np.float32),
        const("half", 0.5, np.float32), const("big_neg", -10000.0, np.float32),
    ]
    if fp16_weights:
        # Weights stored as float16, each cast to float32 where it is used (how
        # a half-precision export of a float32 graph reads).
        for t in inits:
            if t.data_type == TensorProto.FLOAT16:
                nodes.insert(0, helper.make_node("Cast", [t.name + "_f16"], [t.name],
                                                 to=TensorProto.FLOAT))
                t.name += "_f16"
    graph = helper.make_graph(
        nodes, "encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.BOOL, ["batch", "seq"])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", D])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    def inputs(batch, seq):
        ids = RNG.integers(0, V, size=(batch, seq)).astype(np.int64)
        mask = np.ones((batch, seq), bool)
        mask[-1, seq // 2:] = False
        return {"input_ids": ids, "attention_mask": mask}
    return model, inputs, [(2, 5), (3, 9)], ["--max-batch", "4", "--max-seq-len", "16"]


def patch_embedding():
    """A ViT patch embedding: Conv (stride = kernel), flatten, Gemm head."""
    nodes = [
        helper.make_node("Conv", ["pixels", "wc", "bc"], ["c"], kernel_shape=[4, 4], strides=[4, 4]),
        helper.make_node("Flatten", ["c"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "wg", "bg"], ["logits"], transB=1, alpha=0.5),
        helper.make_node("Sigmoid", ["logits"], ["probs"]),
    ]
    inits = [init("wc", [8, 3, 4, 4]), init("bc", [8]), init("wg", [5, 8 * 2 * 2]), init("bg", [5])]
    graph = helper.make_graph(
        nodes, "patches",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, [2, 3, 8, 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [2, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

    def inputs(batch, seq):
        return {"pixels": RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)}
    return model, inputs, [(2, 0)], []


def opset23():
    """RMSNormalization, RotaryEmbedding and grouped-query causal Attention."""
    B, S, Hq, Hk, dh = 2, 6, 4, 2, 8
    nodes = [
        helper.make_node("RMSNormalization", ["x", "g"], ["n"], epsilon=1e-6, axis=-1),
        helper.make_node("MatMul", ["n", "wq"], ["q"]),
        helper.make_node("MatMul", ["n", "wk"], ["k"]),
        helper.make_node("MatMul", ["n", "wv"], ["v"]),
        helper.make_node("RotaryEmbedding", ["q", "cos", "sin", "pos_ids"], ["qr"], num_heads=Hq),
        helper.make_node("RotaryEmbedding", ["k", "cos", "sin", "pos_ids"], ["kr"], num_heads=Hk),
        helper.make_node("Attention", ["qr", "kr", "v"], ["y"], is_causal=1, q_num_heads=Hq,
                         kv_num_heads=Hk),
        helper.make_node("Pow", ["y", "two"], ["y2"]),
        helper.make_node("ReduceMean", ["y2", "last"], ["ms"], keepdims=1),
        helper.make_node("Sqrt", ["ms"], ["rms"]),
        helper.make_node("Add", ["y", "rms"], ["out"]),
    ]
    theta = np.arange(16)[:, None] / (10000 ** (np.arange(dh // 2) / (dh // 2)))[None, :]
    inits = [
        init("g", [Hq * dh], scale=1.0), init("wq", [Hq * dh, Hq * dh]), init("wk", [Hq * dh, Hk * dh]),
        init("wv", [Hq * dh, Hk * dh]),
        numpy_helper.from_array(np.cos(theta).astype(np.float32), "cos"),
        numpy_helper.from_array(np.sin(theta).astype(np.float32), "sin"),
        const("two", 2.0, np.float32), const("last", [-1]),
    ]
    graph = helper.make_graph(
        nodes, "opset23",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, Hq * dh]),
         helper.make_tensor_value_info("pos_ids", TensorProto.INT64, [B, S])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [B, S, Hq * dh])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])

    def inputs(batch, seq):
        return {"x": RNG.standard_normal((B, S, Hq * dh)).astype(np.float32),
                "pos_ids": np.tile(np.arange(S, dtype=np.int64) + 3, (B, 1))}
    return model, inputs, [(2, 6)], []


def check_model(name, make, args, workdir, cuda):
    model, make_inputs, sizes, flags = make()
    d = os.path.join(workdir, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(model, path)
    if cuda:
        rc, out = run([args.transfuse, "compile", path, "-o", os.path.join(d, "cuda"),
                       "--target", "cuda", "--fusion", "all"] + flags)
        assert rc == 0, f"{name}: cuda compile failed:\n{out}"
        print(f"{name}: compiled for the cuda target")
        return
    art = os.path.join(d, "artifact")
    rc, out = run([args.transfuse, "compile", path, "-o", art, "--fusion", "all"] + flags)
    assert rc == 0, f"{name}: compile failed:\n{out}"
    assert os.path.exists(os.path.join(art, "weights.safetensors")), f"{name}: no weights"
    ref = ReferenceEvaluator(model)
    for batch, seq in sizes:
        feeds = make_inputs(batch, seq)
        (want,) = ref.run(None, feeds)
        ins = {k: (v.astype(np.int32) if v.dtype == np.int64 else v) for k, v in feeds.items()}
        for backend in ("compiled", "reference"):
            check_output(args.transfuse, art, ins, want, d, f"{name} B={batch} S={seq}", backend)


def check_dims(args, workdir):
    """--dim sets a dim_param's maximum; inputs with the same dim_params share
    their sizes (sizes_of in the manifest)."""
    import json
    model, _, _, _ = encoder_layer(False)
    d = os.path.join(workdir, "dims")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(model, path)
    rc, out = run([args.transfuse, "compile", path, "-o", os.path.join(d, "out"), "--emit", "mlir",
                   "--dim", "batch=3,seq=12"])
    assert rc == 0, out
    with open(os.path.join(d, "out", "manifest.json")) as f:
        entry = json.load(f)["entry_points"][0]
    inputs = {i["name"]: i for i in entry["inputs"]}
    assert inputs["input_ids"]["max_shape"] == [3, 12], inputs
    assert inputs["attention_mask"].get("sizes_of") == "input_ids", inputs
    assert entry["outputs"][0]["max_shape"] == [3, 12, 16], entry
    print("dims: --dim batch=3,seq=12 gives max_shape [3, 12]; the mask has input_ids' sizes")


def check_refusals(args, workdir):
    d = os.path.join(workdir, "bad")
    os.makedirs(d, exist_ok=True)

    def refused(model, expect, raw=None):
        p = os.path.join(d, "bad.onnx")
        if raw is not None:
            with open(p, "wb") as f:
                f.write(raw)
        else:
            with open(p, "wb") as f:
                f.write(model.SerializeToString())
        rc, out = run([args.transfuse, "compile", p, "-o", os.path.join(d, "out"), "--emit", "mlir"])
        assert rc != 0 and expect in out, f"expected '{expect}' in:\n{out}"
        assert not os.path.exists(os.path.join(d, "out", "manifest.json")), "partial output"
        print(f"refused: {out.strip().splitlines()[-1][:150]}")

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])

    def model(nodes, inits=(), opset=17, inputs=(x,)):
        g = helper.make_graph(nodes, "g", list(inputs), [y], list(inits))
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])

    refused(model([helper.make_node("Celu", ["x"], ["y"], name="act")]), "node 'act' (Celu, opset 17)")
    refused(model([helper.make_node("FastGelu", ["x"], ["y"], name="fg", domain="com.microsoft")]),
            "com.microsoft.FastGelu")
    refused(model([helper.make_node("Relu", ["nowhere"], ["y"], name="r")]), "input 'nowhere'")
    refused(model([helper.make_node("Relu", ["y"], ["t"], name="a"),
                   helper.make_node("Relu", ["t"], ["y"], name="b")]), "is not defined before")
    refused(model([helper.make_node("Relu", ["x"], ["y"])], opset=11), "opset 11")
    # Shapes that do not fit: errors, never an abort in the dialect's type
    # inference (fuzz_onnx found the first).
    refused(model([helper.make_node("Mul", ["x", "w"], ["y"], name="m")], [init("w", [4])]),
            "node 'm' (Mul, opset 17): operands do not broadcast")
    refused(model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [init("w", [4, 3])]),
            "do not multiply")
    refused(model([helper.make_node("Concat", ["x", "w"], ["y"], name="c", axis=0)],
                  [init("w", [2, 4])]), "do not concatenate")
    good = model([helper.make_node("Add", ["x", "w"], ["y"])], [init("w", [2, 3])])
    raw = good.SerializeToString()
    refused(None, "does not parse", raw=raw[: len(raw) // 2])
    bad = model([helper.make_node("Add", ["x", "w"], ["y"])], [init("w", [2, 3])])
    bad.graph.initializer[0].dims[:] = [4, 3]
    refused(bad, "'w'")
    ext = model([helper.make_node("Add", ["x", "w"], ["y"])], [init("w", [2, 3])])
    t = ext.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value="../w.bin")
    refused(ext, "..")
    # --dim naming no input's dimension.
    dyn = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])
    p = os.path.join(d, "dyn.onnx")
    onnx.save(model([helper.make_node("Relu", ["x"], ["y"])], inputs=(dyn,)), p)
    rc, out = run([args.transfuse, "compile", p, "-o", os.path.join(d, "out"), "--dim",
                   "nothing=4", "--emit", "mlir"])
    assert rc != 0 and "no input has a dimension named 'nothing'" in out, out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--transfuse", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--cuda-only", action="store_true",
                        help="only compile each graph for the cuda target")
    args = parser.parse_args()
    if os.path.exists(args.workdir):
        shutil.rmtree(args.workdir)
    os.makedirs(args.workdir)
    cuda = args.cuda_only
    check_model("encoder", lambda: encoder_layer(False), args, args.workdir, cuda)
    if not cuda:
        check_model("encoder-fp16", lambda: encoder_layer(True), args, args.workdir, cuda)
    check_model("patches", patch_embedding, args, args.workdir, cuda)
    check_model("opset23", opset23, args, args.workdir, cuda)
    if not cuda:
        check_dims(args, args.workdir)
        check_refusals(args, args.workdir)
    print("onnx_e2e: ok")


if __name__ == "__main__":
    main()
