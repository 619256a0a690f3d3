"""Which Hugging Face tensor each Tessel parameter holds, found by value and without
reading the importer's names (step 4 of check_pretrained.py, whose docstring states the
rules): View, Match, find_match, hf_views, map_parameters, unmatched_hint.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

import check_pretrained_io  # noqa: F401  (puts Inputs/ on sys.path)
import hf_reference as ref  # noqa: E402


# ---------------------------------------------------------------------------------------------
# Which Hugging Face tensor each Tessel parameter holds
# ---------------------------------------------------------------------------------------------


@dataclass
class View:
    """A Hugging Face tensor or a part of it that a Tessel parameter may hold."""

    source: str  # the tensor's name in the folder (a tied head's class: its embedding)
    part: Optional[int]  # c_attn's q, k or v (0, 1, 2), or None for the whole tensor
    values: np.ndarray  # f32

    def label(self) -> str:
        return self.source + ("" if self.part is None else f"[{'qkv'[self.part]}]")

    def take(self, arr: np.ndarray) -> np.ndarray:
        """The same part of an array shaped as the source (its gradient)."""
        if self.part is None:
            return arr
        n = arr.shape[-1] // 3
        return arr[..., self.part * n:(self.part + 1) * n]


@dataclass
class Match:
    view: View
    perm: Tuple[int, ...]  # axes of the Tessel parameter, in the source's order
    transposed: bool  # against the source matrix's transpose
    rows: Optional[int] = None  # only the first `rows` rows of the source

    def describe(self) -> str:
        how = []
        if self.perm != tuple(range(len(self.perm))):
            how.append(f"axes {list(self.perm)}")
        if self.transposed:
            how.append("transposed")
        if self.rows is not None:
            how.append(f"rows 0..{self.rows - 1}")
        return self.view.label() + (f" ({', '.join(how)})" if how else "")

    def arrange(self, tessel: np.ndarray) -> np.ndarray:
        """A Tessel-shaped array (a gradient) in the source view's shape and order."""
        flat = np.ascontiguousarray(np.transpose(tessel, self.perm)).reshape(-1)
        shape = self.view.values.shape
        if self.rows is not None:
            shape = (self.rows,) + shape[1:]
        if self.transposed:
            return flat.reshape(shape[::-1]).T
        return flat.reshape(shape)

    def source_part(self, arr: np.ndarray) -> np.ndarray:
        """The part of a source-shaped array (the reference gradient) this parameter holds."""
        part = self.view.take(arr)
        return part if self.rows is None else part[: self.rows]


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).reshape(-1)


def find_match(t: np.ndarray, v: View, sorted_bits: Dict[int, np.ndarray]) -> Optional[Match]:
    """How Tessel values `t` are the view's values, or None."""
    src = v.values
    tb = bits(t)
    if t.size == src.size:
        key = id(v)
        if key not in sorted_bits:
            sorted_bits[key] = np.sort(bits(src))
        if not np.array_equal(np.sort(tb), sorted_bits[key]):
            return None
        targets = [(False, bits(src))]
        if src.ndim == 2:
            targets.append((True, bits(src.T)))
        for perm in itertools.permutations(range(t.ndim)):
            pb = bits(np.transpose(t, perm))
            for transposed, sb in targets:
                if np.array_equal(pb, sb):
                    return Match(v, perm, transposed)
        return None
    # The first rows of a table: [rows, cols] of a [n, cols] source, rows < n.
    if src.ndim == 2 and v.part is None and t.size % src.shape[1] == 0:
        rows = t.size // src.shape[1]
        if 0 < rows < src.shape[0]:
            head = bits(src[:rows])
            for perm in itertools.permutations(range(t.ndim)):
                if np.array_equal(bits(np.transpose(t, perm)), head):
                    return Match(v, perm, False, rows)
    return None


