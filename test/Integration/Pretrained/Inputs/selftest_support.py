"""The harness of selftest.py's checks: the paths (it puts Inputs/, Pretrained/ and Parity/
on sys.path), the registry that @check fills (CHECKS, run in the order the modules register
them), Failure and expect, the scratch folder TMP (made by selftest.main(): read it as
selftest_support.TMP), and the tiny models and random batches the checks start from.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import Callable, List, Tuple

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
PRETRAINED = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(PRETRAINED)))
sys.path.insert(0, HERE)
sys.path.insert(0, PRETRAINED)
sys.path.insert(0, os.path.join(ROOT, "test", "Integration", "Parity"))
import hf_reference as ref  # noqa: E402
import make_hf_model as mk  # noqa: E402


TMP = ""  # the scratch folder, made by main()
CHECKS: List[Tuple[str, Callable[[], str]]] = []


def check(fn):
    CHECKS.append((fn.__name__, fn))
    return fn


class Failure(Exception):
    pass


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise Failure(what)


def tiny_spec(arch: str) -> mk.Spec:
    """Models small enough for finite differences and loops, odd in the same ways."""
    s = mk.default_spec(arch)
    common = dict(vocab=11, hidden=12, layers=2, intermediate=10, max_positions=16)
    if arch == "gpt2":
        return replace(s, heads=3, kv_heads=3, head_dim=4, bos=10, eos=10, **common)
    if arch == "qwen3":
        # head_dim 4 although hidden / heads = 6.
        return replace(s, heads=2, kv_heads=1, head_dim=4, bos=9, eos=10, **common)
    if arch == "llama31":
        # head 8, theta 500000: wavelengths 6.3, 167, 4443, 118000; with original 400 one is
        # kept, one smoothed and two divided.
        return replace(s, heads=3, kv_heads=1, head_dim=8, bos=9, eos=10,
                       rope_scaling=dict(s.rope_scaling, original_max_position_embeddings=400),
                       **common)
    return replace(s, heads=3, kv_heads=1, head_dim=4, bos=9, eos=10, **common)


def folder(arch: str, name: str, **kw) -> ref.Checkpoint:
    path = os.path.join(TMP, name)
    mk.make_model(arch, path, **kw)
    return ref.load_folder(path)


def random_batches(vocab: int, micro: int, batch: int, seq: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(micro):
        ids = torch.randint(0, vocab, (batch, seq + 1), generator=g)
        out.append((ids[:, :-1], ids[:, 1:]))
    return out
