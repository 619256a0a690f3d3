#!/usr/bin/python3
"""Compares a measured memory trace (the runner's --memory-trace) with the predicted one
(tessel estimate --memory-trace), sample by sample.

    compare_memory.py PREDICTED.json MEASURED.json [--rank R]

The traces are read as memory_trace.py says. For each rank in the measured trace (or rank R
alone): the predicted profile of that rank must have as many samples, each with the same bytes
in every class, and the same marks, and each measured sample must carry the resident memory.
Prints one line per rank and "match", or the first difference and exits 1.
"""

import sys

from memory_trace import read_profiles


def main():
    predicted, measured = read_profiles(sys.argv[1]), read_profiles(sys.argv[2])
    if len(sys.argv) == 5 and sys.argv[3] == "--rank":
        measured = {r: m for r, m in measured.items() if r == int(sys.argv[4])}
    if not measured:
        sys.exit("the measured trace holds no profile")
    for rank, m in sorted(measured.items()):
        p = predicted.get(rank)
        if p is None:
            sys.exit(f"rank {rank}: measured but not predicted")
        ps, ms = p["samples"], m["samples"]
        if len(ps) != len(ms):
            sys.exit(f"rank {rank}: {len(ps)} predicted samples, {len(ms)} measured")
        classes = sorted(set().union(*[s.keys() for s in ps + ms]))
        for i, (a, b) in enumerate(zip(ps, ms)):
            for c in classes:
                if a.get(c, 0) != b.get(c, 0):
                    sys.exit(f"rank {rank}: sample {i}: {c}: predicted {a.get(c, 0)}, "
                             f"measured {b.get(c, 0)}")
        if p["marks"] != m["marks"]:
            sys.exit(f"rank {rank}: marks differ: predicted {p['marks']}, measured {m['marks']}")
        if len(m["resident"]) != len(ms) or not all(r > 0 for r in m["resident"]):
            sys.exit(f"rank {rank}: the measured trace lacks the resident memory of each sample")
        peak = max(sum(s.values()) for s in ms)
        print(f"rank {rank}: {len(ms)} samples, peak {peak} bytes, classes {', '.join(classes)}")
    print("match")


if __name__ == "__main__":
    main()
