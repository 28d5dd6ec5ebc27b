#!/usr/bin/env python3
"""Writes the golden safetensors files in this folder. Not run by the test suite.

Why: the C++ loader and saver should agree with a second, independent writer. This script
uses only the standard library (struct packs IEEE half/single/double itself) and lays the
file out the way the reference serializer (huggingface/safetensors, used by PyTorch's
save_file) does:
  - header = compact JSON, "__metadata__" first, then tensors in data order, each entry as
    {"dtype", "shape", "data_offsets"}; padded with spaces to a multiple of 8 bytes
  - data order: by dtype alignment, largest first (F64, F32, BF16, F16), then by name

Files:
  mixed_dtypes.safetensors  F64, F32, BF16 and F16 tensors; the loader converts to fp32
  f32_only.safetensors      F32 tensors + metadata; meshtp's saver must reproduce it byte
                            for byte from the same tensors

Run from anywhere:  python3 tests/data/safetensors/make_golden.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ORDER = {"F64": 0, "F32": 1, "BF16": 2, "F16": 3}  # descending alignment, as the reference


def pack(dtype, values):
    if dtype == "F64":
        return struct.pack("<%dd" % len(values), *values)
    if dtype == "F32":
        return struct.pack("<%df" % len(values), *values)
    if dtype == "F16":
        return struct.pack("<%de" % len(values), *values)
    if dtype == "BF16":  # the top 16 bits of the float32 (values below are exact in bf16)
        words = [struct.unpack("<I", struct.pack("<f", v))[0] >> 16 for v in values]
        return struct.pack("<%dH" % len(words), *words)
    raise ValueError(dtype)


def write(name, tensors, metadata):
    """tensors: {name: (dtype, shape, values)}"""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    data = b""
    for key in sorted(tensors, key=lambda k: (ORDER[tensors[k][0]], k)):
        dtype, shape, values = tensors[key]
        raw = pack(dtype, values)
        header[key] = {"dtype": dtype, "shape": shape,
                       "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


write("mixed_dtypes.safetensors", {
    "x.f64": ("F64", [3], [0.1, -1e30, 1e-40]),
    "w.f32": ("F32", [2, 3], [0.5, -1.25, 3.0, 1e-3, -0.0, 65504.0]),
    "scale.bf16": ("BF16", [2, 2], [1.0, -3.140625, 256.0, 0.0078125]),
    "emb.f16": ("F16", [5], [1.0, -2.0, 65504.0, 2.0 ** -24, float("-inf")]),
}, {"format": "pt"})

write("f32_only.safetensors", {
    "layers.0.attn.qkv.weight": ("F32", [3, 2], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    "layers.0.attn.qkv.bias": ("F32", [3], [-0.5, 0.25, 0.125]),
    "step": ("F32", [], [7.0]),
    "empty": ("F32", [0, 4], []),
}, {"format": "pt", "heads": "4"})
