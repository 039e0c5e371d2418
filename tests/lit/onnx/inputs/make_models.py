"""Writes the ONNX graphs of tests/lit/onnx/import.test into DIR (the onnx
venv's Python: onnx.helper)."""
import os
import sys

import numpy as np
from onnx import AttributeProto, TensorProto, helper, numpy_helper, save


def model(name, nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]),
         os.path.join(sys.argv[1], name + ".onnx"))


def ints(name, v):
    return numpy_helper.from_array(np.array(v, np.int64), name)


def floats(name, v):
    return numpy_helper.from_array(np.array(v, np.float32), name)


x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])
y4 = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2, "seq", 4])
model("heads", [
    helper.make_node("Shape", ["x"], ["s"], name="shape"),
    helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
    helper.make_node("Gather", ["s", "i1"], ["t"], axis=0),
    helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
    helper.make_node("Unsqueeze", ["t", "ax0"], ["t1"]),
    helper.make_node("Concat", ["b1", "t1", "h"], ["shape"], axis=0),
    helper.make_node("Reshape", ["x", "shape"], ["r"], name="split_heads"),
    helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 1, 3]),
], [x], [y4], [ints("i0", 0), ints("i1", 1), ints("ax0", [0]), ints("h", [2, 4])])

xs = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
ys = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])
model("causal_where", [
    helper.make_node("ConstantOfShape", ["n"], ["ones"],
                     value=numpy_helper.from_array(np.array([1], np.int64))),
    helper.make_node("Trilu", ["ones"], ["tri"], upper=0),
    helper.make_node("Cast", ["tri"], ["keep"], to=TensorProto.BOOL),
    helper.make_node("Where", ["keep", "x", "ninf"], ["y"], name="mask"),
], [xs], [ys], [ints("n", [4, 4]), floats("ninf", -np.inf)])

model("powers", [
    helper.make_node("Pow", ["x", "two"], ["a"]),
    helper.make_node("Pow", ["a", "half"], ["b"]),
    helper.make_node("Pow", ["b", "other"], ["y"]),
], [xs], [ys], [floats("two", 2.0), floats("half", 0.5), floats("other", 1.5)])

sh = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
model("data_shape", [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_by_input")],
      [xs, sh], [ys])

# Slices "to the end" as exporters write them (INT64_MAX), on a dynamic and
# on a static dimension, and from a negative start.
big = np.iinfo(np.int64).max
y3 = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 6])
model("slice_to_end", [
    helper.make_node("Slice", ["x", "zero1", "big", "ax1"], ["a"]),
    helper.make_node("Slice", ["a", "two", "big", "ax2"], ["y"]),
], [x], [y3], [ints("zero1", [0]), ints("big", [big]), ints("ax1", [1]), ints("two", [2]),
               ints("ax2", [2])])

# Positions as exporters write them: Range(0, seq) of a run-time length
# gathered from a table, and an int64 mask cast to float and to bool.
ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])
yp = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", 8])
ym = helper.make_tensor_value_info("m", TensorProto.FLOAT, ["batch", "seq"])
yb = helper.make_tensor_value_info("k", TensorProto.BOOL, ["batch", "seq"])
model("positions", [
    helper.make_node("Shape", ["ids"], ["s"]),
    helper.make_node("Gather", ["s", "i1"], ["n"], axis=0),
    helper.make_node("Range", ["i0", "n", "i1"], ["r"], name="arange"),
    helper.make_node("Unsqueeze", ["r", "ax0"], ["r1"]),
    helper.make_node("Gather", ["table", "r1"], ["y"]),
    helper.make_node("Cast", ["ids"], ["m"], to=TensorProto.FLOAT),
    helper.make_node("Cast", ["ids"], ["k"], to=TensorProto.BOOL),
], [ids], [yp, ym, yb], [ints("i0", 0), ints("i1", 1), ints("ax0", [0]),
                         floats("table", np.arange(64 * 8).reshape(64, 8) / 64)])

