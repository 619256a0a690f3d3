"""Checks that two runs' --metrics files log the same steps with losses that agree.

  close_losses.py A.jsonl B.jsonl --tol T

For every step both files log, |loss_a - loss_b| <= T * |loss_b|. Prints one line per step and
"LOSSES AGREE steps=N max_rel_err=E" at the end; exits 1 on the first step beyond T, or if
the files share no step.
"""
import json
import sys


def losses(path):
    out = {}
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if "loss" in record:
                out[record["step"]] = record["loss"]
    return out


def main():
    a, b = losses(sys.argv[1]), losses(sys.argv[2])
    tol = float(sys.argv[sys.argv.index("--tol") + 1])
    steps = sorted(set(a) & set(b))
    if not steps:
        print("no step in common")
        return 1
    worst = 0.0
    for step in steps:
        err = abs(a[step] - b[step]) / abs(b[step])
        worst = max(worst, err)
        print(f"step {step}: {a[step]:.7f} {b[step]:.7f} rel {err:.1e}")
        if err > tol:
            print(f"step {step}: the losses differ by {err:.1e} > {tol}")
            return 1
    print(f"LOSSES AGREE steps={len(steps)} max_rel_err={worst:.1e}")
    return 0


sys.exit(main())
