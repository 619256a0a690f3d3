"""The estimate's memory per rank is what the runtime allocates: on the CPU (fp32), the
parameters, gradients and optimizer state add up to the state tensors every executor holds,
and the activations are its arena.

usage: check_arena.py ESTIMATE.json MEMORY.jsonl   (the second from `X --memory`)
"""
import json
import sys

estimate = json.load(open(sys.argv[1]))
allocated = [json.loads(line) for line in open(sys.argv[2])]
failed = len(allocated) != len(estimate["ranks"])
for e, a in zip(estimate["ranks"], allocated):
    state = e["parameters"] + e["gradients"] + e["optimizer"]
    if state != a["state_bytes"] or e["activations"] != a["arena_bytes"]:
        failed = True
    print(f"rank {e['rank']}: state {state:.0f} / {a['state_bytes']} bytes, "
          f"arena {e['activations']:.0f} / {a['arena_bytes']} bytes")
print("mismatch" if failed else "match")
sys.exit(1 if failed else 0)
