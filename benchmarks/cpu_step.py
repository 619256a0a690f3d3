#!/usr/bin/python3
"""CPU training throughput: Tessel's compiled executable against PyTorch, same model and batch.

    benchmarks/cpu_step.py [--model examples/tiny_gpt.model] [--steps 30] [--warmup 5]
                           [--threads N] [--pytorch-only] [--no-results]

For each --model (default examples/tiny_gpt.model):

  1. Tessel: `tessel compile MODEL -o X`, then `X --steps N --threads T --metrics M --data D
     --seed S`, and tokens/s over the steps after the warm-up, from the metrics lines
     (`tokens_per_s` when they carry it, else `step_time_s`).
  2. PyTorch: the hand-written reference modules of test/parity/reference.py with the same
     sizes, global batch (accumulated over the same micro-batches), sequence length and thread
     count (torch.set_num_threads), AdamW and gradient clipping as the spec sets them, the same
     number of steps and warm-up, on random token batches.

Prints both rates and their ratio (Tessel / PyTorch) and rewrites benchmarks/RESULTS.md with
a table of the run. Every number about the model is read from `tessel compile --emit=graph`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from typing import List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "parity"))

import torch  # noqa: E402

import reference as ref  # noqa: E402


def machine() -> str:
    """The CPU model and its core count, from lscpu."""
    info = {}
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True, check=True,
                             env=dict(os.environ, LC_ALL="C")).stdout
        for line in out.splitlines():
            key, _, value = line.partition(":")
            info[key.strip()] = value.strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    name = info.get("Model name") or platform.processor() or "unknown CPU"
    cpus = info.get("CPU(s)") or str(os.cpu_count())
    try:
        cores = int(info["Core(s) per socket"]) * int(info.get("Socket(s)", "1"))
        return f"{name}, {cores} cores / {cpus} CPUs"
    except (KeyError, ValueError):
        return f"{name}, {cpus} CPUs"


def throughput_from_metrics(path: str, steps: int, warmup: int, tokens_per_step: int):
    """(tokens/s, how it was measured) over the training lines after the warm-up."""
    lines = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            rec = json.loads(line)
            if isinstance(rec, dict) and "loss" in rec and "step" in rec:
                lines.append(rec)
    measured = [r for r in lines if warmup < int(r["step"]) <= steps]
    if not measured:
        raise RuntimeError(f"{path}: no training lines after step {warmup} "
                           f"(steps seen: {[r['step'] for r in lines]})")
    if all("tokens_per_s" in r for r in measured):
        # The mean of the rates weighted by time (harmonic mean): total tokens / total time.
        rate = len(measured) / sum(1.0 / float(r["tokens_per_s"]) for r in measured)
        return rate, f"tokens_per_s of {len(measured)} lines"
    if all("step_time_s" in r for r in measured):
        total = sum(float(r["step_time_s"]) for r in measured)
        return tokens_per_step * len(measured) / total, f"step_time_s of {len(measured)} lines"
    raise RuntimeError(f"{path}: the training lines have neither tokens_per_s nor step_time_s")


def run_tessel(tessel: str, model: str, graph: ref.GraphInfo, args, tokens_per_step: int,
               work: str):
    exe = args.exe or os.path.join(work, graph.name)
    if not args.exe:
        cmd = [tessel, "compile", model, "-o", exe]
        print("  compiling:", " ".join(cmd), flush=True)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"tessel compile failed (exit {proc.returncode}):\n{proc.stdout}")
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        raise RuntimeError(f"{exe} is not an executable (does `tessel compile -o` build one yet?)")
    data = args.data or graph.train.get("data", "")
    metrics = os.path.join(work, f"{graph.name}.metrics.jsonl")
    cmd = [exe, "--steps", str(args.steps), "--threads", str(args.threads), "--metrics", metrics,
           "--seed", str(int(graph.train.get("seed", 1337)))]
    if data:
        cmd += ["--data", data]
    print("  running:", " ".join(cmd), flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace")
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{exe} exited with status {proc.returncode}:\n{proc.stdout[-3000:]}")
    rate, how = throughput_from_metrics(metrics, args.steps, args.warmup, tokens_per_step)
    print(f"  tessel: {rate:,.0f} tokens/s ({how}; whole run {wall:.2f} s)", flush=True)
    return rate


def run_pytorch(graph: ref.GraphInfo, args, tokens_per_step: int) -> float:
    torch.set_num_threads(args.threads)
    kind = graph.kind()
    mcfg = ref.ModelConfig.from_dims(kind, graph.dims, graph.layers)
    tcfg = ref.TrainConfig.from_attr(graph.train)
    model = ref.build_model(mcfg)
    ref.init_like_tessel(model, tcfg.seed)
    model.train()
    opt = ref.make_optimizer(model, tcfg)
    gen = torch.Generator().manual_seed(tcfg.seed)
    micro, seq, vocab = graph.dims["batch"], mcfg.seq, mcfg.vocab
    accumulation = int(graph.train.get("accumulation", tcfg.accumulation))
    times = []
    for step in range(1, args.steps + 1):
        batches = []
        for _ in range(accumulation):
            tokens = torch.randint(0, vocab, (micro, seq + 1), generator=gen)
            batches.append((tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()))
        start = time.perf_counter()
        res = ref.train_step(model, opt, step, tcfg, batches)
        times.append(time.perf_counter() - start)
        if args.verbose:
            print(f"    step {step}: loss {res.loss:.4f}, {times[-1] * 1e3:.1f} ms")
    measured = times[args.warmup:]
    rate = tokens_per_step * len(measured) / sum(measured)
    print(f"  pytorch: {rate:,.0f} tokens/s (torch {torch.__version__}, {args.threads} threads, "
          f"mean step {sum(measured) / len(measured) * 1e3:.1f} ms)", flush=True)
    return rate


def write_results(path: str, rows: List[dict], command: str, args) -> None:
    def num(x: Optional[float]) -> str:
        return f"{x:,.0f}" if x is not None else "n/a"

    lines = [
        "# CPU benchmark results",
        "",
        "Training throughput of Tessel's compiled executable against the PyTorch reference",
        "modules (test/parity/reference.py) on the same model, batch, sequence length and thread",
        f"count. Tokens/s over steps {args.warmup + 1}..{args.steps} (the first {args.warmup} are "
        "warm-up); ratio = Tessel / PyTorch,",
        "above 1 means Tessel is faster. Written by `benchmarks/cpu_step.py`; see",
        "benchmarks/README.md.",
        "",
        "| date | machine | threads | model | batch×seq | Tessel tok/s | PyTorch tok/s | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = (f"{r['tessel'] / r['pytorch']:.2f}" if r["tessel"] is not None
                 and r["pytorch"] else "n/a")
        lines.append(f"| {r['date']} | {r['machine']} | {r['threads']} | {r['model']} | "
                     f"{r['batch']}×{r['seq']} | {num(r['tessel'])} | {num(r['pytorch'])} | "
                     f"{ratio} |")
    notes = [r["note"] for r in rows if r.get("note")] + list(args.note)
    lines += ["", f"PyTorch {torch.__version__}, Python {platform.python_version()}."]
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    lines += ["", "Command:", "", "```sh", command, "```", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {path}")


def _without_notes(argv: List[str]) -> List[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--note":
            skip = True
        elif not a.startswith("--note="):
            out.append(a)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", action="append",
                   help="a .model file (repeatable; default examples/tiny_gpt.model)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5, help="steps left out of the rate")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--tessel", default=os.path.join(ROOT, "build", "bin", "tessel"))
    p.add_argument("--exe", help="an already compiled executable (only with one --model)")
    p.add_argument("--data", help="training data for the executable (default: the spec's)")
    p.add_argument("--pytorch-only", action="store_true",
                   help="time PyTorch only (Tessel shows as n/a)")
    p.add_argument("--results", default=os.path.join(ROOT, "benchmarks", "RESULTS.md"))
    p.add_argument("--no-results", action="store_true", help="do not rewrite RESULTS.md")
    p.add_argument("--note", action="append", default=[],
                   help="a line to add under the table in RESULTS.md (repeatable)")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    models = args.model or [os.path.join(ROOT, "examples", "tiny_gpt.model")]
    if args.exe and len(models) != 1:
        p.error("--exe needs exactly one --model")
    if args.steps <= args.warmup:
        p.error("--steps must be larger than --warmup")

    command = "benchmarks/run.sh" + "".join(f" {shlex.quote(a)}" for a in sys.argv[1:])
    if args.note:  # the notes are in the file already; the command shows how to measure
        command = "benchmarks/run.sh" + "".join(
            f" {shlex.quote(a)}" for a in _without_notes(sys.argv[1:]))
    host = machine()
    date = datetime.date.today().isoformat()
    print(f"{host}; {args.threads} threads; {args.steps} steps, warm-up {args.warmup}")
    rows, failed = [], False
    work = tempfile.mkdtemp(prefix="tessel-bench-")
    try:
        for model in models:
            graph = ref.graph_of(args.tessel, model)
            mesh = graph.parallel.get("mesh", {}) or {}
            ranks = 1
            for v in mesh.values():
                ranks *= int(v)
            seq = graph.dims["seq"]
            batch = int(graph.train["batch"])
            tokens_per_step = batch * seq
            rel = os.path.relpath(os.path.abspath(model), ROOT)
            print(f"{rel}: {graph.kind()}, batch {batch} × seq {seq} = {tokens_per_step} "
                  f"tokens/step, accumulation {graph.train.get('accumulation', 1)}", flush=True)
            row = dict(date=date, machine=host, threads=args.threads, model=rel, batch=batch,
                       seq=seq, tessel=None, pytorch=None, note="")
            if ranks != 1:
                row["note"] = f"{rel} has {ranks} ranks; both sides ran it in one process"
            if not args.pytorch_only:
                try:
                    row["tessel"] = run_tessel(args.tessel, model, graph, args, tokens_per_step,
                                               work)
                except (RuntimeError, OSError, ValueError) as e:
                    print(f"  tessel: FAILED: {e}", flush=True)
                    failed = True
            row["pytorch"] = run_pytorch(graph, args, tokens_per_step)
            if row["tessel"] is not None:
                print(f"  ratio tessel / pytorch: {row['tessel'] / row['pytorch']:.2f}")
            rows.append(row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failed:
        print("not rewriting RESULTS.md: the Tessel run failed (use --pytorch-only to time "
              "PyTorch alone)")
        return 1
    if not args.no_results:
        write_results(args.results, rows, command, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
