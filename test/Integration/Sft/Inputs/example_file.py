#!/usr/bin/python3
"""Tessel's example files (common/data/TokenFiles.h), written and read independently of Tessel.

    example_file.py --out FILE --vocab V --examples N [--min-len A --max-len B]
                    [--prompt-fraction F] [--pad ID] [--seed S] [--mask-last]

writes N random examples: lengths drawn from [A, B], ids below V, each with a prompt (the
first part, untrained) and a completion (trained); with --mask-last, the last token of every
example is untrained too (so that its value can change without changing anything), and with
--change-last the same examples are written with each last id changed.

The layout: a header of 256 little-endian uint32 (magic 20261101, version 1, token width 2 or
4, pad id, example count as two words, token count as two words), then example count + 1
uint64 starts, the ids, and one mask byte per token (1: a trained target).

As a module: write(path, examples, vocab, pad) with examples a list of (ids, mask) pairs;
read(path) -> (examples, pad, width); rows(examples, pad, seq) -> the (tokens, targets) rows
the data loader must make of each example (targets -1 where ignored).
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Tuple

import numpy as np

MAGIC, VERSION = 20261101, 1

Example = Tuple[np.ndarray, np.ndarray]


def write(path: str, examples: List[Example], vocab: int, pad: int) -> None:
    wide = vocab > 65536
    starts = np.zeros(len(examples) + 1, dtype="<u8")
    for i, (ids, mask) in enumerate(examples):
        if len(ids) != len(mask) or len(ids) < 2:
            raise ValueError(f"example {i}: {len(ids)} ids and {len(mask)} mask bytes")
        starts[i + 1] = starts[i] + len(ids)
    tokens = int(starts[-1])
    header = np.zeros(256, dtype="<u4")
    header[:8] = (MAGIC, VERSION, 4 if wide else 2, pad, len(examples) & 0xFFFFFFFF,
                  len(examples) >> 32, tokens & 0xFFFFFFFF, tokens >> 32)
    ids = np.concatenate([np.asarray(e[0]) for e in examples]) if examples else np.zeros(0)
    mask = np.concatenate([np.asarray(e[1]) for e in examples]) if examples else np.zeros(0)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(starts.tobytes())
        f.write(ids.astype("<u4" if wide else "<u2").tobytes())
        f.write(mask.astype("u1").tobytes())


def read(path: str) -> Tuple[List[Example], int, int]:
    with open(path, "rb") as f:
        data = f.read()
    header = np.frombuffer(data[:1024], dtype="<u4")
    if int(header[0]) != MAGIC or int(header[1]) != VERSION:
        raise ValueError(f"{path}: not a version-{VERSION} example file")
    width, pad = int(header[2]), int(header[3])
    count = int(header[4]) | int(header[5]) << 32
    tokens = int(header[6]) | int(header[7]) << 32
    at = 1024
    starts = np.frombuffer(data[at:at + 8 * (count + 1)], dtype="<u8").astype(np.int64)
    at += 8 * (count + 1)
    ids = np.frombuffer(data[at:at + width * tokens], dtype="<u4" if width == 4 else "<u2")
    at += width * tokens
    mask = np.frombuffer(data[at:at + tokens], dtype="u1")
    if at + tokens != len(data):
        raise ValueError(f"{path}: {len(data)} bytes, the header implies {at + tokens}")
    examples = [(ids[starts[i]:starts[i + 1]].astype(np.int64),
                 mask[starts[i]:starts[i + 1]].astype(np.int64)) for i in range(count)]
    return examples, pad, width


def rows(examples: List[Example], pad: int, seq: int) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Each example as the row the loader makes of it: tokens cut at seq or padded; target j
    the next token where the mask trains it, else -1."""
    out = []
    for ids, mask in examples:
        tokens = np.full(seq, pad, dtype=np.int64)
        targets = np.full(seq, -1, dtype=np.int64)
        n = min(len(ids), seq)
        tokens[:n] = ids[:n]
        for j in range(seq):
            if j + 1 < len(ids) and mask[j + 1]:
                targets[j] = ids[j + 1]
        out.append((tokens, targets))
    return out


def random_examples(rng: np.random.Generator, count: int, vocab: int, min_len: int,
                    max_len: int, prompt_fraction: float, mask_last: bool) -> List[Example]:
    out = []
    for _ in range(count):
        n = int(rng.integers(min_len, max_len + 1))
        ids = rng.integers(0, vocab, size=n)
        prompt = max(1, min(n - 1, int(round(n * prompt_fraction * rng.uniform(0.5, 1.5)))))
        mask = np.zeros(n, dtype=np.int64)
        mask[prompt:] = 1
        if mask_last:
            mask[-1] = 0
        out.append((ids, mask))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--examples", type=int, required=True)
    p.add_argument("--min-len", type=int, default=4)
    p.add_argument("--max-len", type=int, default=40)
    p.add_argument("--prompt-fraction", type=float, default=0.4)
    p.add_argument("--pad", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mask-last", action="store_true")
    p.add_argument("--change-last", action="store_true",
                   help="the same examples as without it, each last token's id changed")
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    ex = random_examples(rng, a.examples, a.vocab, a.min_len, a.max_len, a.prompt_fraction,
                         a.mask_last)
    if a.change_last:
        for ids, _ in ex:
            ids[-1] = (ids[-1] + 1 + ids[-1] % 7) % a.vocab
    write(a.out, ex, a.vocab, a.pad)
    print(f"wrote {a.out}: {len(ex)} examples, {sum(len(e[0]) for e in ex)} tokens, "
          f"{sum(int(e[1].sum()) for e in ex)} trained")
    return 0


if __name__ == "__main__":
    sys.exit(main())
