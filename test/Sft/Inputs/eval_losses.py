"""Checks that runs' --metrics files log the same evaluation steps with eval losses that agree.

  eval_losses.py REFERENCE.jsonl OTHER.jsonl... --tol T

Every file must log an eval_loss at the same steps as REFERENCE, each within T (relative) of
REFERENCE's. Prints "EVAL LOSSES AGREE evals=N" or the first disagreement and exits 1.
"""
import json
import sys


def evals(path):
    out = {}
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if "eval_loss" in record:
                if record["step"] in out:
                    sys.exit(print(f"{path}: step {record['step']} evaluated twice") or 1)
                out[record["step"]] = float(record["eval_loss"])
    return out


def main(argv):
    if len(argv) < 4 or argv[-2] != "--tol":
        print(__doc__)
        return 2
    tol = float(argv[-1])
    reference = evals(argv[1])
    if not reference:
        print(f"{argv[1]} logs no eval_loss")
        return 1
    for path in argv[2:-2]:
        other = evals(path)
        if set(other) != set(reference):
            print(f"{path} evaluates at steps {sorted(other)}, {argv[1]} at {sorted(reference)}")
            return 1
        for step, want in sorted(reference.items()):
            got = other[step]
            if abs(got - want) > tol * abs(want):
                print(f"{path}: step {step} eval loss {got} against {want}")
                return 1
    print(f"EVAL LOSSES AGREE evals={len(reference)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
