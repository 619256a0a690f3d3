"""safetensors files, read and written with numpy only: the dumps of a Tessel executable
(--dump-dir) and what the checks write in that format.

reference.py imports every name here; its callers use them from there.
"""

from __future__ import annotations

import json
import struct
from typing import Dict, Optional

import numpy as np


# ---------------------------------------------------------------------------------------------
# safetensors, read and written with numpy
# ---------------------------------------------------------------------------------------------

_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
           "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
    """Reads every tensor of a .safetensors file: an 8-byte little-endian header length, a
    JSON header {name: {dtype, shape, data_offsets: [begin, end]}} (and an optional
    __metadata__), then the data, offsets relative to its start."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors file ({len(blob)} bytes)")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise ValueError(f"{path}: header length {header_len} runs past the end of the file")
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    data = memoryview(blob)[8 + header_len:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in _DTYPES:
            raise ValueError(f"{path}: {name}: unsupported dtype {dtype}")
        np_dtype = np.dtype(_DTYPES[dtype]).newbyteorder("<")
        shape = tuple(int(s) for s in info["shape"])
        begin, end = (int(o) for o in info["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64))
        if end - begin != count * np_dtype.itemsize or end > len(data) or begin < 0:
            raise ValueError(f"{path}: {name}: data_offsets {begin}..{end} do not fit "
                             f"{dtype} {list(shape)} in {len(data)} data bytes")
        arr = np.frombuffer(data[begin:end], dtype=np_dtype, count=count).reshape(shape)
        out[name] = arr.astype(np_dtype.newbyteorder("="), copy=True)
    return out


def write_safetensors(path: str, tensors: Dict[str, np.ndarray],
                      metadata: Optional[Dict[str, str]] = None) -> None:
    """Writes {name: array} as .safetensors (tensors laid out in name order, 8-byte aligned
    header)."""
    rev = {np.dtype(v): k for k, v in _DTYPES.items()}
    header: dict = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    chunks, offset = [], 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(np.asarray(tensors[name]))
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        raw = arr.tobytes()
        header[name] = {"dtype": rev[np.dtype(arr.dtype.newbyteorder("="))],
                        "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * ((8 - len(head) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for raw in chunks:
            f.write(raw)
