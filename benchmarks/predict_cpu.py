#!/usr/bin/env python3
"""The step-time model against measured steps on this CPU.

Calibrates this machine once (`tessel calibrate --threads 1`: every rank below runs one compute
thread), then for each model × layout (one rank; dp 2 × tp 2; a 2-stage 1F1B pipeline) it

  1. writes the model with that layout (its `parallel` section replaced; the pipeline runs 4
     micro-batches of a quarter of the batch each),
  2. predicts the step with `tessel estimate MODEL --cluster CPU --json`,
  3. compiles it, trains it for --steps steps with `--threads R` (R ranks, one thread each)
     and takes the median `step_time_s` of the steps after the first,
  4. prints predicted, measured and the error, and rewrites the section
     "Step-time model against measured steps (CPU)" of benchmarks/RESULTS.md.

When the layout has more ranks than the machine has cores, the ranks share the cores: the
cluster file given to the estimate then has its compute rates and memory bandwidth scaled by
cores / ranks (the file is written next to the calibrated one, and the table says so).

usage: benchmarks/predict_cpu.py [--steps N] [--build DIR] [--work DIR] [--no-results]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["examples/tiny_gpt.model", "examples/llama_small.model",
          "benchmarks/models/gpt_6x384.model"]
SECTION = "## Step-time model against measured steps (CPU)"


def layouts(text):
    """(name, parallel section, micro_batch divisor, ranks) for a model's text."""
    kv = "kv_heads" in text
    tp_shard = "heads = tp, ffn = tp, vocab = tp" + (", kv_heads = tp" if kv else "")
    return [
        ("one rank", "parallel {\n  mesh { dp = 1 }\n}\n", 1, 1),
        ("dp 2 x tp 2", "parallel {\n  mesh { dp = 2, tp = 2 }\n"
         f"  shard {{ batch = dp, {tp_shard} }}\n}}\n", 2, 4),
        ("pp 2 (1f1b, 4 micro-batches)", "parallel {\n  mesh { pp = 2 }\n"
         "  pipeline { schedule = 1f1b, microbatches = 4 }\n}\n", 4, 2),
    ]


def with_layout(text, section, divisor):
    """The model text with `section` as its parallel section and micro_batch = batch/divisor."""
    start = text.find("parallel {")
    if start >= 0:
        depth = 0
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0 and text[i] == "}":
                text = text[:start] + text[i + 1:]
                break
    batch = int(re.search(r"\bbatch = (\d+)", text).group(1))
    text = re.sub(r"\bmicro_batch = \d+", f"micro_batch = {batch // divisor}", text)
    return text.rstrip() + "\n\n" + section


def scaled_cluster(path, factor, out):
    """The cluster file at `path` with compute rates and memory bandwidth times `factor`."""
    lines = []
    for line in open(path):
        m = re.match(r"(accelerator\.(?:bf16|fp32|bandwidth)) = ([0-9.e+-]+) (\S+)", line)
        if m:
            line = f"{m.group(1)} = {float(m.group(2)) * factor:.6g} {m.group(3)}\n"
        lines.append(line)
    open(out, "w").write("".join(lines))
    return out


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default="/tmp/tessel-predict-cpu")
    ap.add_argument("--no-results", action="store_true", help="do not rewrite RESULTS.md")
    args = ap.parse_args()
    tessel = os.path.join(args.build, "bin", "tessel")
    os.makedirs(args.work, exist_ok=True)
    cores = os.cpu_count() or 1
    load_before = os.getloadavg()[0]

    cluster = os.path.join(args.work, "cpu.cluster")
    run([tessel, "calibrate", "--threads", "1", "-o", cluster])
    rows = []
    for model in MODELS:
        text = open(os.path.join(ROOT, model)).read()
        name = os.path.splitext(os.path.basename(model))[0]
        for layout, section, divisor, ranks in layouts(text):
            tag = f"{name}-{layout.split()[0]}{ranks}"
            path = os.path.join(args.work, tag + ".model")
            open(path, "w").write(with_layout(text, section, divisor))
            c = cluster
            if ranks > cores:
                c = scaled_cluster(cluster, cores / ranks,
                                   os.path.join(args.work, f"cpu-shared-{ranks}.cluster"))
            est = json.loads(run([tessel, "estimate", path, "--cluster", c, "--json",
                                  "-I", ROOT]).stdout)
            predicted = est["prediction"]["step"]
            exe = os.path.join(args.work, tag)
            run([tessel, "compile", path, "-o", exe, "-I", ROOT])
            metrics = os.path.join(args.work, tag + ".metrics.jsonl")
            if os.path.exists(metrics):
                os.remove(metrics)
            run([exe, "--steps", str(args.steps), "--threads", str(ranks), "--eval-every", "0",
                 "--metrics", metrics], cwd=ROOT)
            steps = [json.loads(l) for l in open(metrics) if '"step_time_s"' in l]
            measured = statistics.median(float(s["step_time_s"]) for s in steps[1:] or steps)
            err = predicted / measured - 1
            rows.append((name, layout, ranks, predicted, measured, err))
            print(f"{name:14s} {layout:30s} predicted {predicted * 1e3:9.1f} ms  measured "
                  f"{measured * 1e3:9.1f} ms  error {100 * err:+6.1f}%", flush=True)
    load_after = os.getloadavg()[0]
    within = sum(abs(r[5]) <= 0.15 for r in rows)
    print(f"{within} of {len(rows)} within 15%")
    if args.no_results:
        return
    lscpu = run(["lscpu"]).stdout
    cpu = re.search(r"Model name:\s*(.*)", lscpu).group(1).strip()
    out = [SECTION, "",
           f"{time.strftime('%Y-%m-%d')}, {cpu}, {cores} cores; load average {load_before:.1f} "
           f"before and {load_after:.1f} after (the machine was shared with other builds and "
           "runs: the figures move with the load). Calibrated by `tessel calibrate --threads 1`; "
           "each rank runs one compute thread; layouts with more ranks than cores get a cluster "
           "file with the compute rates and bandwidth scaled by cores / ranks. Measured: the "
           f"median `step_time_s` of steps 2..{args.steps}.", "",
           "Command: `benchmarks/predict_cpu.py --steps %d`" % args.steps, "",
           "| model | layout | ranks | predicted | measured | error |",
           "|---|---|---|---|---|---|"]
    for name, layout, ranks, p, m, e in rows:
        out.append(f"| {name} | {layout} | {ranks} | {p * 1e3:.1f} ms | {m * 1e3:.1f} ms | "
                   f"{100 * e:+.1f}% |")
    out += ["", f"{within} of {len(rows)} within the 15% goal.", ""]
    results = os.path.join(ROOT, "benchmarks", "RESULTS.md")
    text = open(results).read()
    start = text.find(SECTION)
    if start >= 0:
        nxt = text.find("\n## ", start + len(SECTION))
        text = text[:start] + "\n".join(out) + (text[nxt + 1:] if nxt >= 0 else "")
    else:
        text = text.rstrip() + "\n\n" + "\n".join(out)
    open(results, "w").write(text)


if __name__ == "__main__":
    sys.exit(main())
