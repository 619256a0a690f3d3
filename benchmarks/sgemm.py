#!/usr/bin/python3
"""The machine's OpenBLAS SGEMM rate, the yardstick for the benchmark's model-FLOP rates.

    sgemm.py [--n 2048] [--repeats 10]

benchmarks/cpu_step.py runs this in a process of its own, with OPENBLAS_NUM_THREADS set to the
benchmark's thread count and the same CPUs as the two trainers. It multiplies two n × n
float32 matrices with numpy.dot (Debian's numpy calls libblas.so.3, which Debian's
alternatives point at OpenBLAS; the line printed names the library that was mapped), and
prints one JSON line with the best rate of the repeats in GFLOP/s (2 n³ flops a product).
No torch is loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def blas_library() -> str:
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "blas" in line.lower()}
    except OSError:
        return "unknown"
    return ", ".join(sorted({os.path.realpath(p) for p in paths if p.startswith("/")})) or "none"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=10)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.n, args.n), dtype=np.float32)
    b = rng.standard_normal((args.n, args.n), dtype=np.float32)
    c = np.empty((args.n, args.n), dtype=np.float32)
    np.dot(a, b, out=c)  # warm-up: OpenBLAS starts its threads and touches its buffers
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        np.dot(a, b, out=c)
        times.append(time.perf_counter() - start)
    flops = 2.0 * args.n ** 3
    print(json.dumps({
        "gflops": flops / min(times) / 1e9,
        "median_gflops": flops / sorted(times)[len(times) // 2] / 1e9,
        "n": args.n,
        "threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "cpus": sorted(os.sched_getaffinity(0)),
        "blas": blas_library(),
        "numpy": np.__version__,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
