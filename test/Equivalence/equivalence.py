"""Parallel equivalence: every layout trains like one rank.

For a set of layouts covering every pair of settings (dp in {1,2,4}, tp in {1,2,4},
sequence parallelism on/off, ZeRO stage 0-3, gradient accumulation 1 or 4; pairs that cannot
occur, such as sequence parallelism without tp or ZeRO without dp, are left out), the model is
trained for 5 optimizer steps on the same data and seed as a one-rank run with the same global
batch. Each step's loss must match the one-rank loss within 1e-5 relative, and the final
parameters (the checkpoints, which hold whole tensors whatever the layout) within 1e-5
relative, ||ours - one rank|| / ||one rank|| over all parameters together. (Per tensor this
would not hold for attention's key bias: softmax ignores it, so its gradient is rounding
noise, which Adam scales up to full-size steps in every layout alike.)

With pipeline parallelism the accumulation steps are the pipeline's micro-batches, and the
layers run on pp stages in the order the schedule gives; the same tolerances hold.

usage: equivalence.py --tessel BIN --model FILE --data FILE --workdir DIR [--layout SPEC]...
A layout is written dp,tp,sp,zero,accumulation[,pp,schedule[,virtual]], e.g. 2,2,1,1,1 or
2,1,0,1,4,2,zbh1 or 1,1,0,0,8,4,interleaved,2.
"""
import argparse
import itertools
import json
import math
import os
import struct
import subprocess
import sys

FACTORS = {"dp": [1, 2, 4], "tp": [1, 2, 4], "sp": [0, 1], "zero": [0, 1, 2, 3], "acc": [1, 4]}
BATCH, STEPS, TOLERANCE = 16, 5, 1e-5


def valid(c):
    return (c["sp"] == 0 or c["tp"] > 1) and (c["zero"] == 0 or c["dp"] > 1)


def pairwise_layouts():
    """A greedy covering array: each chosen layout covers the most pairs not yet covered."""
    names = list(FACTORS)
    configs = [dict(zip(names, v)) for v in itertools.product(*FACTORS.values())]
    configs = [c for c in configs if valid(c)]

    def pairs(c):
        return {((a, c[a]), (b, c[b])) for a, b in itertools.combinations(names, 2)}

    todo = set().union(*(pairs(c) for c in configs))
    chosen = []
    while todo:
        best = max(configs, key=lambda c: len(pairs(c) & todo))
        chosen.append(best)
        todo -= pairs(best)
    return chosen


def parse_layout(spec):
    fields = spec.split(",")
    c = dict(zip(FACTORS, map(int, fields[:5])))
    c["pp"] = int(fields[5]) if len(fields) > 5 else 1
    c["schedule"] = fields[6] if len(fields) > 6 else "1f1b"
    c["virtual"] = int(fields[7]) if len(fields) > 7 else 1
    return c


def parallel_section(c):
    pp = c.get("pp", 1)
    axes = ([f"pp = {pp}"] if pp > 1 else []) + [f"dp = {c['dp']}"] + (
        [f"tp = {c['tp']}"] if c["tp"] > 1 else [])
    shard = ["batch = dp"] + (["heads = tp", "ffn = tp", "vocab = tp"] if c["tp"] > 1 else [])
    lines = [f"mesh {{ {', '.join(axes)} }}", f"shard {{ {', '.join(shard)} }}"]
    if c["sp"]:
        lines.append("sequence_parallel = true")
    if c["zero"]:
        lines.append(f"zero = {c['zero']}")
    if pp > 1:
        virtual = f", virtual = {c['virtual']}" if c.get("virtual", 1) > 1 else ""
        lines.append(f"pipeline {{ schedule = {c['schedule']}, microbatches = {c['acc']}{virtual} }}")
    return "\n  ".join(lines)


def name_of(c):
    name = f"dp{c['dp']}-tp{c['tp']}-sp{c['sp']}-zero{c['zero']}-acc{c['acc']}"
    if c.get("pp", 1) > 1:
        name += f"-pp{c['pp']}-{c['schedule']}"
        if c.get("virtual", 1) > 1:
            name += f"-v{c['virtual']}"
    return name


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        out[key] = struct.unpack(f"<{(end - begin) // 4}f", data[begin:end])
    return out


