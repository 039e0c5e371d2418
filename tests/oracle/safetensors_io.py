"""Minimal safetensors reader/writer for the NumPy oracle (no third-party packages).

File layout: u64 little-endian N, then N bytes of UTF-8 JSON
  {name: {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {str: str}}
then the data buffer; offsets are relative to the start of the buffer.

read(path)                 -> dict name -> np.ndarray (F16 and BF16 widened to float32)
read_metadata(path)        -> the "__metadata__" dict (or {})
write(path, tensors, metadata=None, dtypes=None)
    tensors: dict name -> array-like, written in dict order, contiguous, header padded
    with spaces to a multiple of 8. dtypes: optional dict name -> "BF16" | "F16" | ...
    to store a float array in another dtype (BF16 rounds to nearest even).
"""
import json
import struct

import numpy as np

_NP = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U8": np.uint8, "BOOL": np.bool_,
}
_NAME = {np.dtype(v): k for k, v in _NP.items()}


def _bf16_to_f32(raw):
    return (raw.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16(x):
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)  # round to nearest even
    return ((bits + rounding) >> 16).astype(np.uint16)


def _read_header(blob, path):
    if len(blob) < 8:
        raise ValueError(f"{path}: file too short for a safetensors header")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise ValueError(f"{path}: header length {n} exceeds file size")
    return json.loads(blob[8:8 + n].decode("utf-8")), 8 + n


def _load(path):
    with open(path, "rb") as f:
        blob = f.read()
    return blob, *_read_header(blob, path)


def read_metadata(path):
    return _load(path)[1].get("__metadata__", {}) or {}


def read(path):
    blob, header, start = _load(path)
    data = memoryview(blob)[start:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape = info["dtype"], [int(s) for s in info["shape"]]
        b, e = info["data_offsets"]
        if not (0 <= b <= e <= len(data)):
            raise ValueError(f"{path}: tensor {name!r} offsets {b},{e} out of range")
        if dtype == "BF16":
            arr = _bf16_to_f32(np.frombuffer(data[b:e], dtype="<u2"))
        elif dtype in _NP:
            arr = np.frombuffer(data[b:e], dtype=np.dtype(_NP[dtype]).newbyteorder("<"))
            if dtype == "F16":
                arr = arr.astype(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {dtype}")
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{path}: tensor {name!r} size does not match shape {shape}")
        out[name] = arr.reshape(shape).astype(arr.dtype.newbyteorder("="))
    return out


def write(path, tensors, metadata=None, dtypes=None):
    dtypes = dtypes or {}
    header, chunks, offset = {}, [], 0
    for name, value in tensors.items():
        arr = np.asarray(value)
        dt = dtypes.get(name)
        if dt == "BF16":
            raw = _f32_to_bf16(arr).astype("<u2").tobytes()
        else:
            if dt is not None:
                arr = arr.astype(_NP[dt])
            if arr.dtype not in _NAME:
                raise ValueError(f"tensor {name!r}: unsupported numpy dtype {arr.dtype}")
            dt = _NAME[arr.dtype]
            raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in chunks:
            f.write(raw)
