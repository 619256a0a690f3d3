#!/usr/bin/python3
"""Numerical parity of a compiled Tessel model against the PyTorch reference (reference.py).

    check_parity.py --exe build/gpt_parity --model-kind gpt --model test/Integration/Parity/gpt_parity.model \
                    --data test/Integration/Parity/Inputs/text.txt --steps 5 [--tol 1e-4]

Runs the executable with --dump-dir and --metrics into a temporary directory, builds the
reference from the initial parameters it dumped, and replays the same batches:

  1. the loss of step 1 (metrics line of step 1 against the reference's forward pass);
  2. every gradient of step 1 (accumulated over the micro-batches, before clipping):
     relative error ||g_tessel - g_ref|| / ||g_ref|| per tensor;
  3. the loss, learning rate and gradient norm of steps 1..N, the reference taking the same
     AdamW steps (with the same clipping and schedule) between them.

Every number about the model (dims, layers, batch sizes, optimizer, schedule, clipping) is read
from `tessel compile MODEL --emit=graph`; none is written here. Prints a table per check and a
last line `PARITY OK max_rel_err_loss=... max_rel_err_grad=...` or `PARITY FAIL ...`; exits
with status 1 on any failure, including an executable that is missing, crashes or leaves out
something it should have written. Nothing is reported as passing unless it was compared.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference as ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class ParityError(Exception):
    """Something kept the comparison from being made: reported as PARITY FAIL."""


def rel_err(ours: float, theirs: float) -> float:
    if math.isnan(ours) or math.isnan(theirs):
        return float("nan")
    if theirs == 0.0:
        return 0.0 if ours == 0.0 else float("inf")
    return abs(ours - theirs) / abs(theirs)


def within(err: float, tol: float) -> bool:
    return err <= tol  # False for NaN


def find_tessel(arg: Optional[str]) -> str:
    if arg:
        return arg
    built = os.path.join(ROOT, "build", "bin", "tessel")
    if os.access(built, os.X_OK):
        return built
    found = shutil.which("tessel")
    if found:
        return found
    raise ParityError("cannot find the tessel compiler: pass --tessel")


def run_executable(exe: str, args: argparse.Namespace, work: str) -> str:
    """Runs the compiled model; returns the path of its metrics file."""
    if os.path.sep not in exe:
        exe = shutil.which(exe) or exe
    if not os.path.isfile(exe):
        raise ParityError(f"executable {exe} does not exist")
    if not os.access(exe, os.X_OK):
        raise ParityError(f"{exe} is not executable")
    metrics = os.path.join(work, "metrics.jsonl")
    dump = os.path.join(work, "dump")
    # Nothing left from an earlier run (--keep) may stand in for what this run fails to write.
    shutil.rmtree(dump, ignore_errors=True)
    if os.path.exists(metrics):
        os.remove(metrics)
    os.makedirs(dump)
    cmd = [exe, "--steps", str(args.steps), "--data", args.data, "--threads", str(args.threads),
           "--metrics", metrics, "--dump-dir", dump, "--seed", str(args.seed)]
    print("running:", " ".join(cmd), flush=True)
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", timeout=args.timeout)
    except subprocess.TimeoutExpired:
        raise ParityError(f"{exe} did not finish within {args.timeout} s")
    except OSError as e:
        raise ParityError(f"cannot run {exe}: {e}")
    if args.verbose or proc.returncode != 0:
        tail = proc.stdout[-4000:]
        print(f"--- output of {os.path.basename(exe)} (last 4000 chars) ---\n{tail}"
              f"\n--- end of output ---", flush=True)
    if proc.returncode != 0:
        how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
               else f"exited with status {proc.returncode}")
        raise ParityError(f"{exe} {how}")
    return metrics


def read_metrics(path: str, steps: int) -> Dict[int, dict]:
    if not os.path.isfile(path):
        raise ParityError(f"the executable wrote no metrics file ({path})")
    lines: Dict[int, dict] = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ParityError(f"{path}:{number}: not JSON ({e}): {line[:200]}")
            if not isinstance(rec, dict) or "loss" not in rec or "step" not in rec:
                continue  # eval lines (eval_loss) and anything else that is not a training step
            step = int(rec["step"])
            if step in lines:
                raise ParityError(f"{path}:{number}: a second training line for step {step}")
            lines[step] = rec
    missing = [s for s in range(1, steps + 1) if s not in lines]
    if missing:
        raise ParityError(f"{path}: no training line for step(s) {missing} "
                          f"(found steps {sorted(lines)})")
    for s in range(1, steps + 1):
        for key in ("loss", "lr", "grad_norm"):
            if key not in lines[s]:
                raise ParityError(f"{path}: the line of step {s} has no {key!r}")
    return lines


def load_dump(path: str, what: str) -> Dict[str, np.ndarray]:
    if not os.path.isfile(path):
        raise ParityError(f"the executable did not write {what} ({path})")
    try:
        return ref.read_safetensors(path)
    except (ValueError, KeyError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ParityError(f"cannot read {path}: {e}")


def check_tensor_set(tensors: Dict[str, np.ndarray], graph: ref.GraphInfo, what: str) -> None:
    """The dump must hold exactly the graph's parameters, with their shapes, in F32."""
    expected = {name: shape for name, shape, _ in graph.params}
    problems = []
    missing = [n for n in expected if n not in tensors]
    extra = sorted(n for n in tensors if n not in expected)
    if missing:
        problems.append(f"missing {missing}")
    if extra:
        problems.append(f"unexpected {extra}")
    for name, shape in expected.items():
        if name in tensors:
            t = tensors[name]
            if tuple(t.shape) != tuple(shape):
                problems.append(f"{name} has shape {list(t.shape)}, the graph says {list(shape)}")
            if t.dtype != np.float32:
                problems.append(f"{name} is {t.dtype}, expected float32")
    if problems:
        raise ParityError(f"{what}: " + "; ".join(problems))


