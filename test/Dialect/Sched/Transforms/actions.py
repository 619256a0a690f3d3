"""Prints each pipeline rank's compute actions in order, one rank per line, compactly: F3 is
the forward of micro-batch 3, B3 its backward (Bi3 / W3: the input and weight halves of
zero-bubble schedules), a trailing .c the model chunk when there are several; sends and
receives are left out (the schedule checker proves they match). Reads the Chrome trace that
`tessel estimate --trace` writes of the predicted schedule."""
import json
import sys

events = [e for e in json.load(open(sys.argv[1]))["traceEvents"]
          if e.get("ph") == "X" and e.get("cat") in ("forward", "backward")]
chunks = any(e["args"]["chunk"] > 0 for e in events)
by_rank = {}
for e in sorted(events, key=lambda e: (e["tid"], e["ts"])):
    by_rank.setdefault(e["tid"], []).append(e)
for rank, actions in sorted(by_rank.items()):
    split = any(e["name"].startswith("W") for e in actions)  # zero-bubble: B is the input half
    tokens = []
    for e in actions:
        kind = e["name"].rstrip("0123456789.")
        kind = "Bi" if kind == "B" and split else kind
        chunk = f".{e['args']['chunk']}" if chunks else ""
        tokens.append(f"{kind}{e['args']['microbatch']}{chunk}")
    print(f"rank {rank}: {' '.join(tokens)}")