def hf_views(ck: ref.Checkpoint) -> Tuple[List[View], Dict[str, List[str]]]:
    """The views a Tessel parameter may hold, and the classes of identical tensors (a tied head
    stored beside its embedding)."""
    classes: Dict[str, List[str]] = {}
    for name in ck.tensors:
        target = ck.aliases.get(name, name)
        classes.setdefault(target, []).append(name)
    views = []
    for name in classes:
        values = ck.tensors[name].astype(np.float32)
        views.append(View(name, None, values))
        if ck.config.model_type == "gpt2" and name.endswith(("attn.c_attn.weight",
                                                             "attn.c_attn.bias")):
            n = values.shape[-1] // 3
            views += [View(name, k, values[..., k * n:(k + 1) * n]) for k in range(3)]
    return views, classes


def map_parameters(init: Dict[str, np.ndarray], ck: ref.Checkpoint
                   ) -> Tuple[Dict[str, Match], List[str]]:
    """{tessel name: match} and the problems that keep the mapping from being one to one."""
    views, classes = hf_views(ck)
    problems: List[str] = []
    # A stored copy of a tied head must really be the embedding.
    for alias, target in ck.aliases.items():
        if not np.array_equal(bits(ck.tensors[alias]), bits(ck.tensors[target])):
            problems.append(f"{alias} differs from {target} although the head is tied")
    sorted_bits: Dict[int, np.ndarray] = {}
    matches: Dict[str, Match] = {}
    for name, t in init.items():
        t = t.astype(np.float32)
        found = [m for m in (find_match(t, v, sorted_bits) for v in views) if m is not None]
        if not found:
            problems.append(f"{name} {list(t.shape)} equals no Hugging Face tensor"
                            + unmatched_hint(t, views))
            continue
        sources = sorted({m.view.label() for m in found})
        if all(m.view.source in ck.buffers for m in found):
            problems.append(f"{name} holds the values of {' = '.join(sources)}: a buffer, not "
                            "a parameter")
            continue
        if len(sources) > 1:
            problems.append(f"{name} equals several Hugging Face tensors: {sources}")
            continue
        matches[name] = found[0]
    # Every source used once: whole, or all parts of a fused c_attn; buffers never.
    used: Dict[Tuple[str, Optional[int]], List[str]] = {}
    for name, m in matches.items():
        used.setdefault((m.view.source, m.view.part), []).append(name)
    for (source, part), names in sorted(used.items(), key=str):
        if len(names) > 1:
            problems.append(f"{source}{'' if part is None else [part]} initialises "
                            f"{len(names)} Tessel parameters: {sorted(names)}"
                            + (" (a tied head imported untied?)" if source == ck.embed else ""))
    for source in classes:
        whole = (source, None) in used
        parts = [k for k in range(3) if (source, k) in used]
        if source in ck.buffers:
            continue
        if whole and parts:
            problems.append(f"{source} is used whole and as parts {parts}")
        elif not whole and not parts:
            problems.append(f"{' = '.join(classes[source])} initialises no Tessel parameter")
        elif parts and len(parts) != 3:
            missing = [("q", "k", "v")[k] for k in range(3) if k not in parts]
            problems.append(f"{source}: the {'/'.join(missing)} part(s) initialise no Tessel "
                            "parameter")
    return matches, problems


def unmatched_hint(t: np.ndarray, views: Sequence[View]) -> str:
    """Why a Tessel parameter matches nothing, when a near miss explains it: the same values
    in another order, or nearly the same values (rounded twice, or widened wrongly)."""
    tb = np.sort(bits(t))
    best = None
    for v in views:
        if v.values.size != t.size:
            continue
        if np.array_equal(tb, np.sort(bits(v.values))):
            return (f" (it holds the values of {v.label()} in an order no reshape, axis "
                    "permutation or transpose gives: rows or columns permuted?)")
        for arr in ([v.values] + ([v.values.T] if v.values.ndim == 2 else [])):
            ref_flat = np.ascontiguousarray(arr).reshape(-1).astype(np.float64)
            diff = np.linalg.norm(t.reshape(-1).astype(np.float64) - ref_flat)
            rel = diff / max(np.linalg.norm(ref_flat), 1e-30)
            if best is None or rel < best[0]:
                best = (rel, v.label())
    if best is not None and best[0] < 1e-2:
        return f" (nearest: {best[1]}, relative difference {best[0]:.1e})"
    return ""