def read_batches(batches: Dict[str, np.ndarray], steps: int, accumulation: int, micro: int,
                 seq: int, vocab: int, dtype_ok=(np.int32,)) -> List[list]:
    """[[ (tokens, targets) per micro-batch ] per step] as int64 torch tensors."""
    out = []
    warned = False
    for s in range(1, steps + 1):
        step = []
        for u in range(accumulation):
            pair = []
            for kind in ("tokens", "targets"):
                key = f"{kind}.{s}.{u}"
                if key not in batches:
                    raise ParityError(f"batches.safetensors has no {key} "
                                      f"(it holds {len(batches)} tensors)")
                t = batches[key]
                if t.dtype not in dtype_ok:
                    raise ParityError(f"{key} is {t.dtype}, expected int32")
                if tuple(t.shape) != (micro, seq):
                    raise ParityError(f"{key} has shape {list(t.shape)}, expected [{micro}, {seq}]")
                if t.size and (t.min() < 0 or t.max() >= vocab):
                    raise ParityError(f"{key} holds ids outside [0, {vocab})")
                pair.append(torch.from_numpy(t.astype(np.int64)))
            tokens, targets = pair
            # The data loader's contract: targets are the tokens shifted by one position.
            if not warned and not torch.equal(tokens[:, 1:], targets[:, :-1]):
                print(f"warning: targets.{s}.{u} is not tokens.{s}.{u} shifted by one position "
                      "(the comparison does not depend on it)")
                warned = True
            step.append((tokens, targets))
        out.append(step)
    return out


