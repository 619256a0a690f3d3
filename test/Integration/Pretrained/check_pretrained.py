#!/usr/bin/python3
"""Parity of `tessel import-hf` with transformers' forward and backward pass.

    check_pretrained.py --arch {gpt2,llama,llama31,qwen2,qwen3} --tessel TESSEL --work DIR
                        [--dtype f32|bf16|f16] [--shards N] [--tied|--untied] [--tol 1e-5]
                        [--precision fp32|bf16] [--gpt2-layout hub|save_pretrained]
                        [--store-tied-head] [--buffers] [--config-style v4|v5]
                        [--examples N [--mask-last]]

  1. writes a Hugging Face folder with random weights, DIR/hf (Inputs/make_hf_model.py), and
     random token ids as an llm.c token file, DIR/tokens.bin (with --examples N, instead N
     random examples with loss masks as a Tessel example file, DIR/examples.bin, made by
     test/Integration/Sft/Inputs/example_file.py: some shorter than a row, some longer; the reference
     then ignores the targets the masks and the padding leave out, as Tessel must);
  2. imports it: TESSEL import-hf DIR/hf -o DIR/model.model --seq T --batch B
     --micro-batch B --data DIR/tokens.bin (and --precision P when given);
  3. compiles the spec and runs one step with --dump-dir: DIR/dump/init.safetensors (the
     parameters as initialised, Tessel's names), batches.safetensors (tokens.S.U and
     targets.S.U per step S and micro-batch U), grads.safetensors (step 1's gradients, summed
     over its micro-batches) and DIR/metrics.jsonl (a JSON line per step with its loss);
  4. finds, by value and without reading the importer's names, the Hugging Face tensor each
     Tessel parameter was initialised from (below);
  5. runs the reference (Inputs/hf_reference.py) on the batches of step 1 and compares the
     loss and every gradient: ||g_tessel - g_ref|| / ||g_ref|| <= tol per parameter, the
     Tessel gradient rearranged as its values were.

The mapping (4): a Tessel parameter's initial values, widened to f32, must equal bit for bit
the values of exactly one Hugging Face tensor, or of one of the three equal parts of GPT-2's
fused c_attn weight or bias (split along its last dim: q, k, v), in some arrangement:
  - the same values in the same order under another shape (a reshape: [heads * head, embed]
    as [heads, head, embed]),
  - or in the order of an axis permutation of the Tessel parameter, possibly against the
    transposed matrix (Tessel's `x @ w` contracts [embed, heads, head] where nn.Linear keeps
    [out, in]),
  - or the first rows of a table (a position table [n_positions, embed] cut to [seq, embed]).
Every tensor of the folder must be used exactly once (a fused c_attn as a whole or all three
parts; a tied head, stored or not, is one tensor with the embedding), except the buffers
older conversions saved (GPT-2's attn.bias / attn.masked_bias, Llama's rotary_emb.inv_freq),
which must not be. Anything unmatched,
ambiguous, unused or used twice fails the check.

A gradient that is zero in exact arithmetic (GPT-2's key bias: softmax does not see a shift
shared by every key) is rounding noise on both sides; when its reference norm is below 1e-6 of
the global norm it is held to ||g_tessel - g_ref|| <= tol * global norm instead.

Prints a table of every parameter and a last line `PARITY OK arch=... max_rel_err_loss=...
max_rel_err_grad=...` or `PARITY FAIL ...`; exits 1 on any failure, including a tessel without
`import-hf`, a command that fails, or a file it should have written and did not. Nothing is
reported as passing unless it was compared.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "Inputs"))
sys.path.insert(0, os.path.join(HERE, "..", "Sft", "Inputs"))
import example_file  # noqa: E402
import hf_reference as ref  # noqa: E402
import make_hf_model  # noqa: E402


class ParityError(Exception):
    """Something kept the comparison from being made: reported as PARITY FAIL."""


# ---------------------------------------------------------------------------------------------
# Running tessel and the executable
# ---------------------------------------------------------------------------------------------


def run(cmd: List[str], what: str, timeout: float, cwd: Optional[str] = None) -> str:
    print("running:", " ".join(cmd), flush=True)
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise ParityError(f"{what} did not finish within {timeout:g} s")
    except OSError as e:
        raise ParityError(f"cannot run {what}: {e}")
    if proc.returncode != 0:
        how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
               else f"exited with status {proc.returncode}")
        print(f"--- output of {what} (last 4000 chars) ---\n{proc.stdout[-4000:]}\n--- end ---",
              flush=True)
        raise ParityError(f"{what} {how}")
    return proc.stdout


def require_import_hf(tessel: str) -> None:
    """tessel prints its help and exits 0 on an unknown subcommand, so ask the help whether
    import-hf is one."""
    try:
        proc = subprocess.run([tessel, "--help"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace", timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ParityError(f"cannot run {tessel} --help: {e}")
    if "import-hf" not in proc.stdout:
        raise ParityError(f"{tessel} has no `import-hf` subcommand (its --help does not list "
                          "it): this check needs the Hugging Face importer")


def expect_file(path: str, what: str) -> str:
    if not os.path.isfile(path):
        raise ParityError(f"{what} was not written ({path})")
    return path


def read_step_loss(path: str, step: int = 1) -> float:
    """The loss of a training step from the metrics file (whose first line describes the run;
    evaluation lines carry eval_loss instead)."""
    expect_file(path, "the metrics file")
    found = None
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ParityError(f"{path}:{number}: not JSON ({e})")
            if isinstance(rec, dict) and rec.get("step") == step and "loss" in rec:
                if found is not None:
                    raise ParityError(f"{path}: two training lines for step {step}")
                found = float(rec["loss"])
    if found is None:
        raise ParityError(f"{path} has no training line for step {step}")
    return found


def read_dump(path: str, what: str) -> Dict[str, np.ndarray]:
    expect_file(path, what)
    try:
        return {n: a for n, (a, _) in ref.read_safetensors(path).items()}
    except (ValueError, KeyError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ParityError(f"cannot read {path}: {e}")


def read_token_file(path: str) -> np.ndarray:
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype="<i4")
        wide = int(header[0]) == 20240801
        ids = np.frombuffer(f.read(), dtype="<u4" if wide else "<u2")
    return ids[: int(header[2])].astype(np.int64)


def step_batches(batches: Dict[str, np.ndarray], step: int, seq: int, batch: int, vocab: int,
                 stream: Optional[np.ndarray],
                 example_rows: Optional[List[Tuple[np.ndarray, np.ndarray]]] = None
                 ) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """The micro-batches of one step, checked: int ids below the vocabulary, [micro, seq]
    each, `batch` sequences in all, every sequence a window of the token file and its targets
    the next tokens (with examples: every row one example's row, example_file.rows, its
    ignored targets -1)."""
    out = []
    u = 0
    while f"tokens.{step}.{u}" in batches:
        pair = []
        for kind in ("tokens", "targets"):
            key = f"{kind}.{step}.{u}"
            if key not in batches:
                raise ParityError(f"batches.safetensors has tokens.{step}.{u} but no {key}")
            t = batches[key]
            if t.dtype.kind not in "iu":
                raise ParityError(f"{key} is {t.dtype}, expected integer ids")
            if t.ndim != 2 or t.shape[1] != seq:
                raise ParityError(f"{key} has shape {list(t.shape)}, expected [micro, {seq}]")
            low = -1 if kind == "targets" and example_rows is not None else 0
            if t.size and (t.min() < low or t.max() >= vocab):
                raise ParityError(f"{key} holds ids outside [{low}, {vocab})")
            pair.append(t.astype(np.int64))
        out.append(pair)
        u += 1
    if not out:
        raise ParityError(f"batches.safetensors has no tokens.{step}.0 "
                          f"(it holds {sorted(batches)[:6]}...)")
    rows = sum(p[0].shape[0] for p in out)
    if rows != batch:
        raise ParityError(f"step {step} has {rows} sequences over {len(out)} micro-batch(es), "
                          f"expected --batch {batch}")
    if stream is not None:
        windows = np.lib.stride_tricks.sliding_window_view(stream, seq + 1)
        for u, (tokens, targets) in enumerate(out):
            for r in range(tokens.shape[0]):
                row = np.concatenate([tokens[r], targets[r, -1:]])
                if not np.any(np.all(windows == row, axis=1)):
                    raise ParityError(f"tokens.{step}.{u} row {r} with its targets is no window "
                                      "of the token file passed to --data")
    if example_rows is not None:
        known = {(a.tobytes(), b.tobytes()) for a, b in example_rows}
        for u, (tokens, targets) in enumerate(out):
            for r in range(tokens.shape[0]):
                if (tokens[r].tobytes(), targets[r].tobytes()) not in known:
                    raise ParityError(f"tokens.{step}.{u} row {r} and its targets are no "
                                      "example's row of the example file")
        ignored = sum(int((b == -1).sum()) for _, b in out)
        print(f"step {step}: {ignored} of {sum(b.size for _, b in out)} targets ignored")
        if ignored == 0:
            raise ParityError("no target of the step is ignored: the masks are not exercised")
    return [(torch.from_numpy(a), torch.from_numpy(b)) for a, b in out]


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


# ---------------------------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    ok: bool
    summary: str


def compare(hf_dir: str, dump_dir: str, metrics: str, seq: int, batch: int, tol: float,
            arch: str, token_file: Optional[str] = None,
            examples_file: Optional[str] = None) -> Outcome:
    """Steps 4 and 5: map, run the reference, compare, print the table."""
    try:
        ck = ref.load_folder(hf_dir)
    except (ValueError, KeyError, OSError) as e:
        raise ParityError(f"the reference cannot read {hf_dir}: {e}")
    init = read_dump(os.path.join(dump_dir, "init.safetensors"), "init.safetensors")
    grads = read_dump(os.path.join(dump_dir, "grads.safetensors"), "grads.safetensors")
    batches = read_dump(os.path.join(dump_dir, "batches.safetensors"), "batches.safetensors")
    loss_tessel = read_step_loss(metrics, 1)
    if set(init) != set(grads):
        raise ParityError(f"init.safetensors and grads.safetensors hold different names: "
                          f"only in init {sorted(set(init) - set(grads))}, only in grads "
                          f"{sorted(set(grads) - set(init))}")
    for name in init:
        if init[name].shape != grads[name].shape:
            raise ParityError(f"{name}: init {list(init[name].shape)}, gradient "
                              f"{list(grads[name].shape)}")
    stream = read_token_file(token_file) if token_file else None
    example_rows = None
    if examples_file:
        examples, pad, _ = example_file.read(examples_file)
        example_rows = example_file.rows(examples, pad, seq)
    micro = step_batches(batches, 1, seq, batch, ck.config.vocab, stream, example_rows)

    matches, problems = map_parameters(init, ck)
    print(f"\nparameters: {len(init)} in Tessel, {len(ck.parameter_shapes())} in the folder "
          f"({len(ck.tensors)} tensors: {len(ck.aliases)} tied copies, {len(ck.buffers)} "
          f"buffers); {len(matches)} mapped by value")
    if problems:
        for p in problems:
            print(f"  mapping: {p}")
        return Outcome(False, f"the parameters do not map one to one onto the folder's "
                              f"tensors ({len(problems)} problem(s); first: {problems[0]})")

    loss_ref, grads_ref = ref.loss_and_grads(ck, micro)
    global_norm = math.sqrt(sum(float(np.sum(g * g)) for n, g in grads_ref.items()
                                if n not in ck.aliases))
    tiny = 1e-6 * global_norm

    rows = []
    for name in sorted(init):
        m = matches[name]
        g_ref = m.source_part(grads_ref[m.view.source])
        g_ours = m.arrange(grads[name].astype(np.float64))
        n_ref = float(np.linalg.norm(g_ref))
        n_diff = float(np.linalg.norm(g_ours - g_ref))
        finite = bool(np.all(np.isfinite(g_ours)))
        if not finite:
            err, ok, note = float("nan"), False, "  (not finite)"
        elif n_ref < tiny:
            err = n_diff / global_norm if global_norm > 0 else float("inf")
            ok, note = err <= tol, "  (zero gradient: |diff| / global norm)"
        else:
            err = n_diff / n_ref
            ok, note = err <= tol, ""
        rows.append((name, list(init[name].shape), m.describe(), float(np.linalg.norm(g_ours)),
                     n_ref, err, ok, note))
        if m.rows is not None:
            # Positions past the sequence are never read: the reference must not move them.
            rest = m.view.take(grads_ref[m.view.source])[m.rows:]
            if np.any(rest != 0):
                rows[-1] = rows[-1][:6] + (False, "  (reference gradient past the rows?)")

    loss_err = abs(loss_tessel - loss_ref) / abs(loss_ref) if loss_ref else float("inf")
    loss_ok = loss_err <= tol
    print(f"\nstep 1 loss: tessel {loss_tessel:.8f}, reference {loss_ref:.8f}, relative error "
          f"{loss_err:.2e}{'' if loss_ok else '  FAIL'} ({len(micro)} micro-batch(es) of "
          f"{micro[0][0].shape[0]} x {seq})")
    print(f"\ngradients of step 1 (relative error ||g_tessel - g_ref|| / ||g_ref||, "
          f"tolerance {tol:g}; global norm {global_norm:.4e})")
    w_name = max(len(r[0]) for r in rows)
    w_src = max(len(r[2]) for r in rows)
    print(f"  {'tessel parameter':<{w_name}}  {'shape':<14} {'hugging face tensor':<{w_src}} "
          f"{'|g_tessel|':>11} {'|g_ref|':>11} {'rel_err':>9}")
    failed, max_grad = [], 0.0
    for name, shape, src, n_ours, n_ref, err, ok, note in rows:
        max_grad = max(max_grad, err) if math.isfinite(err) else float("inf")
        if not ok:
            failed.append(name)
        print(f"  {name:<{w_name}}  {str(shape):<14} {src:<{w_src}} {n_ours:11.4e} "
              f"{n_ref:11.4e} {err:9.2e}{'' if ok else '  FAIL'}{note}")

    summary = (f"arch={arch} max_rel_err_loss={loss_err:.2e} max_rel_err_grad={max_grad:.2e} "
               f"params={len(rows)} tol={tol:g}")
    if failed or not loss_ok:
        what = []
        if not loss_ok:
            what.append("loss off")
        if failed:
            what.append(f"{len(failed)} gradient(s) off: {', '.join(failed[:4])}"
                        + (" ..." if len(failed) > 4 else ""))
        return Outcome(False, f"{summary} ({'; '.join(what)})")
    return Outcome(True, summary)


# ---------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", required=True, choices=make_hf_model.ARCHS)
    p.add_argument("--tessel", required=True, help="the tessel compiler")
    p.add_argument("--work", required=True, help="a folder for the model, spec and dumps")
    p.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
    p.add_argument("--shards", type=int, default=1)
    tie = p.add_mutually_exclusive_group()
    tie.add_argument("--tied", dest="tied", action="store_true", default=None)
    tie.add_argument("--untied", dest="tied", action="store_false")
    p.add_argument("--gpt2-layout", choices=["hub", "save_pretrained"],
                   default="save_pretrained")
    p.add_argument("--store-tied-head", action="store_true")
    p.add_argument("--buffers", action="store_true",
                   help="the folder also holds the buffers older conversions saved")
    p.add_argument("--config-style", choices=["v4", "v5"], default="v4")
    p.add_argument("--seed", type=int, default=0, help="the weights' and tokens' seed")
    p.add_argument("--seq", type=int, default=24)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--micro-batch", type=int, help="default: --batch")
    p.add_argument("--tokens", type=int, default=4096, help="ids in the token file")
    p.add_argument("--precision", choices=["fp32", "bf16"],
                   help="passed to import-hf (default: not passed, the importer chooses; it "
                        "trains weights stored in 16 bits in bf16)")
    p.add_argument("--tol", type=float, default=1e-5)
    p.add_argument("--examples", type=int, default=0,
                   help="train on N random examples with loss masks instead of a stream")
    p.add_argument("--mask-last", action="store_true",
                   help="with --examples: every example's last token untrained too")
    p.add_argument("--threads", type=int, help="--threads for the executable")
    p.add_argument("--timeout", type=float, default=600, help="seconds allowed to each command")
    args = p.parse_args(argv)
    micro_batch = args.micro_batch or args.batch
    try:
        work = os.path.abspath(args.work)
        hf, tokens = os.path.join(work, "hf"), os.path.join(work, "tokens.bin")
        examples = os.path.join(work, "examples.bin") if args.examples else None
        spec, exe = os.path.join(work, "model.model"), os.path.join(work, "model")
        dump, metrics = os.path.join(work, "dump"), os.path.join(work, "metrics.jsonl")
        # Nothing from an earlier run may stand in for what this one fails to write.
        for path in (hf, dump):
            shutil.rmtree(path, ignore_errors=True)
        for path in (tokens, spec, exe, metrics) + ((examples,) if examples else ()):
            if os.path.exists(path):
                os.remove(path)
        os.makedirs(dump)

        make = [sys.executable, os.path.join(HERE, "Inputs", "make_hf_model.py"),
                "--arch", args.arch, "--out", hf, "--dtype", args.dtype,
                "--shards", str(args.shards), "--seed", str(args.seed),
                "--gpt2-layout", args.gpt2_layout, "--config-style", args.config_style,
                "--tokens", str(args.tokens), "--token-file", tokens]
        if args.tied is not None:
            make.append("--tied" if args.tied else "--untied")
        if args.store_tied_head:
            make.append("--store-tied-head")
        if args.buffers:
            make.append("--buffers")
        run(make, "make_hf_model.py", args.timeout)
        if examples:
            with open(os.path.join(hf, "config.json")) as f:
                vocab = int(json.load(f)["vocab_size"])
            # Lengths around the row's seq + 1: padded rows, cut rows and rows just full.
            run([sys.executable, os.path.join(HERE, "..", "Sft", "Inputs", "example_file.py"),
                 "--out", examples, "--vocab", str(vocab), "--examples", str(args.examples),
                 "--min-len", "3", "--max-len", str(args.seq + args.seq // 2),
                 "--pad", str(vocab - 1), "--seed", str(args.seed)]
                + (["--mask-last"] if args.mask_last else []), "example_file.py", args.timeout)
        tessel = args.tessel
        if os.path.sep not in tessel:
            tessel = shutil.which(tessel) or tessel
        require_import_hf(tessel)
        imp = [tessel, "import-hf", hf, "-o", spec, "--seq", str(args.seq), "--batch",
               str(args.batch), "--micro-batch", str(micro_batch), "--data",
               examples or tokens]
        if args.precision:
            imp += ["--precision", args.precision]
        run(imp, "tessel import-hf", args.timeout)
        expect_file(spec, "the spec (tessel import-hf -o)")
        with open(spec) as f:
            if "precision = bf16" in f.read():
                print("note: the imported spec trains in bf16; the reference is fp32, so "
                      "expect errors near bf16's 2^-8, not fp32's")
        run([tessel, "compile", spec, "-o", exe], "tessel compile", args.timeout)
        expect_file(exe, "the executable (tessel compile -o)")
        cmd = [exe, "--steps", "1", "--seed", "1", "--eval-every", "0", "--quiet",
               "--dump-dir", dump, "--metrics", metrics]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        run(cmd, os.path.basename(exe), args.timeout)

        outcome = compare(hf, dump, metrics, args.seq, args.batch, args.tol, args.arch,
                          None if examples else tokens, examples)
        print()
        print(f"PARITY {'OK' if outcome.ok else 'FAIL'} {outcome.summary}")
        return 0 if outcome.ok else 1
    except ParityError as e:
        print(f"PARITY FAIL arch={args.arch}: {e}")
        return 1
    except Exception as e:  # a bug here must not look like a pass either
        import traceback
        traceback.print_exc()
        print(f"PARITY FAIL arch={args.arch}: internal error: {type(e).__name__}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
