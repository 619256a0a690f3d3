#!/usr/bin/python3
"""CPU training throughput: Tessel's compiled executable against PyTorch, each at its best.

    benchmarks/cpu_step.py [--model M ...] [--threads N] [--steps N] [--warmup N] [--quick]

For each model (default: the four of benchmarks/models/ and examples/tiny_gpt.model):

  1. Tessel: `tessel compile MODEL -o X`; X runs under each Tessel configuration (its
     --threads, OMP_WAIT_POLICY) for a short probe, and the fastest runs again for the timed
     steps. Tokens/s come from X's metrics lines.
  2. PyTorch: the hand-written reference modules of test/Integration/Parity/reference.py with the same
     sizes, global batch, sequence length, AdamW, clipping and schedule, on random batches,
     under each PyTorch configuration (torch.set_num_threads, OPENBLAS_NUM_THREADS,
     OMP_WAIT_POLICY), each in a process of its own (benchmarks/torch_step.py); the fastest
     probe runs again for the timed steps.
  3. OpenBLAS's SGEMM rate on the same CPUs and thread count (benchmarks/sgemm.py), the
     yardstick for Tessel's model-FLOP rate.

Every process is pinned to the first N CPUs of the benchmark's own (so `--threads 1` uses one
core on both sides), and its peak RSS is read from its own rusage (os.wait4). Prints both
rates, the ratio (Tessel / PyTorch), the winning configurations, and rewrites the first section
of benchmarks/RESULTS.md. Every number about a model is read from `tessel compile --emit=graph`.

The command line is here; the rest is in the modules beside this file: cpu_step_processes.py
(configurations, child processes), cpu_step_sides.py (the two sides' runs) and
cpu_step_results.py (the report).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import time
from typing import List

from cpu_step_processes import (ROOT, Config, busy_share, pytorch_configs, pytorch_defaults,
                                tessel_configs, variants)
from cpu_step_sides import Bench, Side, count, measure, sgemm_rate
from cpu_step_results import Row, machine, results_section, write_results

DEFAULT_MODELS = [
    "benchmarks/models/gpt_6x384.model",
    "benchmarks/models/gpt_6x384_seq1024.model",
    "benchmarks/models/llama_8x512.model",
    "benchmarks/models/gpt2_124m.model",
    "examples/tiny_gpt.model",
]


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


# ---------------------------------------------------------------------------------------------


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", action="append",
                   help="a .model file (repeatable; default: " + ", ".join(DEFAULT_MODELS) + ")")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                   help="cores a side may use (default: every CPU this process may run on); "
                        "every process is pinned to that many")
    p.add_argument("--steps", type=int,
                   help="steps of the timed run, warm-up included (default: enough for about "
                        "--seconds after the warm-up, at least 10)")
    p.add_argument("--warmup", type=int, default=2, help="steps left out of the rate")
    p.add_argument("--seconds", type=float, default=8.0,
                   help="the timed run's length when --steps is not given")
    p.add_argument("--probe-steps", type=int, default=2,
                   help="the least steps of a configuration's probe, one of them warm-up")
    p.add_argument("--probe-seconds", type=float, default=3.0,
                   help="a probe's timed steps last about this long")
    p.add_argument("--idle-wait", type=float, default=120.0,
                   help="before each run, wait up to this many seconds for other processes to "
                        "leave the CPUs; a run they shared is repeated up to twice")
    p.add_argument("--no-search", action="store_true",
                   help="no probes: Tessel with --threads N, PyTorch with its defaults")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 2 steps, no search, no waiting for idle CPUs, RESULTS.md "
                        "untouched")
    p.add_argument("--tessel", default=os.path.join(ROOT, "build", "bin", "tessel"))
    p.add_argument("--exe", help="an already compiled executable (only with one --model)")
    p.add_argument("--data", help="training data for the executable (default: the spec's, or "
                                  "random tokens where it has none)")
    p.add_argument("--pytorch-only", action="store_true",
                   help="time PyTorch only (Tessel shows as n/a)")
    p.add_argument("--python", default=os.environ.get("PYTHON", "/usr/bin/python3"),
                   help="the interpreter for the PyTorch and SGEMM processes")
    p.add_argument("--results", default=os.path.join(ROOT, "benchmarks", "RESULTS.md"))
    p.add_argument("--no-results", action="store_true", help="do not rewrite RESULTS.md")
    p.add_argument("--date", help="the date written in RESULTS.md (default: today)")
    p.add_argument("--note", action="append", default=[],
                   help="a line to add under the tables in RESULTS.md (repeatable)")
    p.add_argument("--verbose", action="store_true", help="PyTorch's per-step times and losses")
    args = p.parse_args()
    models = args.model or [os.path.join(ROOT, m) for m in DEFAULT_MODELS]
    if args.exe and len(models) != 1:
        p.error("--exe needs exactly one --model")
    if args.threads < 1:
        p.error("--threads must be at least 1")
    if args.quick:
        args.steps, args.warmup, args.no_search, args.no_results = 2, 1, True, True
        args.idle_wait = 0.0
    if args.steps is not None and args.steps <= args.warmup:
        p.error("--steps must be larger than --warmup")
    if args.probe_steps < 2:
        p.error("--probe-steps must be at least 2")

    command = "benchmarks/run.sh" + "".join(f" {shlex.quote(a)}"
                                            for a in _without_notes(sys.argv[1:]))
    allowed = sorted(os.sched_getaffinity(0))
    cpus = allowed[:args.threads] if args.threads < len(allowed) else None
    host = machine()
    began = time.perf_counter()
    print(f"{host}; {args.threads} thread{'s' if args.threads > 1 else ''} a side"
          f"{f', pinned to CPUs {cpus}' if cpus else ''}; warm-up {args.warmup}", flush=True)

    busy = busy_share(1.0)
    if busy > 0.1:
        print(f"warning: the machine is not idle: {busy:.0%} of its CPUs were busy over the last "
              "second; the rates will be low and uneven", flush=True)
    rows, failed = [], False
    work = tempfile.mkdtemp(prefix="tessel-bench-")
    try:
        defaults = pytorch_defaults(args, cpus, work)
        torch_default = Config("pytorch", int(defaults["torch_threads"]),
                               blas=int(defaults["blas_threads"]))
        print(f"PyTorch {defaults['torch_version']} on its own: {torch_default.label()}; "
              f"ATen CPU capability {defaults['capability']}", flush=True)
        t_configs, p_configs = tessel_configs(args.threads), pytorch_configs(args.threads,
                                                                             torch_default)
        t_more, p_more = variants("tessel"), variants("pytorch")
        if args.no_search:
            t_configs, p_configs, t_more, p_more = t_configs[:1], [torch_default], [], []
        sgemm = sgemm_rate(args, cpus, work)
        print(f"OpenBLAS SGEMM {sgemm['n']}×{sgemm['n']}, OPENBLAS_NUM_THREADS={args.threads}: "
              f"{sgemm['gflops']:,.0f} GFLOP/s ({sgemm['blas'].split(', ')[-1]})", flush=True)
        for model in models:
            bench = Bench(args, model, work, cpus)
            print(f"{bench.rel}: {bench.kind}, {count(bench.params)} parameters, batch "
                  f"{bench.batch} × seq {bench.seq} = {bench.tokens_per_step} tokens/step, "
                  f"{bench.flops_per_token / 1e6:,.1f} MFLOP/token", flush=True)
            row = Row(bench, Side(), Side())
            if not args.pytorch_only:
                try:
                    bench.prepare_tessel()
                    row.tessel = measure(bench, t_configs, t_more, args)
                except (RuntimeError, OSError, ValueError) as e:
                    row.tessel.error = str(e)
                if row.tessel.error:
                    print(f"  tessel: FAILED: {row.tessel.error}", flush=True)
                    failed = True
            row.pytorch = measure(bench, p_configs, p_more, args)
            if row.pytorch.error:
                print(f"  pytorch: FAILED: {row.pytorch.error}", flush=True)
                failed = True
            t, pt = row.tessel.best, row.pytorch.best
            if t and pt:
                gflops = bench.flops_per_token * t.rate / 1e9
                print(f"  ratio tessel / pytorch: {t.rate / pt.rate:.2f}; tessel "
                      f"{gflops:,.0f} GFLOP/s = {gflops / sgemm['gflops']:.0%} of SGEMM",
                      flush=True)
            rows.append(row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"benchmark took {time.perf_counter() - began:.0f} s")
    if failed:
        print("not rewriting RESULTS.md: a run failed (use --pytorch-only to time PyTorch "
              "alone)")
        return 1
    if not args.no_results:
        write_results(args.results, results_section(rows, sgemm, args, command, host,
                                                    defaults, torch_default))
    return 0


if __name__ == "__main__":
    sys.exit(main())
