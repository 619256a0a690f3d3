"""Checks that two safetensors files (or folders of them) hold the same tensors, bit for bit.

  same_tensors.py A B [--only-in-a]

A and B are .safetensors files or folders, whose *.safetensors files are read together (a
sharded Hugging Face folder).

Every tensor of A must be in B with the same dtype, shape and bytes; without --only-in-a, B
must hold no other tensor. Prints "SAME TENSORS n=N" or the first difference and exits 1.
"""
import glob
import json
import os
import struct
import sys


def read(path):
    if os.path.isdir(path):
        out = {}
        files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
        if not files:
            print(f"DIFFERENT: {path} holds no .safetensors file")
            sys.exit(1)
        for f in files:
            out.update(read(f))
        return out
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    header.pop("__metadata__", None)
    base = 8 + length
    return {name: (t["dtype"], t["shape"], data[base + t["data_offsets"][0]:base + t["data_offsets"][1]])
            for name, t in header.items()}


def main():
    a, b = read(sys.argv[1]), read(sys.argv[2])
    for name, (dtype, shape, data) in sorted(a.items()):
        if name not in b:
            print(f"DIFFERENT: {name} is not in {sys.argv[2]}")
            return 1
        if b[name] != (dtype, shape, data):
            print(f"DIFFERENT: {name}: {dtype} {shape} against {b[name][0]} {b[name][1]}"
                  f"{'' if b[name][:2] != (dtype, shape) else ' (other values)'}")
            return 1
    extra = sorted(set(b) - set(a))
    if extra and "--only-in-a" not in sys.argv:
        print(f"DIFFERENT: {sys.argv[2]} also holds {extra[0]}")
        return 1
    print(f"SAME TENSORS n={len(a)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
