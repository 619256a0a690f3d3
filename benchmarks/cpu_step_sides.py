"""cpu_step.py's two sides: one model's numbers (Bench, from the graph IR), its runs of
Tessel's executable and of PyTorch (benchmarks/torch_step.py), the probes and the timed run of
the fastest configuration (measure, Side, Run), OpenBLAS's SGEMM rate, and the sizes as the
report prints them (mib, count).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable, List, Optional

from cpu_step_processes import HERE, ROOT, Config, clean_env, run_child, wait_until_idle

sys.path.insert(0, os.path.join(ROOT, "test", "Integration", "Parity"))

import reference as ref  # noqa: E402  (graph_of; the timed torch runs are in torch_step.py)


# Parameters that are only looked up, never multiplied: they cost no model FLOPs.
LOOKUP_ONLY = ("wpe", "tok_embeddings")


# ---------------------------------------------------------------------------------------------
# The two sides
# ---------------------------------------------------------------------------------------------


@dataclass
class Run:
    config: Config
    steps: int
    warmup: int
    rate: Optional[float] = None  # tokens/s over the steps after the warm-up
    step_time: Optional[float] = None  # mean seconds of those steps
    max_rss: int = 0
    others: float = 0.0  # the share of the CPUs other processes used during the run
    error: str = ""
    info: dict = field(default_factory=dict)


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
        return len(measured) / sum(1.0 / float(r["tokens_per_s"]) for r in measured)
    if all("step_time_s" in r for r in measured):
        total = sum(float(r["step_time_s"]) for r in measured)
        return tokens_per_step * len(measured) / total
    raise RuntimeError(f"{path}: the training lines have neither tokens_per_s nor step_time_s")


class Bench:
    """One model: its sizes, its data, its compiled executable, and runs of either side."""

    def __init__(self, args, model: str, work: str, cpus: Optional[List[int]]):
        self.args, self.model, self.work, self.cpus = args, model, work, cpus
        self.graph = ref.graph_of(args.tessel, model)
        self.rel = os.path.relpath(os.path.abspath(model), ROOT)
        self.name = os.path.splitext(os.path.basename(model))[0]
        self.kind = self.graph.kind()
        self.seq = int(self.graph.dims["seq"])
        self.batch = int(self.graph.train["batch"])
        self.tokens_per_step = self.batch * self.seq
        self.params = sum(math.prod(p[1]) for p in self.graph.params)
        multiplied = sum(math.prod(p[1]) for p in self.graph.params
                         if p[0].rsplit(".", 1)[-1] not in LOOKUP_ONLY)
        # 6 N per token for the forward and backward products of the weights, and 12 L seq
        # embed for the attention scores and their weighted sum (PaLM's count, causal mask
        # not discounted).
        self.flops_per_token = (6 * multiplied + 12 * self.graph.layers * self.seq
                                * int(self.graph.dims["embed"]))
        self.exe: Optional[str] = None
        self.data: Optional[str] = None
        self.runs = 0

    # -- Tessel --

    def prepare_tessel(self) -> None:
        """Compiles the model and finds or writes its training data."""
        if self.args.exe:
            self.exe = os.path.abspath(self.args.exe)
        else:
            self.exe = os.path.join(self.work, self.graph.name)
            cmd = [self.args.tessel, "compile", self.model, "-o", self.exe]
            print("  compiling:", " ".join(cmd), flush=True)
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"tessel compile failed (exit {proc.returncode}):\n"
                                   f"{proc.stdout}")
        if not (os.path.isfile(self.exe) and os.access(self.exe, os.X_OK)):
            raise RuntimeError(f"{self.exe} is not an executable")
        self.data = self.training_data()

    def training_data(self) -> str:
        """--data, else the spec's data where it exists; otherwise (the benchmark models'
        tokens.bin) a file of random tokens below vocab, uint16 for `tokenizer = tokens` and
        bytes for the byte tokenizer."""
        if self.args.data:
            return os.path.abspath(self.args.data)
        spec = str(self.graph.train.get("data", ""))
        if spec:
            path = spec if os.path.isabs(spec) else os.path.join(ROOT, spec)
            if os.path.exists(path):
                return path
        tokens = str(self.graph.train.get("tokenizer", "byte")) == "tokens"
        vocab = int(self.graph.dims["vocab"]) if tokens else 256
        count = max(1 << 20, 64 * self.batch * (self.seq + 1))
        path = os.path.join(self.work, f"{self.name}.random.{'bin' if tokens else 'txt'}")
        import random
        rng = random.Random(int(self.graph.train.get("seed", 1337)))
        if tokens:
            import array
            values = array.array("H", (rng.randrange(vocab) for _ in range(count)))
            if sys.byteorder != "little":
                values.byteswap()
            data = values.tobytes()
        else:
            data = bytes(rng.randrange(vocab) for _ in range(count))
        with open(path, "wb") as f:
            f.write(data)
        print(f"  data: {count:,} random tokens below {vocab} in {path}", flush=True)
        return path

    def run_tessel(self, c: Config, steps: int, warmup: int) -> Run:
        run = Run(c, steps, warmup)
        self.runs += 1
        metrics = os.path.join(self.work, f"{self.name}.{self.runs}.metrics.jsonl")
        cmd = [self.exe, "--steps", str(steps), "--threads", str(c.threads),
               "--metrics", metrics, "--seed", str(int(self.graph.train.get("seed", 1337))),
               "--data", self.data, "--eval-every", "0", "--log-every", str(steps)]
        # In the work directory, so that a checkpoint the spec asks for lands there.
        child = run_child(cmd, c.env(), self.cpus, self.work,
                          os.path.join(self.work, f"{self.name}.{self.runs}.log"))
        run.max_rss, run.others = child.max_rss, child.others
        if child.rc != 0:
            run.error = f"{' '.join(cmd)} exited with status {child.rc}:\n{child.output[-3000:]}"
            return run
        try:
            run.rate = throughput_from_metrics(metrics, steps, warmup, self.tokens_per_step)
        except (RuntimeError, OSError, ValueError) as e:
            run.error = str(e)
            return run
        run.step_time = self.tokens_per_step / run.rate
        return run

    # -- PyTorch --

    def run_pytorch(self, c: Config, steps: int, warmup: int) -> Run:
        run = Run(c, steps, warmup)
        self.runs += 1
        spec = os.path.join(self.work, f"{self.name}.{self.runs}.torch.json")
        with open(spec, "w") as f:
            json.dump(dict(kind=self.kind, dims=self.graph.dims, layers=self.graph.layers,
                           train=self.graph.train, steps=steps, warmup=warmup,
                           torch_threads=c.threads, verbose=self.args.verbose), f)
        cmd = [self.args.python, os.path.join(HERE, "torch_step.py"), spec]
        child = run_child(cmd, c.env(), self.cpus, self.work,
                          os.path.join(self.work, f"{self.name}.{self.runs}.torch.log"))
        run.max_rss, run.others = child.max_rss, child.others
        lines = [ln for ln in child.output.splitlines() if ln.startswith("{")]
        if child.rc != 0 or not lines:
            run.error = f"torch_step.py exited with status {child.rc}:\n{child.output[-3000:]}"
            return run
        if self.args.verbose:
            print("\n".join(ln for ln in child.output.splitlines() if not ln.startswith("{")))
        run.info = json.loads(lines[-1])
        run.rate = float(run.info["tokens_per_s"])
        run.step_time = self.tokens_per_step / run.rate
        return run

    def run(self, c: Config, steps: int, warmup: int) -> Run:
        """Runs c once the machine is idle, and again (up to twice) if another process took
        more than a tenth of the CPUs meanwhile."""
        attempts = 1 if self.args.quick else 3
        for attempt in range(attempts):
            wait_until_idle(self.args.idle_wait)
            run = (self.run_tessel if c.side == "tessel" else self.run_pytorch)(c, steps, warmup)
            if run.rate is None or run.others <= 0.1 or attempt == attempts - 1:
                return run
            print(f"  (other processes used {run.others:.0%} of the CPUs during "
                  f"{c.label()}; running it again)", flush=True)
        return run


@dataclass
class Side:
    """One side's result for one model: every probe, and the timed run of the fastest."""

    probes: List[Run] = field(default_factory=list)
    best: Optional[Run] = None
    error: str = ""