def read_parameters(checkpoint):
    """The whole parameters of a sharded checkpoint, assembled from its shards (flat, C order)."""
    manifest = json.load(open(os.path.join(checkpoint, "manifest.json")))
    files = {}
    out = {}
    for name, tensor in manifest["params"].items():
        shape = tensor["shape"]
        whole = [0.0] * math.prod(shape)
        for shard in tensor["shards"]:
            if shard["file"] not in files:
                files[shard["file"]] = read_safetensors(os.path.join(checkpoint, shard["file"]))
            values = files[shard["file"]][name]
            sshape, offset = shard["shape"], shard["offset"]
            for i, v in enumerate(values):
                index, rest = 0, i
                coords = []
                for d in reversed(sshape):
                    coords.append(rest % d)
                    rest //= d
                coords.reverse()
                for d, c in enumerate(coords):
                    index = index * shape[d] + offset[d] + c
                whole[index] = v
        out[name] = whole
    return out


def train(args, c, template):
    work = os.path.join(args.workdir, name_of(c))
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "model.model")
    micro = BATCH // (c["dp"] * c["acc"])
    with open(model, "w") as f:
        f.write(template.replace("@PARALLEL@", parallel_section(c)).replace("@MICRO@", str(micro)))
    metrics = os.path.join(work, "metrics.jsonl")
    checkpoints = os.path.join(work, "checkpoints")
    cmd = [args.tessel, "run", model, "--", "--data", args.data, "--steps", str(STEPS),
           "--threads", "2", "--quiet", "--metrics", metrics, "--checkpoint-dir", checkpoints,
           "--checkpoint-every", str(STEPS)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{name_of(c)}: {' '.join(cmd)} failed:\n{run.stdout}{run.stderr}")
    losses = {}
    with open(metrics) as f:
        for line in f:
            m = json.loads(line)
            if "loss" in m and "step" in m and "eval_loss" not in m:
                losses[m["step"]] = m["loss"]
    latest = open(os.path.join(checkpoints, "latest")).read().strip()
    params = read_parameters(os.path.join(checkpoints, latest))
    return losses, params


def compare(ref, got):
    ref_losses, ref_params = ref
    losses, params = got
    loss_err = max(abs(losses[s] - ref_losses[s]) / abs(ref_losses[s]) for s in ref_losses)
    diff = norm = 0.0
    for key, r in ref_params.items():
        diff += sum((a - b) ** 2 for a, b in zip(params[key], r))
        norm += sum(b * b for b in r)
    return loss_err, math.sqrt(diff / norm)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--layout", action="append", default=[])
    args = ap.parse_args()
    template = open(args.model).read()
    if args.layout:
        layouts = [parse_layout(spec) for spec in args.layout]
    else:
        layouts = pairwise_layouts()
    ref = train(args, {"dp": 1, "tp": 1, "sp": 0, "zero": 0, "acc": 1}, template)
    if len(ref[0]) != STEPS:
        print(f"the one-rank run logged {len(ref[0])} steps, not {STEPS}")
        return 1
    failures = 0
    worst_loss = worst_param = 0.0
    for c in layouts:
        try:
            loss_err, param_err = compare(ref, train(args, c, template))
        except (RuntimeError, KeyError, OSError) as e:
            print(f"FAIL {name_of(c)}: {e}")
            failures += 1
            continue
        ok = loss_err <= TOLERANCE and param_err <= TOLERANCE
        failures += not ok
        worst_loss, worst_param = max(worst_loss, loss_err), max(worst_param, param_err)
        print(f"{'ok  ' if ok else 'FAIL'} {name_of(c):48} loss {loss_err:.2e}  params {param_err:.2e}")
    print(f"{len(layouts)} layouts, {failures} failed; largest relative error: "
          f"loss {worst_loss:.2e}, parameters {worst_param:.2e}")
    return 1 if failures else 0


sys.exit(main())
