"""Checks that a run's --metrics file holds one loss per step, as another run's does, and that
the losses agree.

  same_losses.py RUN.jsonl REFERENCE.jsonl --steps N --tol T

Both files must log the loss of every step 1..N exactly once (a multi-process run whose every
process logged would repeat steps), and for each step |loss - reference| <= T * |reference|.
Prints one line per step and "LOSSES AGREE steps=N" at the end; exits 1 otherwise.
"""
import json
import sys


def losses(path, steps):
    seen = {}
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if "loss" in record:
                seen.setdefault(record["step"], []).append(record["loss"])
    problems = [f"{path}: step {s} logged {len(seen.get(s, []))} times, not once"
                for s in range(1, steps + 1) if len(seen.get(s, [])) != 1]
    problems += [f"{path}: step {s} is beyond {steps}" for s in sorted(seen) if s > steps]
    return {s: v[0] for s, v in seen.items() if len(v) == 1}, problems


def main():
    run_path, ref_path = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[sys.argv.index("--steps") + 1])
    tol = float(sys.argv[sys.argv.index("--tol") + 1])
    run, run_problems = losses(run_path, steps)
    ref, ref_problems = losses(ref_path, steps)
    if run_problems or ref_problems:
        print("\n".join(run_problems + ref_problems))
        return 1
    worst = 0.0
    for step in range(1, steps + 1):
        err = abs(run[step] - ref[step]) / abs(ref[step])
        worst = max(worst, err)
        print(f"step {step}: {run[step]:.7f} {ref[step]:.7f} rel {err:.1e}")
        if err > tol:
            print(f"step {step}: the losses differ by {err:.1e} > {tol}")
            return 1
    print(f"LOSSES AGREE steps={steps} max_rel_err={worst:.1e}")
    return 0


sys.exit(main())
