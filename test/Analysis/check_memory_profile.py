#!/usr/bin/python3
"""Reads memory profiles from a trace of tessel estimate --memory-trace.

    check_memory_profile.py TRACE.json
        per profile: its steps, its forward-backward passes (the runs of samples with kept
        activations), that the kept activations rise to a peak and fall to 0 in each, and that
        the state (parameters, gradients, optimizer state) is the same in every sample
    check_memory_profile.py BASE.json OTHER.json... --compare
        per other trace, the first profile's state classes as multiples of the base's, and
        whether its kept activations peak lower and recomputed values appear
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Integration", "Runtime",
                                "Inputs"))
from memory_trace import read_profiles  # noqa: E402

STATE = ["parameters", "gradients", "optimizer state"]


def profiles(path):
    """(rank, samples, mark labels) of each profile, by rank."""
    return [(rank, p["samples"], [label for _, label in p["marks"]])
            for rank, p in sorted(read_profiles(path).items())]


def shape(path):
    for rank, samples, marks in profiles(path):
        steps = sum(1 for m in marks if m.startswith("step "))
        kept = [s.get("kept activations", 0) for s in samples]
        # A pass: a maximal run of samples holding kept activations.
        passes, i = [], 0
        while i < len(kept):
            if kept[i] == 0:
                i += 1
                continue
            j = i
            while j < len(kept) and kept[j] > 0:
                j += 1
            passes.append(kept[i:j])
            i = j
        for run in passes:
            top = run.index(max(run))
            rising = all(a <= b for a, b in zip(run[:top], run[1:top + 1]))
            if not rising:
                sys.exit(f"rank {rank}: kept activations do not only grow before their peak")
        states = {tuple(s.get(c, 0) for c in STATE) for s in samples}
        if len(states) != 1:
            sys.exit(f"rank {rank}: the state changes over the step: {sorted(states)[:3]}")
        peak = max(kept) if kept else 0
        print(f"rank {rank}: {steps} steps, {len(passes)} forward-backward passes, kept "
              f"activations rise to {peak} and fall to 0 in each; state "
              f"{sum(next(iter(states)))} throughout")


def compare(paths):
    base = profiles(paths[0])[0][1]
    for path in paths[1:]:
        other = profiles(path)[0][1]
        parts = []
        for c in STATE:
            a, b = max(s.get(c, 0) for s in base), max(s.get(c, 0) for s in other)
            if a != b:
                parts.append(f"{c} x{b / a:.2g}")
        kept_a = max(s.get("kept activations", 0) for s in base)
        kept_b = max(s.get("kept activations", 0) for s in other)
        if kept_b < kept_a:
            parts.append("kept activations peak smaller")
        if any(s.get("recomputed", 0) for s in other) and not any(
                s.get("recomputed", 0) for s in base):
            parts.append("recomputed values appear")
        name = lambda p: p.rsplit("/", 1)[-1]
        print(f"{name(path)} against {name(paths[0])}: {', '.join(parts) or 'the same'}")


if __name__ == "__main__":
    if sys.argv[-1] == "--compare":
        compare(sys.argv[1:-1])
    else:
        shape(sys.argv[1])
