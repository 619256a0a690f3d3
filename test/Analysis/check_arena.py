"""The estimate's memory per rank is what the runtime allocates: on the CPU (fp32), the
parameters, gradients and optimizer state add up to the state tensors every executor holds,
and the activations are its arena plus, with a pipeline, the peak of its stash (what a rank
keeps of the micro-batches in flight).

usage: check_arena.py ESTIMATE.json MEMORY.jsonl   (the second from `X --memory`)
"""
import json
import sys

estimate = json.load(open(sys.argv[1]))
allocated = [json.loads(line) for line in open(sys.argv[2])]
failed = len(allocated) != len(estimate["ranks"])
for e, a in zip(estimate["ranks"], allocated):
    state = e["parameters"] + e["gradients"] + e["optimizer"]
    stash = a.get("pipeline_stash_bytes", 0)
    arena = e["activations"] - e.get("stash", 0)
    if state != a["state_bytes"] or arena != a["arena_bytes"] or e.get("stash", 0) != stash:
        failed = True
    line = (f"rank {e['rank']}: state {state:.0f} / {a['state_bytes']} bytes, "
            f"arena {arena:.0f} / {a['arena_bytes']} bytes")
    if "pipeline_stash_bytes" in a:
        line += f", stash {e.get('stash', 0):.0f} / {stash} bytes"
    print(line)
print("mismatch" if failed else "match")
sys.exit(1 if failed else 0)
