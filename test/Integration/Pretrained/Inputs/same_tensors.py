"""Checks that two safetensors files (or folders of them) hold the same tensors, bit for bit.

  same_tensors.py A B [--only-in-a]

A and B are .safetensors files or folders, whose *.safetensors files are read together (a
sharded Hugging Face folder).

Every tensor of A must be in B with the same dtype, shape and bytes; without --only-in-a, B
must hold no other tensor. Prints "SAME TENSORS n=N" or the first difference and exits 1.
"""
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_reference import read_safetensors  # noqa: E402


def read(path):
    """{name: (dtype, shape, bits)} of a file or of every *.safetensors file of a folder, through
    hf_reference's reader (floats widened to f32, which is exact, so equal bits are equal
    stored values)."""
    if os.path.isdir(path):
        out = {}
        files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
        if not files:
            print(f"DIFFERENT: {path} holds no .safetensors file")
            sys.exit(1)
        for f in files:
            out.update(read(f))
        return out
    return {name: (dtype, list(array.shape), array.tobytes())
            for name, (array, dtype) in read_safetensors(path).items()}


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
