"""Checks that two runs' --metrics files log the same steps with losses that agree.

  close_losses.py A.jsonl B.jsonl --tol T [--steps N] [--eval]

For every step both files log, |loss_a - loss_b| <= T * |loss_b|. With --steps N, both files
must log the loss of every step 1..N exactly once and no other step (a multi-process run whose
every process logged would repeat steps). Prints one line per step and
"LOSSES AGREE steps=N max_rel_err=E" at the end; exits 1 on the first step beyond T, on a step
logged other than once, or if the files share no step.

With --eval, the evaluation losses (eval_loss) instead: both files must evaluate at the same
steps, and the last line is "EVAL LOSSES AGREE evals=N max_rel_err=E".
"""
import json
import sys


def losses(path, key):
    out = {}
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if key in record:
                out.setdefault(record["step"], []).append(record[key])
    return out


def main():
    evaluation = "--eval" in sys.argv
    key = "eval_loss" if evaluation else "loss"
    a, b = losses(sys.argv[1], key), losses(sys.argv[2], key)
    tol = float(sys.argv[sys.argv.index("--tol") + 1])
    if evaluation and set(a) != set(b):
        print(f"{sys.argv[1]} evaluates at steps {sorted(a)}, {sys.argv[2]} at {sorted(b)}")
        return 1
    if "--steps" in sys.argv:
        steps = list(range(1, int(sys.argv[sys.argv.index("--steps") + 1]) + 1))
        problems = [f"{path}: step {s} logged {len(logged.get(s, []))} times, not once"
                    for path, logged in ((sys.argv[1], a), (sys.argv[2], b))
                    for s in sorted(set(steps) | set(logged)) if len(logged.get(s, [])) != 1]
        if problems:
            print("\n".join(problems))
            return 1
    else:
        steps = sorted(set(a) & set(b))
    if not steps:
        print("no step in common")
        return 1
    worst = 0.0
    for step in steps:
        x, y = a[step][-1], b[step][-1]
        err = abs(x - y) / abs(y)
        worst = max(worst, err)
        print(f"step {step}: {x:.7f} {y:.7f} rel {err:.1e}")
        if err > tol:
            print(f"step {step}: the losses differ by {err:.1e} > {tol}")
            return 1
    if evaluation:
        print(f"EVAL LOSSES AGREE evals={len(steps)} max_rel_err={worst:.1e}")
    else:
        print(f"LOSSES AGREE steps={len(steps)} max_rel_err={worst:.1e}")
    return 0


sys.exit(main())
