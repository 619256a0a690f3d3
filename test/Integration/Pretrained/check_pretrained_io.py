"""Running tessel and the executable for check_pretrained.py, and reading what they write:
ParityError (whatever keeps the comparison from being made), the commands, the metrics file,
the dumps, llm.c token files, and the micro-batches of a step, checked.

Importing this module puts Inputs/ and ../Sft/Inputs/ on sys.path (hf_reference,
make_hf_model, example_file), as check_pretrained.py always has.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "Inputs"))
sys.path.insert(0, os.path.join(HERE, "..", "Sft", "Inputs"))
import hf_reference as ref  # noqa: E402


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
