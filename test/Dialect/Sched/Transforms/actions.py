"""Prints a sched.pipeline's action lists one rank per line, compactly: F3 is the forward of
micro-batch 3, B3 its backward (Bi3 / W3: input and weight halves), a trailing .c the model
chunk when there are several; sends and receives are left out (the schedule checker in the
compiler proves they match). Reads `tessel compile --emit=sharded` on stdin."""
import re
import sys

names = {"forward": "F", "backward": "B", "backward_input": "Bi", "backward_weight": "W"}
rank, lines, chunks = None, {}, False
for line in sys.stdin:
    m = re.search(r"sched\.pipeline .* virtual (\d+)", line)
    if m:
        chunks = int(m.group(1)) > 1
    m = re.search(r"sched\.rank (\d+)", line)
    if m:
        rank = int(m.group(1))
        lines[rank] = []
        continue
    m = re.search(r"sched\.(forward|backward_input|backward_weight|backward) (\d+) chunk (\d+)", line)
    if m and rank is not None:
        token = names[m.group(1)] + m.group(2) + (f".{m.group(3)}" if chunks else "")
        lines[rank].append(token)
for r in sorted(lines):
    print(f"rank {r}: {' '.join(lines[r])}")
