"""cpu_step.py's report: the machine's description, and the first section of
benchmarks/RESULTS.md (results_section, written by write_results) from the rows of results.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import textwrap
from dataclasses import dataclass
from typing import List

from cpu_step_processes import Config
from cpu_step_sides import Bench, Side, count, mib


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------


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


WIDTH = 95  # RESULTS.md's text width


def bullet(text: str) -> List[str]:
    return textwrap.wrap(text, WIDTH, initial_indent="- ", subsequent_indent="  ",
                         break_on_hyphens=False)


@dataclass
class Row:
    bench: Bench
    tessel: Side
    pytorch: Side


def results_section(rows: List[Row], sgemm: dict, args, command: str, host: str,
                    defaults: dict, torch_default: Config) -> List[str]:
    def rate(s: Side) -> str:
        return f"{s.best.rate:,.0f}" if s.best else "n/a"

    def rss(s: Side) -> str:
        return mib(s.best.max_rss) if s.best else "n/a"

    def timed(s: Side) -> str:
        return str(s.best.steps - s.best.warmup) if s.best else "n/a"

    date = args.date or datetime.date.today().isoformat()
    peak = sgemm["gflops"]
    blas = os.path.basename(sgemm["blas"].split(", ")[-1])
    pin = "pinned to CPU 0" if args.threads == 1 else f"on {args.threads} CPUs"
    others = max([sgemm["others"]] + [s.best.others for r in rows
                                      for s in (r.tessel, r.pytorch) if s.best])
    bullets = [
        f"Date {date}; {host}; {args.threads} thread{'s' if args.threads > 1 else ''} a side, "
        f"every process {pin}.",
        f"Tokens/s over the timed steps after {args.warmup} warm-up steps (the steps timed "
        "are in the table); every configuration was first probed for about "
        f"{args.probe_seconds:g} s of steps after one warm-up step.",
        f"PyTorch {defaults['torch_version']} (Debian's build: OpenMP for its own kernels, "
        f"OpenBLAS for matrix products), Python {platform.python_version()}. Left alone here it "
        f"runs {torch_default.label()}, ATen {defaults['capability']}.",
        f"Other processes used at most {others:.1%} of the CPUs during the timed runs and the "
        "SGEMM measurement (from /proc/stat).",
        "Peak RSS: the whole process of each side (for PyTorch that includes the interpreter "
        "and torch's libraries), from its rusage.",
        "Model FLOPs per token: 6·N + 12·L·seq·embed, N the parameters that enter matrix "
        "products (all but the lookup-only tables wpe and Llama's tok_embeddings; the tied "
        "wte is the output head), L the layers (attention counted without the causal mask's "
        "saving, as PaLM counts it). Tessel GFLOP/s = that × Tessel's tokens/s; \"of SGEMM\" "
        f"divides it by OpenBLAS's SGEMM rate measured in the same run: {peak:,.0f} GFLOP/s "
        f"(numpy.dot of {sgemm['n']}×{sgemm['n']} float32, best of the repeats, "
        f"OPENBLAS_NUM_THREADS={args.threads}, {blas}).",
    ]
    out = [
        "# CPU benchmark results",
        "",
        "Training throughput of Tessel's compiled executable against the PyTorch reference",
        "modules (test/Integration/Parity/reference.py) on the same model, batch, sequence length, optimizer",
        "and schedule, each side at the fastest of its thread configurations on this machine",
        "(below), each configuration in a process of its own. Ratio = Tessel / PyTorch, above 1",
        "means Tessel is faster. Written by `benchmarks/cpu_step.py`; see benchmarks/README.md.",
        "",
    ] + [line for b in bullets for line in bullet(b)] + [
        "",
        "| model | params | batch×seq | steps timed | Tessel tok/s | PyTorch tok/s | ratio | "
        "Tessel peak RSS | PyTorch peak RSS | Tessel GFLOP/s | of SGEMM |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        b, t, p = r.bench, r.tessel, r.pytorch
        ratio = f"{t.best.rate / p.best.rate:.2f}" if t.best and p.best else "n/a"
        gflops = b.flops_per_token * t.best.rate / 1e9 if t.best else None
        steps = timed(t) if timed(t) == timed(p) else f"{timed(t)} / {timed(p)}"
        out.append(f"| {b.rel} | {count(b.params)} | {b.batch}×{b.seq} | {steps} | {rate(t)} | "
                   f"{rate(p)} | {ratio} | {rss(t)} | {rss(p)} | "
                   f"{'n/a' if gflops is None else f'{gflops:,.0f}'} | "
                   f"{'n/a' if gflops is None else f'{gflops / peak:.0%}'} |")
    out += ["", "The configurations that won:", "",
            "| model | Tessel | PyTorch |", "|---|---|---|"]
    for r in rows:
        won = [s.best.config.label() if s.best else "n/a" for s in (r.tessel, r.pytorch)]
        out.append(f"| {r.bench.name} | {won[0]} | {won[1]} |")
    probed = [r for r in rows if r.tessel.probes or r.pytorch.probes]
    if probed:
        out += [""] + textwrap.wrap(
            "Every configuration probed, tokens/s (the one timed in bold; each side's allocator "
            "and, for PyTorch, ATEN_CPU_CAPABILITY were tried on the fastest thread "
            "configuration; * marks what PyTorch runs when nothing is set):", WIDTH)
        out += ["", "| side | configuration | " + " | ".join(r.bench.name for r in probed) + " |",
                "|---|---|" + "---|" * len(probed)]
        for side in ("tessel", "pytorch"):
            configs: List[Config] = []
            for r in probed:
                configs += [p.config for p in getattr(r, side).probes if p.config not in configs]
            for c in configs:
                cells = []
                for r in probed:
                    s = getattr(r, side)
                    hit = next((p for p in s.probes if p.config == c), None)
                    if hit is None or hit.rate is None:
                        cells.append("failed" if hit else "")
                        continue
                    cell = f"{hit.rate:,.0f}"
                    cells.append(f"**{cell}**" if s.best and s.best.config == c else cell)
                star = " *" if c == torch_default else ""
                out.append(f"| {'Tessel' if side == 'tessel' else 'PyTorch'} | {c.label()}{star} | "
                           + " | ".join(cells) + " |")
    notes = list(args.note)
    if notes:
        out += [""] + [line for n in notes for line in bullet(n)]
    out += ["", "Command:", "", "```sh", command, "```", ""]
    return out


def write_results(path: str, section: List[str]) -> None:
    """Rewrites the file's first section (up to its first `## ` heading), keeping the rest."""
    rest = ""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
        at = text.find("\n## ")
        if at >= 0:
            rest = text[at + 1:]
    with open(path, "w") as f:
        f.write("\n".join(section) + ("\n" + rest if rest else ""))
    print(f"wrote {path}")
