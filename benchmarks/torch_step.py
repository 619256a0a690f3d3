#!/usr/bin/python3
"""One PyTorch configuration of the CPU benchmark, in a process of its own.

    torch_step.py SPEC.json
    torch_step.py --defaults

benchmarks/cpu_step.py starts this once per configuration it tries, with the thread settings
in the environment (OMP_WAIT_POLICY, OPENBLAS_NUM_THREADS: both are read when the libraries
load, so they cannot change inside one process) and the CPUs it may use already set. SPEC
holds the model as `tessel compile --emit=graph` describes it (kind, dims, layers, train), the
steps, the warm-up and `torch_threads` (torch.set_num_threads). This trains the reference
modules of test/Integration/Parity/reference.py on random token batches (under torch.autocast's bf16 when
the model's `precision` is bf16) and prints one JSON line: the tokens/s over the steps after
the warm-up, each step's time, and what the process ran with.

With --defaults it prints what PyTorch chooses on its own in this environment: its intra-op
threads, OpenBLAS's threads and ATen's CPU capability.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "Integration", "Parity"))

import torch  # noqa: E402

import reference as ref  # noqa: E402


def blas_libraries() -> list:
    """The BLAS libraries this process mapped (Debian's libblas.so.3 is an alternative)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "blas" in line.lower()}
    except OSError:
        return []
    return sorted({os.path.realpath(p) for p in paths if p.startswith("/")})


def blas_threads() -> int:
    """openblas_get_num_threads() of the OpenBLAS torch loaded; 0 if there is none."""
    for path in blas_libraries():
        try:
            return int(ctypes.CDLL(path).openblas_get_num_threads())
        except (OSError, AttributeError):
            continue
    return 0


def capability() -> str:
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            return line.split(":", 1)[1].strip()
    return "unknown"


def main() -> int:
    if sys.argv[1:] == ["--defaults"]:
        torch.ones(64, 64) @ torch.ones(64, 64)
        print(json.dumps({"torch_threads": torch.get_num_threads(), "blas_threads": blas_threads(),
                          "torch_version": torch.__version__, "capability": capability(),
                          "blas": ", ".join(blas_libraries())}))
        return 0
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    torch.set_num_threads(int(spec["torch_threads"]))
    mcfg = ref.ModelConfig.from_dims(spec["kind"], spec["dims"], int(spec["layers"]))
    tcfg = ref.TrainConfig.from_attr(spec["train"])
    model = ref.build_model(mcfg)
    ref.init_like_tessel(model, tcfg.seed)
    model.train()
    opt = ref.make_optimizer(model, tcfg)
    gen = torch.Generator().manual_seed(tcfg.seed)
    accumulation = tcfg.accumulation
    micro, seq, vocab = tcfg.micro_batch, mcfg.seq, mcfg.vocab
    steps, warmup = int(spec["steps"]), int(spec["warmup"])
    # A bf16 model runs under PyTorch's own mixed precision: torch.autocast("cpu", bfloat16).
    autocast = str(spec["train"].get("precision", "fp32")) == "bf16"
    times, losses = [], []
    for step in range(1, steps + 1):
        batches = []
        for _ in range(accumulation):
            tokens = torch.randint(0, vocab, (micro, seq + 1), generator=gen)
            batches.append((tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()))
        start = time.perf_counter()
        res = ref.train_step(model, opt, step, tcfg, batches, autocast=autocast)
        times.append(time.perf_counter() - start)
        losses.append(res.loss)
        if spec.get("verbose"):
            print(f"    step {step}: loss {res.loss:.4f}, {times[-1] * 1e3:.1f} ms",
                  file=sys.stderr, flush=True)
    measured = times[warmup:]
    tokens_per_step = tcfg.batch * seq
    print(json.dumps({
        "tokens_per_s": tokens_per_step * len(measured) / sum(measured),
        "step_times": times,
        "losses": losses,
        "torch_version": torch.__version__,
        "autocast_bf16": autocast,
        "torch_threads": torch.get_num_threads(),
        "cpus": sorted(os.sched_getaffinity(0)),
        "blas_threads": blas_threads(),
        "capability": capability(),
        "blas": ", ".join(blas_libraries()),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
