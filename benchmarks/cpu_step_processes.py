"""cpu_step.py's configurations and child processes: the settings a side runs under
(Config, tessel_configs, pytorch_configs, variants, PyTorch's own defaults), and running a
child pinned to the benchmark's CPUs with its peak RSS and the share of the CPUs others used
meanwhile (run_child), waiting for idle CPUs first (wait_until_idle).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "benchmarks")


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
