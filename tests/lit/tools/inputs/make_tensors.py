#!/usr/bin/python3
"""Writes a safetensors file for lit tests.

usage: make_tensors.py OUT.safetensors NAME:DTYPE:D0xD1...[:VALUE] ...
DTYPE is a numpy dtype (int32, int64, float32); VALUE fills the tensor
(default 3). Example: make_tensors.py in.safetensors tokens:int32:2x5:7
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "oracle"))
import safetensors_io  # noqa: E402

tensors = {}
for spec in sys.argv[2:]:
    parts = spec.split(":")
    name, dtype, shape = parts[0], parts[1], parts[2]
    value = float(parts[3]) if len(parts) > 3 else 3
    dims = [int(d) for d in shape.split("x")] if shape else []
    tensors[name] = np.full(dims, value, dtype=dtype)
safetensors_io.write(sys.argv[1], tensors)
