"""Checks a run's MFU against the compiler's FLOP count.

usage: check_mfu.py ESTIMATE.json METRICS.jsonl PEAK_TFLOPS

Every step record must carry mfu = F / step_time_s / P, where F is the model FLOPs per step
that `tessel estimate --cluster ... --json` counts (the plan carries the same count as
`flops.model`) and P the peak given to the runner with --peak: one device, however many ranks
share it. Prints the FLOPs per step and the records checked.
"""
import json
import sys


def main():
    flops = json.load(open(sys.argv[1]))["prediction"]["model_flops"]
    peak = float(sys.argv[3]) * 1e12
    records = [json.loads(line) for line in open(sys.argv[2])]
    steps = [r for r in records if "step_time_s" in r]
    if not steps:
        sys.exit("no step records")
    for r in steps:
        if "mfu" not in r:
            sys.exit(f"step {r['step']}: no mfu")
        want = flops / r["step_time_s"] / peak
        if abs(r["mfu"] - want) > 1e-9 * want:
            sys.exit(f"step {r['step']}: mfu {r['mfu']} but F/t/P = {want}")
    print(f"model FLOPs per step {flops:.6g}; {len(steps)} step records agree")


if __name__ == "__main__":
    main()
