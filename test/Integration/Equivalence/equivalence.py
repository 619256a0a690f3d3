"""Parallel equivalence: every layout trains like one rank.

For a set of layouts covering every pair of settings (dp in {1,2,4}, tp in {1,2,4},
sequence parallelism on/off, ZeRO stage 0-3, gradient accumulation 1 or 4; pairs that cannot
occur, such as sequence parallelism without tp or ZeRO without dp, are left out), the model is
trained for 5 optimizer steps on the same data and seed as a one-rank run with the same global
batch. Each step's loss, and the held-out loss evaluated after the last step, must match the
one-rank run's within 1e-5 relative, and the final
parameters (the checkpoints, which hold whole tensors whatever the layout) within 1e-5
relative, ||ours - one rank|| / ||one rank|| over all parameters together. (Per tensor this
would not hold for attention's key bias: softmax ignores it, so its gradient is rounding
noise, which Adam scales up to full-size steps in every layout alike.)

With pipeline parallelism the accumulation steps are the pipeline's micro-batches, and the
layers run on pp stages in the order the schedule gives; the same tolerances hold.

Ranks as threads or as processes. By default each layout runs as threads of one process;
with --mpirun it runs as MPI processes, one per rank (`mpirun -np <world size>`), with the
same reference (the one-rank run, started plainly), tolerances and comparisons.

Plans for another machine. --emit-plans DIR compiles the one-rank reference (one-rank.plan)
and each layout (<layout name>.plan) as plan files into DIR, and runs nothing: a GPU machine
without the compiler trains them (scripts/gpu-plans.sh, scripts/gpu-window.sh).

Which layouts. --layout gives them one by one. Otherwise the layouts vary the factors named by
--factors (the others keep their first value) and are chosen as a covering array: greedily,
each next layout is the valid one that covers the most pairs of factor values not yet covered
(among equals the one with the fewest ranks, the cheapest to run), until every pair of values
that some valid layout holds is covered. The one-rank layout is left out: it is the reference.
Every pair of settings thus meets in some layout, in far fewer layouts than all combinations:
the default factors (dp, tp, sp, zero, acc) have 90 valid combinations and a covering array of
13; all seven factors (dp, tp, pp, sp, zero, acc, recompute) 618 and 17. --full runs every
valid combination instead (--list prints the layouts without running them). The factors:

  dp, tp, pp   1, 2, 4, at most 16 ranks in all (pp needs a model of 8 layers)
  sp           sequence parallelism off, on (needs tp > 1)
  zero         ZeRO stage 0 to 3 (needs dp > 1)
  acc          gradient accumulation (with pp: micro-batches) 1 or 4
  recompute    none, selective, full

A layout with pp > 1 takes, of the schedules its micro-batches allow (afab; 1f1b and zbh1 with
at least pp micro-batches; interleaved, v = 2, with a multiple of pp), the one used least so
far, so that the pipelined layouts of a covering array run every schedule; the schedules'
pairs with the other settings are the threads suite's explicit pipeline layouts. Recomputation
(-tessel-recompute) computes the same values again in the backward pass, so it must leave the
losses and parameters as they are.

With --same-accumulation the reference of a layout that accumulates over acc micro-batches is
a one-rank run of the same micro-batches (acc of them, each of BATCH / acc sequences) rather than
one micro-batch of the whole batch: a loss that is not a mean over sequences (a mixture of
experts' load-balancing loss, a product of means over the micro-batch) depends on how the
batch is cut, exactly as in PyTorch.

usage: equivalence.py --tessel BIN --model FILE --data FILE --workdir DIR [--layout SPEC]...
                      [--factors LIST] [--full] [--mpirun 'mpirun --oversubscribe ...']
                      [--same-accumulation]
A layout is written dp,tp,sp,zero,accumulation[,pp,schedule[,virtual[,recompute]]], e.g.
2,2,1,1,1 or 2,1,0,1,4,2,zbh1 or 1,1,0,0,8,4,interleaved,2 or 2,2,0,0,4,2,1f1b,1,full, and may
end with named fields: cp=N for context parallelism (shard { seq = cp }), context=ring for
ring attention rather than all-gathered keys, and ep=N for expert parallelism (shard { batch = ep,
experts = ep }, with dp > 1 batch = (dp, ep), for a model with an `experts` dim), and
overlap=false for data-parallel gradients reduced after the backward pass, e.g.
1,2,1,0,1,cp=2 or 1,1,0,0,1,cp=4,context=ring or 1,1,0,0,1,ep=4 or 2,1,0,1,1,ep=2 or
2,1,0,0,4,overlap=false.
"""
import argparse
import itertools
import json
import math
import os
import shlex
import shutil
import struct
import subprocess
import sys

