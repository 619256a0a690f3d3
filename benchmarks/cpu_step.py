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
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "benchmarks")
sys.path.insert(0, os.path.join(ROOT, "test", "Integration", "Parity"))

import reference as ref  # noqa: E402  (graph_of; the timed torch runs are in torch_step.py)

DEFAULT_MODELS = [
    "benchmarks/models/gpt_6x384.model",
    "benchmarks/models/gpt_6x384_seq1024.model",
    "benchmarks/models/llama_8x512.model",
    "benchmarks/models/gpt2_124m.model",
    "examples/tiny_gpt.model",
]

# Settings the children must not inherit from whoever started the benchmark: each
# configuration sets the ones it tries, and "unset" has to mean the library's default.
SCRUBBED_ENV = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OMP_PROC_BIND", "OMP_PLACES",
                "OMP_DYNAMIC", "GOMP_SPINCOUNT", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                "MKL_NUM_THREADS", "LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_CONF",
                "ATEN_CPU_CAPABILITY")

# Allocators a configuration may preload instead of glibc's malloc, where they are installed
# (Debian: libjemalloc2, libtcmalloc-minimal4).
ALLOCATORS = {"jemalloc": "libjemalloc.so.2", "tcmalloc": "libtcmalloc_minimal.so.4"}
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
            "/usr/local/lib")

# Parameters that are only looked up, never multiplied: they cost no model FLOPs.
LOOKUP_ONLY = ("wpe", "tok_embeddings")


# ---------------------------------------------------------------------------------------------
# Configurations and child processes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """One way to run one side: its thread count and the environment it loads with."""

    side: str  # "tessel" or "pytorch"
    threads: int  # Tessel's --threads, or torch.set_num_threads
    blas: Optional[int] = None  # OPENBLAS_NUM_THREADS (PyTorch only; Tessel sets its own)
    wait: Optional[str] = None  # OMP_WAIT_POLICY, None: unset
    allocator: Optional[str] = None  # a key of ALLOCATORS, preloaded; None: glibc's malloc
    isa: Optional[str] = None  # ATEN_CPU_CAPABILITY (PyTorch only), None: ATen's choice

    def env(self) -> Dict[str, str]:
        env = clean_env()
        if self.blas is not None:
            env["OPENBLAS_NUM_THREADS"] = str(self.blas)
        if self.wait is not None:
            env["OMP_WAIT_POLICY"] = self.wait
        if self.allocator is not None:
            env["LD_PRELOAD"] = installed_allocators()[self.allocator]
        if self.isa is not None:
            env["ATEN_CPU_CAPABILITY"] = self.isa
        return env

    def label(self) -> str:
        wait = f"OMP_WAIT_POLICY={self.wait}" if self.wait else "OMP_WAIT_POLICY unset"
        if self.side == "tessel":
            out = f"--threads {self.threads}, {wait}"
        else:
            out = f"set_num_threads({self.threads}), OPENBLAS_NUM_THREADS={self.blas}, {wait}"
        if self.allocator:
            out += f", {self.allocator}"
        if self.isa:
            out += f", ATEN_CPU_CAPABILITY={self.isa}"
        return out


def clean_env() -> Dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}


def installed_allocators() -> Dict[str, str]:
    found = {}
    for name, lib in ALLOCATORS.items():
        for d in LIB_DIRS:
            if os.path.exists(os.path.join(d, lib)):
                found[name] = os.path.join(d, lib)
                break
    return found


def cpu_has_avx512() -> bool:
    """ATen's AVX512 kernels need these; where the CPU has them, ATEN_CPU_CAPABILITY=avx512
    is one more PyTorch setting to try (Debian's build may pick AVX2 on its own)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        return False
    return all(x in flags for x in ("avx512f", "avx512bw", "avx512vl", "avx512dq"))


def tessel_configs(threads: int) -> List[Config]:
    """Tessel's kernels and GEMM slices run on one OpenMP team of --threads (OpenBLAS itself
    one-threaded), so the settings are the team's size and how its idle threads wait."""
    if threads == 1:
        return [Config("tessel", 1)]
    return [Config("tessel", threads, wait=w) for w in (None, "PASSIVE", "ACTIVE")] + \
        [Config("tessel", 1)]


def pytorch_configs(threads: int, default: Config) -> List[Config]:
    """PyTorch's elementwise kernels run on its OpenMP team (set_num_threads) and its matrix
    products on OpenBLAS's own pthread pool (OPENBLAS_NUM_THREADS): every split of the cores
    between the two, and for a team of several threads each OMP_WAIT_POLICY; and PyTorch's
    own default, whatever it is."""
    out = []
    for t in sorted({threads, 1}, reverse=True):
        for b in sorted({1, threads}):
            waits = (None, "PASSIVE", "ACTIVE") if t > 1 else (None,)
            out += [Config("pytorch", t, blas=b, wait=w) for w in waits]
    return out if default in out else [default] + out


def variants(side: str) -> List[Callable[[Config], List[Config]]]:
    """Settings tried on top of the fastest thread configuration, one kind at a time: the
    allocators installed, and for PyTorch ATen's AVX512 kernels where the CPU has them."""
    out = [lambda w: [replace(w, allocator=a) for a in installed_allocators()]]
    if side == "pytorch" and cpu_has_avx512():
        out.append(lambda w: [replace(w, isa="avx512")])
    return out


def pytorch_defaults(args, cpus: Optional[List[int]], work: str) -> dict:
    """PyTorch's own thread counts on these CPUs with nothing set (torch_step.py --defaults)."""
    cmd = [args.python, os.path.join(HERE, "torch_step.py"), "--defaults"]
    child = run_child(cmd, clean_env(), cpus, work, os.path.join(work, "torch-defaults.log"))
    lines = [ln for ln in child.output.splitlines() if ln.startswith("{")]
    if child.rc != 0 or not lines:
        raise RuntimeError(f"torch_step.py --defaults exited with status {child.rc}:\n"
                           f"{child.output[-3000:]}")
    return json.loads(lines[-1])


@dataclass
class Child:
    rc: int
    output: str
    max_rss: int  # bytes
    wall: float
    others: float  # the share of all CPUs that other processes used meanwhile


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def run_child(cmd: List[str], env: Dict[str, str], cpus: Optional[List[int]], cwd: str,
              log: str) -> Child:
    """Runs cmd on `cpus` and returns its exit status, output and its own peak RSS."""
    def pin():
        if cpus:
            os.sched_setaffinity(0, cpus)

    start, busy = time.perf_counter(), busy_seconds()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                preexec_fn=pin)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    # What the machine spent beyond this child: another job on the cores skews the rates.
    others = busy_seconds() - busy - usage.ru_utime - usage.ru_stime
    others = max(0.0, others) / (wall * (os.cpu_count() or 1))
    with open(log, errors="replace") as f:
        output = f.read()
    return Child(proc.returncode, output, usage.ru_maxrss * 1024, wall, others)


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


def busy_share(seconds: float) -> float:
    """The share of the CPUs busy over the next `seconds`."""
    busy = busy_seconds()
    time.sleep(seconds)
    return (busy_seconds() - busy) / seconds / (os.cpu_count() or 1)


def wait_until_idle(limit: float) -> None:
    """Waits up to `limit` seconds for the CPUs to be less than a tenth busy."""
    waited = 0.0
    while waited < limit:
        share = busy_share(0.5)
        if share < 0.1:
            return
        if waited == 0.0:
            print(f"  (waiting for other processes: {share:.0%} of the CPUs busy)", flush=True)
        time.sleep(2.0)
        waited += 2.5


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


def mib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def count(n: float) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}K"


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
