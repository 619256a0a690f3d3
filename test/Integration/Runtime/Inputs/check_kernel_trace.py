"""Checks a --trace file of a plan without a pipeline (runtime/host/KernelTrace.h).

  check_kernel_trace.py TRACE --ranks N --programs P1,P2,... [--collectives]

The file must be a Chrome trace whose complete ("X") events are the kernel calls of one step:
on each of ranks 0..N-1 (a process of the trace each, named "rank r"), of exactly the named
programs, with non-negative durations, one after another on each stream of the CPU (no call
starts before the previous one on its stream ends), and with --collectives at least one
collective per rank. Prints "TRACE OK ranks=N calls=C" or what is wrong, exit 1.
"""
import json
import sys


def main():
    path = sys.argv[1]
    ranks = int(sys.argv[sys.argv.index("--ranks") + 1])
    programs = set(sys.argv[sys.argv.index("--programs") + 1].split(","))
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    calls = [e for e in events if e["ph"] == "X"]
    names = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    problems = []
    if sorted(names) != list(range(ranks)) or any(names[r] != f"rank {r}" for r in names):
        problems.append(f"processes {names}, not ranks 0..{ranks - 1}")
    seen = {e["args"]["program"] for e in calls}
    if seen != programs:
        problems.append(f"programs {sorted(seen)}, not {sorted(programs)}")
    for r in range(ranks):
        mine = [e for e in calls if e["pid"] == r]
        if not mine:
            problems.append(f"rank {r} has no calls")
        if "--collectives" in sys.argv and not any(e["cat"] == "collective" for e in mine):
            problems.append(f"rank {r} has no collective")
        for stream in {e["tid"] for e in mine}:
            ends = 0.0
            for e in sorted((e for e in mine if e["tid"] == stream), key=lambda e: e["ts"]):
                if e["dur"] < 0 or e["ts"] + 1e-3 < ends:
                    problems.append(f"rank {r} stream {stream}: {e['name']} at {e['ts']} us "
                                    f"overlaps the call before it (ends {ends} us)")
                    break
                ends = e["ts"] + e["dur"]
    if problems:
        print("\n".join(problems))
        return 1
    print(f"TRACE OK ranks={ranks} calls={len(calls)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