FACTORS = {"dp": [1, 2, 4], "tp": [1, 2, 4], "pp": [1, 2, 4], "sp": [0, 1],
           "zero": [0, 1, 2, 3], "acc": [1, 4], "recompute": ["none", "selective", "full"]}
DEFAULT_FACTORS = "dp,tp,sp,zero,acc"
SCHEDULES = ["afab", "1f1b", "interleaved", "zbh1"]
BATCH, STEPS, TOLERANCE = 16, 5, 1e-5
MAX_RANKS = 16
# A run that takes this long has hung (a layout trains in seconds).
RUN_TIMEOUT_S = 300


def ranks(c):
    return c["dp"] * c["tp"] * c.get("pp", 1) * c.get("cp", 1) * c.get("ep", 1)


def valid(c):
    return ((c["sp"] == 0 or c["tp"] > 1) and (c["zero"] == 0 or c["dp"] > 1)
            and ranks(c) <= MAX_RANKS)


def schedule_allows(schedule, pp, acc):
    if schedule in ("1f1b", "zbh1"):
        return acc >= pp
    if schedule == "interleaved":
        return acc % pp == 0
    return True


def assign_schedules(layouts):
    """Gives each pipelined layout the schedule used least so far that its micro-batches allow
    (the first of SCHEDULES among equals)."""
    used = {schedule: 0 for schedule in SCHEDULES}
    for c in layouts:
        if c["pp"] == 1:
            continue
        allowed = [s for s in SCHEDULES if schedule_allows(s, c["pp"], c["acc"])]
        schedule = min(allowed, key=lambda s: used[s])
        used[schedule] += 1
        c["schedule"] = schedule
        c["virtual"] = 2 if schedule == "interleaved" else 1
    return layouts


def combinations(varied):
    """Every valid layout that varies the factors in `varied`, the others at their first value."""
    names = list(FACTORS)
    levels = [FACTORS[n] if n in varied else FACTORS[n][:1] for n in names]
    configs = [dict(zip(names, v)) for v in itertools.product(*levels)]
    return [c for c in configs if valid(c)]


def pairwise_layouts(varied):
    """A greedy covering array: each chosen layout covers the most pairs not yet covered."""
    # The one-rank layout is the reference itself.
    configs = [c for c in combinations(varied) if ranks(c) > 1]
    names = [n for n in FACTORS if n in varied]

    def pairs(c):
        return {((a, c[a]), (b, c[b])) for a, b in itertools.combinations(names, 2)}

    uncovered = set().union(*(pairs(c) for c in configs))
    chosen = []
    while uncovered:
        best = max(configs, key=lambda c: (len(pairs(c) & uncovered), -ranks(c)))
        chosen.append(best)
        uncovered -= pairs(best)
    return chosen