def measure(bench: Bench, configs: List[Config], more: List[Callable[[Config], List[Config]]],
            args) -> Side:
    """Probes every configuration briefly, then each variant of the fastest so far (`more`),
    and times the fastest of all for the timed steps."""
    side = Side()
    if len(configs) > 1 or more:
        # A probe's timed steps: enough for about --probe-seconds, from the first probe.
        first = bench.run(configs[0], args.probe_steps, 1)
        report(first, "probe")
        side.probes.append(first)
        steps = args.probe_steps
        if first.step_time:
            steps = max(args.probe_steps, 1 + min(50, math.ceil(args.probe_seconds
                                                                / first.step_time)))
            if steps > args.probe_steps:
                side.probes[0] = bench.run(configs[0], steps, 1)
                report(side.probes[0], "probe")

        def fastest() -> Optional[Config]:
            ok = [p for p in side.probes if p.rate]
            return max(ok, key=lambda p: p.rate).config if ok else None

        for c in configs[1:]:
            side.probes.append(bench.run(c, steps, 1))
            report(side.probes[-1], "probe")
        for variant in more:
            if fastest() is None:
                break
            for c in variant(fastest()):
                if all(p.config != c for p in side.probes):
                    side.probes.append(bench.run(c, steps, 1))
                    report(side.probes[-1], "probe")
        winner = fastest()
        if winner is None:
            side.error = side.probes[0].error
            return side
    else:
        winner = configs[0]
    steps, warmup = args.steps, args.warmup
    if steps is None:  # enough timed steps for about --seconds, and at least 10
        step_time = max((p.step_time for p in side.probes if p.config == winner and p.step_time),
                        default=None)
        timed = 10 if step_time is None else max(10, math.ceil(args.seconds / step_time))
        steps = warmup + min(timed, 500)
    best = bench.run(winner, steps, warmup)
    report(best, "timed")
    if not best.rate:
        side.error = best.error
        return side
    side.best = best
    return side


