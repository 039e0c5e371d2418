#!/usr/bin/env python3
"""Writes the ONNX backend node tests as test directories.

The PyPI `onnx` package defines its backend node tests in
onnx/backend/test/case/node (each op's cases with NumPy-computed expected
outputs); its wheels no longer ship the generated data. This script runs
those definitions and writes, for every case whose op is one of OPS (or
every case without --ops):

    OUT/<case>/model.onnx
    OUT/<case>/test_data_set_<k>/input_<i>.pb, output_<i>.pb
    OUT/cases.tsv           name, op, rtol, atol (one line per case)

A case's op is its node's op type; a function-expanded case
(`..._expanded`, many nodes) belongs to the op of the case it expands.

    python3 make_node_tests.py OUT [--ops Add,MatMul,...]
"""
import argparse
import os
import shutil
import sys
import warnings


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--ops", default="", help="comma-separated op types (default: all)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import onnx.backend.test.case.node as node_cases
    from onnx import TensorProto, numpy_helper

    def tensor(x, name):
        if isinstance(x, TensorProto):
            t = TensorProto()
            t.CopyFrom(x)
            t.name = name
            return t
        return numpy_helper.from_array(x, name)

    cases = node_cases.collect_testcases(None)
    single = {c.name: c.model.graph.node[0].op_type for c in cases if len(c.model.graph.node) == 1}
    wanted = set(filter(None, args.ops.split(",")))
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    rows = []
    for case in cases:
        name = case.name
        if name in single:
            op = single[name]
        else:
            base = name.split("_expanded")[0]
            if base not in single:
                continue
            op = single[base]
        if wanted and op not in wanted:
            continue
        graph_inputs = [i for i in case.model.graph.input]
        if any(not v.type.HasField("tensor_type")
               for v in list(graph_inputs) + list(case.model.graph.output)):
            continue  # sequences, maps and optionals: not tensors
        d = os.path.join(args.out, name)
        os.makedirs(d)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for k, (inputs, outputs) in enumerate(case.data_sets):
            ds = os.path.join(d, f"test_data_set_{k}")
            os.makedirs(ds)
            for j, x in enumerate(inputs):
                t = tensor(x, graph_inputs[j].name)
                with open(os.path.join(ds, f"input_{j}.pb"), "wb") as f:
                    f.write(t.SerializeToString())
            for j, x in enumerate(outputs):
                t = tensor(x, case.model.graph.output[j].name)
                with open(os.path.join(ds, f"output_{j}.pb"), "wb") as f:
                    f.write(t.SerializeToString())
        rows.append(f"{name}\t{op}\t{case.rtol}\t{case.atol}\n")
    with open(os.path.join(args.out, "cases.tsv"), "w") as f:
        f.writelines(sorted(rows))
    print(f"make_node_tests: {len(rows)} cases in {args.out}")


if __name__ == "__main__":
    sys.exit(main())