# GPT-2's Conv1D: x.view(-1, D) by a weight (Gemm with a bias), viewed back
# to [batch, seq, N] with the sizes from Shape; and the class token of ViT
# expanded to the batch (Expand to a run-time size the input has as 1).
w = numpy_helper.from_array(np.ones((8, 6), np.float32) / 8, "w")
y6 = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 6])
yc = helper.make_tensor_value_info("c", TensorProto.FLOAT, ["batch", 1, 8])
model("merged_rows", [
    helper.make_node("Reshape", ["x", "rows"], ["x2"], name="view"),
    helper.make_node("Gemm", ["x2", "w", "bias"], ["p"]),
    helper.make_node("Shape", ["x"], ["s"]),
    helper.make_node("Slice", ["s", "i0", "i2"], ["bs"]),
    helper.make_node("Concat", ["bs", "n6"], ["back"], axis=0),
    helper.make_node("Reshape", ["p", "back"], ["y"], name="view_back"),
    helper.make_node("Gather", ["s", "i0s"], ["b"], axis=0),
    helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
    helper.make_node("Concat", ["b1", "one1", "one1"], ["cshape"], axis=0),
    helper.make_node("Expand", ["cls", "cshape"], ["c"], name="expand_cls"),
], [x], [y6, yc], [ints("rows", [-1, 8]), w, floats("bias", [0.5] * 6), ints("i0", [0]),
                   ints("i2", [2]), ints("n6", [6]), ints("i0s", 0), ints("ax0", [0]),
                   ints("one1", [1]), floats("cls", np.arange(8).reshape(1, 1, 8))])

# A merged view used by anything but a product or a view back: one error.
model("merged_misuse", [
    helper.make_node("Reshape", ["x", "rows"], ["x2"], name="view"),
    helper.make_node("Relu", ["x2"], ["y"], name="act"),
], [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])], [ints("rows", [-1, 8])])

# Flatten of [batch, seq, 8] at axis 2 is the same merged view: MatMul by a
# weight, then a Reshape back (its target from Shape).
model("flatten_rows", [
    helper.make_node("Flatten", ["x"], ["x2"], axis=2, name="flat"),
    helper.make_node("MatMul", ["x2", "w"], ["p"]),
    helper.make_node("Shape", ["x"], ["s"]),
    helper.make_node("Slice", ["s", "i0", "i2"], ["bs"]),
    helper.make_node("Concat", ["bs", "n6"], ["back"], axis=0),
    helper.make_node("Reshape", ["p", "back"], ["y"], name="view_back"),
], [x], [y6], [w, ints("i0", [0]), ints("i2", [2]), ints("n6", [6])])

# A negative epsilon (LayerNormalization, opset 17): one error, not an abort.
model("negative_epsilon", [
    helper.make_node("LayerNormalization", ["x", "gamma"], ["y"], name="ln", epsilon=-1e-5),
], [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 8])],
    [floats("gamma", [1.0] * 8)])

# Inputs whose ops' type inference would fail (an abort in the op's
# builder): each is one error naming the node. One node each, output y.
vi = helper.make_tensor_value_info
FL, I64, yany = TensorProto.FLOAT, TensorProto.INT64, vi("y", TensorProto.FLOAT, None)
q4, k4, v4 = vi("q", FL, [1, 2, 3, 4]), vi("k", FL, [1, 2, 3, 4]), vi("v", FL, [1, 2, 3, 4])
cs = [floats("c", np.ones((1, 3, 2))), floats("s", np.ones((1, 3, 2)))]


def refused(name, node, inputs, inits=(), opset=17, outputs=(yany,)):
    model(name, [node], inputs, list(outputs), inits, opset)


refused("gemm_int", helper.make_node("Gemm", ["a", "w"], ["y"], name="g"),
        [vi("a", I64, [2, 3])], [floats("w", np.ones((3, 4)))])
refused("gemm_int_c", helper.make_node("Gemm", ["a", "w", "c"], ["y"], name="g"),
        [vi("a", FL, [2, 3])], [floats("w", np.ones((3, 4))), ints("c", [1, 2, 3, 4])])
model("merged_int", [
    helper.make_node("Reshape", ["x", "rows"], ["x2"], name="view"),
    helper.make_node("MatMul", ["x2", "w"], ["y"], name="mm"),
], [x], [yany], [ints("rows", [-1, 8]), ints("w", np.ones((8, 6)))])
refused("reduce_scalar", helper.make_node("ReduceSum", ["x"], ["y"], name="r"), [vi("x", FL, [])])
refused("norm_scalar", helper.make_node("LayerNormalization", ["x", "g"], ["y"], name="ln", axis=0),
        [vi("x", FL, [])], [floats("g", 1.0)])