def report(run: Run, what: str) -> None:
    side = "tessel " if run.config.side == "tessel" else "pytorch"
    if run.rate is None:
        print(f"  {side} {what}: {run.config.label()}: FAILED: {run.error}", flush=True)
        return
    busy = f"; OTHER PROCESSES USED {run.others:.0%} OF THE CPUS" if run.others > 0.05 else ""
    print(f"  {side} {what}: {run.config.label()}: {run.rate:,.0f} tokens/s over steps "
          f"{run.warmup + 1}..{run.steps}, peak RSS {mib(run.max_rss)}{busy}", flush=True)


def sgemm_rate(args, cpus: Optional[List[int]], work: str) -> dict:
    """OpenBLAS's SGEMM rate with the benchmark's threads on its CPUs, in a child process."""
    env = clean_env()
    env["OPENBLAS_NUM_THREADS"] = str(args.threads)
    cmd = [args.python, os.path.join(HERE, "sgemm.py")] + (["--repeats", "2"] if args.quick
                                                           else [])
    for attempt in range(3):  # as Bench.run: on idle CPUs, again if shared
        wait_until_idle(args.idle_wait)
        child = run_child(cmd, env, cpus, work, os.path.join(work, "sgemm.log"))
        if child.others <= 0.1:
            break
    lines = [ln for ln in child.output.splitlines() if ln.startswith("{")]
    if child.rc != 0 or not lines:
        raise RuntimeError(f"sgemm.py exited with status {child.rc}:\n{child.output}")
    return dict(json.loads(lines[-1]), others=child.others)


# Sizes, as the lines printed here and RESULTS.md (cpu_step_results.py) show them.
def mib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def count(n: float) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}K"