def parse_layout(spec):
    # Named fields (cp=2) may follow the positional ones.
    named = dict(f.split("=", 1) for f in spec.split(",") if "=" in f)
    fields = [f for f in spec.split(",") if "=" not in f]
    names = ["dp", "tp", "sp", "zero", "acc"]
    c = dict(zip(names, map(int, fields[:5])))
    c["cp"] = int(named.get("cp", 1))
    c["ep"] = int(named.get("ep", 1))
    c["context"] = named.get("context", "allgather")
    c["overlap"] = named.get("overlap", "true")
    c["pp"] = int(fields[5]) if len(fields) > 5 else 1
    c["schedule"] = fields[6] if len(fields) > 6 else "1f1b"
    c["virtual"] = int(fields[7]) if len(fields) > 7 else 1
    c["recompute"] = fields[8] if len(fields) > 8 else "none"
    return c


def parallel_section(c):
    pp = c.get("pp", 1)
    cp = c.get("cp", 1)
    ep = c.get("ep", 1)
    axes = ([f"pp = {pp}"] if pp > 1 else []) + [f"dp = {c['dp']}"] + (
        [f"ep = {ep}"] if ep > 1 else []) + ([f"cp = {cp}"] if cp > 1 else []) + (
        [f"tp = {c['tp']}"] if c["tp"] > 1 else [])
    batch = "(dp, ep)" if ep > 1 and c["dp"] > 1 else "ep" if ep > 1 else "dp"
    shard = [f"batch = {batch}"] + (["experts = ep"] if ep > 1 else []) + (
        ["heads = tp", "ffn = tp", "vocab = tp"] if c["tp"] > 1 else []) + (
        ["seq = cp"] if cp > 1 else [])
    lines = [f"mesh {{ {', '.join(axes)} }}", f"shard {{ {', '.join(shard)} }}"]
    if c["sp"]:
        lines.append("sequence_parallel = true")
    if c.get("context", "allgather") != "allgather":
        lines.append(f"context = {c['context']}")
    if c["zero"]:
        lines.append(f"zero = {c['zero']}")
    if pp > 1:
        virtual = f", virtual = {c['virtual']}" if c.get("virtual", 1) > 1 else ""
        lines.append(f"pipeline {{ schedule = {c['schedule']}, microbatches = {c['acc']}{virtual} }}")
    if c.get("recompute", "none") != "none":
        lines.append(f"recompute = {c['recompute']}")
    if c.get("overlap", "true") != "true":
        lines.append(f"overlap = {c['overlap']}")
    return "\n  ".join(lines)


def name_of(c):
    name = f"dp{c['dp']}-tp{c['tp']}-sp{c['sp']}-zero{c['zero']}-acc{c['acc']}"
    if c.get("ep", 1) > 1:
        name += f"-ep{c['ep']}"
    if c.get("cp", 1) > 1:
        name += f"-cp{c['cp']}"
        if c.get("context", "allgather") != "allgather":
            name += f"-{c['context']}"
    if c.get("pp", 1) > 1:
        name += f"-pp{c['pp']}-{c['schedule']}"
        if c.get("virtual", 1) > 1:
            name += f"-v{c['virtual']}"
    if c.get("recompute", "none") != "none":
        name += f"-{c['recompute']}"
    if c.get("overlap", "true") != "true":
        name += "-nooverlap"
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


def run_command(cmd, what):
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{what}: {' '.join(cmd)} did not end within {RUN_TIMEOUT_S} s")
    if run.returncode != 0:
        raise RuntimeError(f"{what}: {' '.join(cmd)} failed:\n{run.stdout}{run.stderr}")


