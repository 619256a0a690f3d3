"""Writes the seeds of the file-format fuzzers that are not compiled plans or shipped files:
small, valid inputs of each reader, so that the fuzzer starts from the format's structure.

  python3 test/fuzz/make_seeds.py test/fuzz/inputs

The plan seeds are plan files of small models (tessel compile --emit=plan-file) and the
cluster seed a shipped preset; inputs that once crashed a reader are added beside the seeds
under the name crash-<what>.
"""
import json
import os
import struct
import sys


def write(path, data):
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, bytes)]; laid out as Tessel writes them."""
    header, offset, blob = {}, 0, b""
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blob += data
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blob


def llmc(magic, version, tokens, width):
    header = [magic, version, len(tokens)] + [0] * 253
    fmt = "<%d%s" % (len(tokens), "H" if width == 2 else "I")
    return struct.pack("<256i", *header) + struct.pack(fmt, *tokens)


def examples(rows, pad):
    """Tessel's example file (common/data/TokenFiles.h): rows of (ids, mask), 16-bit ids."""
    ids = [i for row, _ in rows for i in row]
    mask = [m for _, row in rows for m in row]
    starts = [0]
    for row, _ in rows:
        starts.append(starts[-1] + len(row))
    header = [20261101, 1, 2, pad, len(rows), 0, len(ids), 0] + [0] * 248
    return (struct.pack("<256I", *header) + struct.pack("<%dQ" % len(starts), *starts) +
            struct.pack("<%dH" % len(ids), *ids) + bytes(mask))


def main():
    out = sys.argv[1]
    d = lambda target: os.path.join(out, target)

    write(os.path.join(d("json"), "manifest.json"), json.dumps({
        "format": "tessel-checkpoint", "version": 5, "model": "tiny", "fingerprint": "0123abcd",
        "step": 3, "extra": {"data_rng": {"state": "0x1f"}, "seed": 1337},
        "params": {"wte": {"dtype": "F32", "shape": [16, 8], "shards": [
            {"file": "model-00000.safetensors", "offset": [0, 0], "shape": [16, 8],
             "xxh3_chunks": ["15f04edc2c76b827"]}]}},
        "optimizer": {}, "checksum": "89ab"}, indent=2))
    write(os.path.join(d("json"), "metrics.json"),
          '{"step":12,"loss":4.25e+00,"lr":3e-4,"grad_norm":1.5,"name":"a\\u00e9\\"\\n\\\\b",'
          '"list":[true,false,null,-0.0,1e308,[],{}]}')

    f32 = struct.pack("<6f", 1, -2, 0.5, 3e38, -0.0, 7)
    write(os.path.join(d("safetensors"), "checkpoint.safetensors"), safetensors(
        [("a.weight", "F32", [2, 3], f32), ("b", "I64", [], struct.pack("<q", 42)),
         ("h", "BF16", [2], struct.pack("<2H", 0x3f80, 0xc040)),
         ("g", "F16", [1, 1], struct.pack("<H", 0x3c00))], {"format": "tessel-checkpoint"}))
    write(os.path.join(d("safetensors"), "empty.safetensors"), safetensors([]))

    write(os.path.join(d("tokens"), "gpt2.bin"), llmc(20240520, 1, list(range(40)), 2))
    write(os.path.join(d("tokens"), "llama3.bin"),
          llmc(20240801, 7, [128000, 9906, 1917, 0] + list(range(30)), 4))
    write(os.path.join(d("tokens"), "nanogpt.bin"), struct.pack("<32H", *range(50, 82)))
    write(os.path.join(d("tokens"), "examples.bin"), examples(
        [([1, 5, 9, 2], [0, 0, 1, 1]), ([1, 7, 3, 3, 8, 2, 6, 4], [0, 0, 0, 1, 1, 1, 1, 1]),
         ([1, 4, 2], [0, 1, 1])], pad=0))

    for i, body in enumerate([
            "add x0 x1; gelu t0",
            "add x0 x1; gelu t0; unary_grad gelu t0 t1 x2",
            "const 0.5; mul x0 t0; pow t1 2.5; unary_grad pow x0 t2 x1 2.5",
            "lt x0 x1; where t0 x0 x1; neg t1; exp t2"]):
        write(os.path.join(d("elementwise-body"), "body-%d.txt" % i), body)


if __name__ == "__main__":
    main()