refused("norm_int", helper.make_node("LayerNormalization", ["x", "g"], ["y"], name="ln"),
        [vi("x", I64, [2, 8])], [floats("g", [1.0] * 8)])
refused("norm_int_bias", helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], name="ln"),
        [vi("x", FL, [2, 8]), vi("b", I64, [8])], [floats("g", [1.0] * 8)])
empty_perm = helper.make_node("Transpose", ["x"], ["y"], name="t")
empty_perm.attribute.append(helper.make_attribute("perm", [], attr_type=AttributeProto.INTS))
refused("transpose_empty_perm", empty_perm, [vi("x", FL, [2, 3])])
refused("gather_scalar", helper.make_node("Gather", ["x", "i"], ["y"], name="g"),
        [vi("x", FL, []), vi("i", I64, [2])])
refused("concat_scalars", helper.make_node("Concat", ["x", "x"], ["y"], name="c", axis=0),
        [vi("x", FL, [])])
refused("concat_ranks", helper.make_node("Concat", ["e", "x", "x"], ["y"], name="c", axis=2),
        [vi("x", FL, [2, 3])], [floats("e", np.zeros((0, 0, 0)))])
refused("slice_scalar", helper.make_node("Slice", ["x", "s", "e", "a"], ["y"], name="s"),
        [vi("x", FL, [])], [ints("s", [0]), ints("e", [1]), ints("a", [0])])
refused("split_scalar", helper.make_node("Split", ["x"], ["y", "z"], name="s", axis=0),
        [vi("x", FL, [])], outputs=[yany, vi("z", FL, None)])
refused("conv_empty_kernel", helper.make_node("Conv", ["x", "w"], ["y"], name="c", strides=[0, 0]),
        [vi("x", FL, [1, 3, 4, 4])], [floats("w", np.zeros((4, 3, 0, 0)))])
refused("conv_int", helper.make_node("Conv", ["x", "w"], ["y"], name="c", strides=[2, 2]),
        [vi("x", I64, [1, 3, 4, 4])], [floats("w", np.ones((4, 3, 2, 2)))])
refused("conv_int_bias", helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c", strides=[2, 2]),
        [vi("x", FL, [1, 3, 4, 4])], [floats("w", np.ones((4, 3, 2, 2))), ints("b", [1] * 4)])
refused("attention_int", helper.make_node("Attention", ["q", "k", "v"], ["y"], name="a"),
        [vi("q", I64, [1, 2, 3, 4]), k4, v4], opset=23)
refused("attention_int_mask", helper.make_node("Attention", ["q", "k", "v", "m"], ["y"], name="a"),
        [q4, k4, v4, vi("m", I64, [3, 3])], opset=23)
refused("attention_no_heads", helper.make_node("Attention", ["q", "k", "v"], ["y"], name="a"),
        [k4, v4], [floats("q", np.zeros((1, 0, 3, 4)))], opset=23)
refused("attention_ranks", helper.make_node("Attention", ["q", "k", "v"], ["y"], name="a",
                                            q_num_heads=2, kv_num_heads=2),
        [vi("q", FL, [1, 3, 8]), vi("k", FL, [3, 8]), vi("v", FL, [3, 8])], opset=23)
refused("rotary_int", helper.make_node("RotaryEmbedding", ["x", "c", "s"], ["y"], name="r"),
        [vi("x", I64, [1, 2, 3, 4])], cs, opset=23)
refused("rotary_scalar_cache", helper.make_node("RotaryEmbedding", ["x", "c", "s"], ["y"], name="r"),
        [vi("x", FL, [1, 2, 3, 4])], [floats("c", 1.0), floats("s", 1.0)], opset=23)
# Reshapes to sizes whose product overflows int64, and a known tensor
# reshaped to a negative size: one error each.
refused("reshape_huge", helper.make_node("Reshape", ["x", "s"], ["y"], name="r"),
        [vi("x", FL, ["b", 8])], [ints("s", [0, 2 ** 62, 8])])
refused("reshape_known_negative", helper.make_node("Reshape", ["c", "s"], ["y"], name="r"),
        [], [floats("c", np.ones(4)), ints("s", [-2, -2])])