def train(args, c, template, mpirun=None):
    """Trains layout `c`; with `mpirun` (the launcher's command) as one MPI process per rank."""
    work = os.path.join(args.workdir, name_of(c) + ("-mpi" if mpirun else ""))
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "model.model")
    micro = BATCH // (c["dp"] * c.get("ep", 1) * c["acc"])
    with open(model, "w") as f:
        f.write(template.replace("@PARALLEL@", parallel_section(c)).replace("@MICRO@", str(micro)))
    metrics = os.path.join(work, "metrics.jsonl")
    checkpoints = os.path.join(work, "checkpoints")
    # One evaluation, after the last step: the evaluation loss is a function of the data and
    # the spec alone, so every layout reports the one-rank run's. The training text serves as
    # the validation data too, so that all of it trains.
    options = ["--data", args.data, "--steps", str(STEPS), "--quiet", "--metrics", metrics,
               "--checkpoint-dir", checkpoints, "--checkpoint-every", str(STEPS),
               "--eval-every", str(STEPS), "--eval-data", args.data]
    if mpirun:
        # One compute thread per process: the processes already outnumber the cores.
        exe = os.path.join(work, "model")
        run_command([args.tessel, "compile", model, "-o", exe] + args.tessel_arg, name_of(c))
        run_command(mpirun + ["-np", str(ranks(c)), exe, "--threads", "1"] + options, name_of(c))
    else:
        run_command([args.tessel, "run", model] + args.tessel_arg + ["--", "--threads", "2"] + options,
                    name_of(c))
    losses = {}
    with open(metrics) as f:
        for line in f:
            m = json.loads(line)
            if "loss" in m and "step" in m and "eval_loss" not in m:
                losses[m["step"]] = m["loss"]
            elif "eval_loss" in m:
                losses["eval"] = m["eval_loss"]
    if "eval" not in losses:
        raise RuntimeError(f"{name_of(c)}: the run reported no evaluation loss")
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


