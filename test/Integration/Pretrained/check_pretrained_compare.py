"""check_pretrained.py's comparison (its steps 4 and 5): the Tessel parameters mapped onto
the folder's tensors, the reference run on step 1's batches, the loss and every gradient
compared, and the table printed (compare, Outcome).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

from check_pretrained_io import (ParityError, read_dump, read_step_loss, read_token_file,
                                 step_batches)
from check_pretrained_mapping import map_parameters
import example_file  # noqa: E402  (../Sft/Inputs/, on sys.path from check_pretrained_io)
import hf_reference as ref  # noqa: E402


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
