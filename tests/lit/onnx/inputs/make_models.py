"""Writes the ONNX graphs of tests/lit/onnx/import.test into DIR (the onnx
venv's Python: onnx.helper)."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save


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