def noise_scale(c):
    """How much more a layout's tolerance at a lower precision is than one rank's 2d. A layout
    that rounds where one rank rounds has d of noise of its own; a tensor-parallel contraction
    rounds each of its tp partial sums to 16 bits before their reduction (in f32) rounds the
    sum, tp + 1 roundings of an output where one rank has one, so up to (tp + 1) d, and the
    layout is within (tp + 2) d of the one-rank run."""
    return (c["tp"] + 2) / 2 if c["tp"] > 1 else 1.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--layout", action="append", default=[])
    ap.add_argument("--tessel-arg", action="append", default=[],
                    help="an option for every tessel compile / run (e.g. --fuse=off)")
    ap.add_argument("--factors", default=DEFAULT_FACTORS,
                    help="the factors the layouts vary, of " + ",".join(FACTORS))
    ap.add_argument("--full", action="store_true",
                    help="every valid combination of the factors, not a covering array")
    ap.add_argument("--mpirun", help="run each layout as MPI processes, started by this command")
    ap.add_argument("--list", action="store_true", help="print the layouts and exit")
    ap.add_argument("--emit-plans", metavar="DIR",
                    help="compile the one-rank reference and each layout into DIR as plan "
                         "files, and exit")
    ap.add_argument("--same-accumulation", action="store_true",
                    help="compare each layout with a one-rank run of the same micro-batches "
                         "(accumulation dp x acc) rather than one micro-batch of the whole "
                         "batch: for losses that are not means over sequences, such as a "
                         "mixture of experts' load-balancing loss")
    ap.add_argument("--noise-from", metavar="MODEL",
                    help="the same model at another precision (bf16 against fp32): the "
                         "tolerances become twice the distance between the one-rank runs of "
                         "the two, each layout's own rounding noise allowed as much as the "
                         "one-rank run's")
    args = ap.parse_args()
    varied = args.factors.split(",")
    unknown = [f for f in varied if f not in FACTORS]
    if unknown:
        ap.error(f"unknown factors {','.join(unknown)}; known: {','.join(FACTORS)}")
    if args.layout:
        layouts = [parse_layout(spec) for spec in args.layout]
    else:
        layouts = assign_schedules(combinations(varied) if args.full else pairwise_layouts(varied))
    if args.list:
        for c in layouts:
            print(f"{name_of(c):56} {ranks(c):2} ranks")
        print(f"{len(layouts)} layouts")
        return 0
    if args.emit_plans:
        os.makedirs(args.emit_plans, exist_ok=True)
        template = open(args.model).read()
        one = {"dp": 1, "tp": 1, "pp": 1, "sp": 0, "zero": 0, "acc": 1, "recompute": "none"}
        for name, c in [("one-rank", one)] + [(name_of(c), c) for c in layouts]:
            model = os.path.join(args.emit_plans, name + ".model")
            micro = BATCH // (c["dp"] * c.get("ep", 1) * c["acc"])
            with open(model, "w") as f:
                f.write(template.replace("@PARALLEL@", parallel_section(c))
                        .replace("@MICRO@", str(micro)))
            run_command([args.tessel, "compile", model, "--emit=plan-file", "-o",
                         os.path.join(args.emit_plans, name + ".plan")] + args.tessel_arg, name)
            os.remove(model)
            print(f"{name}.plan")
        return 0
    mpirun = shlex.split(args.mpirun) if args.mpirun else None
    if mpirun and shutil.which(mpirun[0]) is None:
        print(f"FAIL: ranks as MPI processes need '{mpirun[0]}', which is not on PATH")
        return 1
    template = open(args.model).read()
    references = {}

    def reference(acc):
        """The one-rank run with `acc` micro-batches per step, trained once."""
        if acc not in references:
            one = {"dp": 1, "tp": 1, "pp": 1, "sp": 0, "zero": 0, "acc": acc, "recompute": "none"}
            references[acc] = train(args, one, template)
            logged = sum(1 for s in references[acc][0] if s != "eval")
            if logged != STEPS:
                raise RuntimeError(f"the one-rank run logged {logged} steps, not {STEPS}")
        return references[acc]

    try:
        reference(1)
    except (RuntimeError, KeyError, OSError) as e:
        print(f"FAIL the one-rank reference: {e}")
        return 1
    loss_tolerance = param_tolerance = TOLERANCE
    if args.noise_from:
        # A layout and the one-rank run are both the same exact computation with rounding
        # noise; if a layout's noise is no larger than the one-rank run's (its distance d from
        # the run at the other precision), the two are within 2d of each other.
        other = argparse.Namespace(**vars(args))
        other.workdir = os.path.join(args.workdir, "noise-from")
        one = {"dp": 1, "tp": 1, "pp": 1, "sp": 0, "zero": 0, "acc": 1, "recompute": "none"}
        try:
            loss_d, param_d = compare(train(other, one, open(args.noise_from).read()), reference(1))
        except (RuntimeError, KeyError, OSError) as e:
            print(f"FAIL the one-rank run of {args.noise_from}: {e}")
            return 1
        loss_tolerance, param_tolerance = 2 * loss_d, 2 * param_d
        print(f"tolerances: loss {loss_tolerance:.2e}, parameters {param_tolerance:.2e} "
              f"(2d, d the one-rank run's distance from {os.path.basename(args.noise_from)}; "
              f"(2 + tp) d with tensor parallelism)")
    failures = 0
    worst_loss = worst_param = 0.0
    for c in layouts:
        try:
            # The layout's micro-batch over all its data-parallel ranks holds
            # BATCH / acc sequences; a one-rank run of the same micro-batches accumulates acc.
            ref = reference(c["acc"] if args.same_accumulation else 1)
            loss_err, param_err = compare(ref, train(args, c, template, mpirun))
        except (RuntimeError, KeyError, OSError) as e:
            print(f"FAIL {name_of(c)}: {e}")
            failures += 1
            continue
        scale = noise_scale(c) if args.noise_from else 1.0
        ok = loss_err <= scale * loss_tolerance and param_err <= scale * param_tolerance
        failures += not ok
        worst_loss, worst_param = max(worst_loss, loss_err), max(worst_param, param_err)
        print(f"{'ok  ' if ok else 'FAIL'} {name_of(c):56} loss {loss_err:.2e}  params {param_err:.2e}")
    as_what = "as MPI processes" if mpirun else "as threads"
    print(f"{len(layouts)} layouts {as_what}, {failures} failed; largest relative error: "
          f"loss {worst_loss:.2e}, parameters {worst_param:.2e}")
    return 1 if failures else 0


sys.exit(main())
