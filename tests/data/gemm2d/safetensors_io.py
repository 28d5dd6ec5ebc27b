"""Minimal stdlib-only F32 safetensors reader/writer for the `meshtp gemm` tests."""
import json
import struct


def write(path, tensors):
    """tensors: {name: (shape, flat list of floats)}; F32, data in name order."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        shape, values = tensors[name]
        blob = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": list(shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read(path):
    """{name: (shape, flat list of floats)} for the F32 tensors of a file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32", (path, name, entry["dtype"])
        begin, end = entry["data_offsets"]
        count = (end - begin) // 4
        out[name] = (entry["shape"], list(struct.unpack("<%df" % count,
                                                         data[8 + n + begin:8 + n + end])))
    return out