def model_constants(path: str) -> dict:
    """The numeric constants `name = number` written at the top level of the model body (a
    mixture of experts' top_k and loss weights); the graph IR keeps only their values."""
    out = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*(top_k|aux_loss_weight|z_loss_weight)\s*=\s*([0-9.eE+-]+)\s*(#.*)?$",
                         line)
            if m:
                out[m.group(1)] = float(m.group(2))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--exe", required=True, help="the compiled model (tessel compile M -o X)")
    p.add_argument("--model-kind", required=True, choices=["gpt", "llama", "masks", "mixtral"])
    p.add_argument("--model", required=True, help="the .model file the executable was built from")
    p.add_argument("--data", required=True, help="training text, passed to the executable")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--tol", type=float, default=1e-4,
                   help="largest relative error allowed for losses, gradients, lr, grad norms")
    p.add_argument("--tessel", help="the tessel compiler (default: build/bin/tessel, then PATH)")
    p.add_argument("--threads", type=int, default=1, help="--threads for the executable")
    p.add_argument("--seed", type=int, help="--seed for the executable (default: train.seed)")
    p.add_argument("--ref-dtype", choices=["float32", "float64", "bf16-autocast"], default="float32",
                   help="the reference's compute dtype (float64 measures Tessel's own error)")
    p.add_argument("--timeout", type=float, default=600, help="seconds allowed to the executable")
    p.add_argument("--keep", metavar="DIR", help="run in DIR and keep the dumps")
    p.add_argument("--verbose", action="store_true", help="print the executable's output")
    args = p.parse_args()

    work = None
    try:
        if args.steps < 1:
            raise ParityError("--steps must be at least 1")
        tessel = find_tessel(args.tessel)
        try:
            graph = ref.graph_of(tessel, args.model)
        except (RuntimeError, OSError, ValueError) as e:
            raise ParityError(f"cannot read the model's configuration: {e}")
        kind = graph.kind()
        if kind != args.model_kind:
            raise ParityError(f"{args.model} looks like a {kind} model (from its parameter "
                              f"names), not {args.model_kind}")
        mcfg = ref.ModelConfig.from_dims(kind, graph.dims, graph.layers,
                                         model_constants(args.model))
        tcfg = ref.TrainConfig.from_attr(graph.train)
        mesh = graph.parallel.get("mesh", {}) or {}
        ranks = int(np.prod([int(v) for v in mesh.values()])) if mesh else 1
        if ranks != 1:
            raise ParityError(f"the parity check runs one process; {args.model} has {ranks} ranks")
        if args.seed is None:
            args.seed = tcfg.seed
        accumulation = int(graph.train.get("accumulation", tcfg.accumulation))
        micro = graph.dims["batch"]
        print(f"model {graph.name} ({kind}): {mcfg}")
        print(f"train: {tcfg} (accumulation {accumulation}, micro-batch {micro})")
        if kind == "gpt" and graph.dims.get("kv_heads", graph.dims["heads"]) != graph.dims["heads"]:
            raise ParityError("a gpt model with kv_heads != heads is not what std/gpt.model builds")

        if args.keep:
            work = os.path.abspath(args.keep)
            os.makedirs(work, exist_ok=True)
        else:
            work = tempfile.mkdtemp(prefix="tessel-parity-")
        metrics_path = run_executable(args.exe, args, work)
        dump = os.path.join(work, "dump")
        metrics = read_metrics(metrics_path, args.steps)
        init = load_dump(os.path.join(dump, "init.safetensors"), "init.safetensors")
        grads = load_dump(os.path.join(dump, "grads.safetensors"), "grads.safetensors")
        batches_raw = load_dump(os.path.join(dump, "batches.safetensors"), "batches.safetensors")
        check_tensor_set(init, graph, "init.safetensors")
        check_tensor_set(grads, graph, "grads.safetensors")
        batches = read_batches(batches_raw, args.steps, accumulation, micro, mcfg.seq, mcfg.vocab)

        # ---- the reference, from Tessel's initial parameters ------------------------------
        dtype = torch.float64 if args.ref_dtype == "float64" else torch.float32
        torch.manual_seed(0)
        model = ref.build_model(mcfg)
        ref.load_params(model, init, dtype=dtype)
        opt = ref.make_optimizer(model, tcfg)

        step_rows = []  # (step, ours loss, ref loss, err, ours lr, ref lr, err, ours gn, ref gn, err)
        grad_rows = []
        for s in range(1, args.steps + 1):
            res = ref.train_step(model, opt, s, tcfg, batches[s - 1], keep_grads=(s == 1),
                                 autocast=args.ref_dtype == "bf16-autocast")
            m = metrics[s]
            ours_loss, ours_lr, ours_gn = float(m["loss"]), float(m["lr"]), float(m["grad_norm"])
            step_rows.append((s, ours_loss, res.loss, rel_err(ours_loss, res.loss),
                              ours_lr, res.lr, rel_err(ours_lr, res.lr),
                              ours_gn, res.grad_norm, rel_err(ours_gn, res.grad_norm)))
            if s == 1:
                for name, _, _ in graph.params:
                    g_ref = res.grads[name].double().numpy()
                    g_ours = grads[name].astype(np.float64)
                    n_ref = float(np.linalg.norm(g_ref))
                    n_diff = float(np.linalg.norm(g_ours - g_ref))
                    if not np.all(np.isfinite(g_ours)):
                        err = float("nan")
                    elif n_ref > 0:
                        err = n_diff / n_ref
                    else:
                        err = 0.0 if n_diff == 0 else float("inf")
                    grad_rows.append((name, list(g_ref.shape), float(np.linalg.norm(g_ours)),
                                      n_ref, n_diff, err))
                step1_global = res.grad_norm

        # ---- report --------------------------------------------------------------------
        tol = args.tol
        # A gradient that is zero in exact arithmetic (the key bias bk: softmax does not see a
        # shift shared by every key) is pure rounding noise in both implementations; its
        # relative error means nothing. Such tensors (reference norm below 1e-6 of the global
        # norm) are held to an absolute bound instead: ||diff|| <= tol * global norm.
        tiny = 1e-6 * step1_global
        print()
        print(f"gradients of step 1 ({len(grad_rows)} tensors; relative error "
              f"||g_tessel - g_ref|| / ||g_ref||, tolerance {tol:g})")
        width = max(len(r[0]) for r in grad_rows)
        print(f"  {'name':<{width}}  {'shape':<16} {'|g_tessel|':>11} {'|g_ref|':>11} "
              f"{'rel_err':>10}")
        grad_fail, max_grad = [], 0.0
        for name, shape, n_ours, n_ref, n_diff, err in grad_rows:
            if n_ref < tiny and math.isfinite(n_diff):
                ok = n_diff <= tol * step1_global
                note = f"  (zero gradient: |diff| / global norm = {n_diff / step1_global:.1e})"
                shown = n_diff / step1_global
            else:
                ok = within(err, tol)
                note = ""
                shown = err
            if not math.isfinite(shown) or shown > max_grad:
                max_grad = shown if math.isfinite(shown) else float("inf")
            if not ok:
                grad_fail.append(name)
            print(f"  {name:<{width}}  {str(shape):<16} {n_ours:11.4e} {n_ref:11.4e} "
                  f"{shown:10.2e}{'' if ok else '  FAIL'}{note}")

        # A whole-dump scale factor usually means a convention slipped: gradients dumped after
        # clipping, or micro-batch losses summed instead of averaged.
        ours_global = math.sqrt(sum(r[2] ** 2 for r in grad_rows))
        scale = ours_global / step1_global if step1_global > 0 else float("nan")
        if grad_fail and math.isfinite(scale) and abs(scale - 1) > 10 * tol:
            coef = min(1.0, tcfg.clip / (step1_global + 1e-6)) if tcfg.clip > 0 else 1.0
            print(f"  hint: ||g_tessel|| / ||g_ref|| = {scale:.6f} over all gradients "
                  f"(clip coefficient {coef:.6f}, accumulation {accumulation})")

        print()
        print(f"steps 1..{args.steps} (relative errors; tolerance {tol:g})")
        print(f"  {'step':>4}  {'loss':>10} {'loss_ref':>10} {'rel_err':>9}   {'lr':>10} "
              f"{'lr_ref':>10} {'rel_err':>9}   {'grad_norm':>10} {'norm_ref':>10} {'rel_err':>9}")
        step_fail = []
        max_loss = max_lr = max_gn = 0.0
        for (s, lo, lr_, le, ro, rr, re_, go, gr, ge) in step_rows:
            bad = [what for what, e in (("loss", le), ("lr", re_), ("grad_norm", ge))
                   if not within(e, tol)]
            if bad:
                step_fail.append(f"step {s} {'/'.join(bad)}")
            max_loss = max(max_loss, le) if not math.isnan(le) else float("inf")
            max_lr = max(max_lr, re_) if not math.isnan(re_) else float("inf")
            max_gn = max(max_gn, ge) if not math.isnan(ge) else float("inf")
            print(f"  {s:>4}  {lo:10.6f} {lr_:10.6f} {le:9.2e}   {ro:10.3e} {rr:10.3e} "
                  f"{re_:9.2e}   {go:10.6f} {gr:10.6f} {ge:9.2e}{'  FAIL' if bad else ''}")

        summary = (f"max_rel_err_loss={max_loss:.2e} max_rel_err_grad={max_grad:.2e} "
                   f"max_rel_err_lr={max_lr:.2e} max_rel_err_grad_norm={max_gn:.2e} "
                   f"steps={args.steps} tol={tol:g} ref={args.ref_dtype}")
        print()
        if grad_fail or step_fail:
            what = []
            if grad_fail:
                what.append(f"{len(grad_fail)} gradient(s) off: {', '.join(grad_fail[:5])}"
                            + (" ..." if len(grad_fail) > 5 else ""))
            if step_fail:
                what.append("; ".join(step_fail[:5]) + (" ..." if len(step_fail) > 5 else ""))
            print(f"PARITY FAIL {summary} ({'; '.join(what)})")
            return 1
        print(f"PARITY OK {summary}")
        return 0
    except ParityError as e:
        print(f"PARITY FAIL {e}")
        return 1
    except Exception as e:  # a bug here must not look like a pass either
        import traceback
        traceback.print_exc()
        print(f"PARITY FAIL internal error: {type(e).__name__}: {e}")
        return 1
    finally:
        if work and not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
