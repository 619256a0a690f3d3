#!/usr/bin/env python3
"""The step-time model against measured steps on this CPU.

For each layout (one rank; dp 2 × tp 2; a 2-stage 1F1B pipeline) and model it

  1. writes the model with that layout (its `parallel` section replaced; the pipeline runs 4
     micro-batches of a quarter of the batch each) and compiles it,
  2. calibrates this machine as the layout's R ranks see it, just before the run (`tessel
     calibrate --threads 1 --ranks R`: every figure is what each of R ranks, one
     compute thread each, gets while all R run at once, so ranks that outnumber the cores, or
     share them with other work, are measured sharing them; with --gemm-shapes also every GEMM
     shape of the model's plan, `--model MODEL`, instead of the table by the smallest dim),
  3. predicts the step with `tessel estimate MODEL --cluster CPU --json`,
  4. trains it for --steps steps with `--threads R` (R ranks, one thread each) and
     `--profile`, and takes the median `step_time_s` of the steps after the first,
  5. prints predicted, measured and the error (with --kernels, also each kernel's predicted and
     measured time per step: the estimate's slowest stage against the same rank of the run), and
     rewrites the section "Step-time model against measured steps (CPU)" of
     benchmarks/RESULTS.md.

Run it with the build lock held (`flock /tmp/tessel-build.lock benchmarks/predict_cpu.py`) so
that no build shares the cores meanwhile.

usage: benchmarks/predict_cpu.py [--steps N] [--build DIR] [--work DIR] [--kernels]
                                 [--no-results] [--only TEXT] [--gemm-shapes]
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


def profile_of(output, steps, rank):
    """{kernel: seconds per step} of `rank` from the runner's --profile tables (milliseconds; one
    table, or one per group of ranks headed "rank R:" / "ranks R, S:")."""
    kernels, ranks = {}, None
    for line in output.splitlines():
        head = re.match(r"^ranks? ([0-9, ]+):$", line)
        if head:
            ranks = {int(r) for r in head.group(1).split(",")}
            continue
        m = re.match(r"^(\S.*?)\s+([0-9.]+)\s+(\d+)\s+[0-9.]+%$", line)
        if m and m.group(1) != "kernel" and (ranks is None or rank in ranks):
            kernels[m.group(1)] = float(m.group(2)) / 1e3 / steps
    return kernels


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default="/tmp/tessel-predict-cpu")
    ap.add_argument("--kernels", action="store_true", help="compare each kernel's time too")
    ap.add_argument("--no-results", action="store_true", help="do not rewrite RESULTS.md")
    ap.add_argument("--only", metavar="TEXT",
                    help="run only the rows whose model or layout contains TEXT (implies "
                         "--no-results)")
    ap.add_argument("--gemm-shapes", action="store_true",
                    help="calibrate with the GEMM shapes of each model's plan (calibrate "
                         "--model; implies --no-results)")
    args = ap.parse_args()
    tessel = os.path.join(args.build, "bin", "tessel")
    os.makedirs(args.work, exist_ok=True)
    cores = os.cpu_count() or 1
    load_before = os.getloadavg()[0]

    texts = {os.path.splitext(os.path.basename(m))[0]: open(os.path.join(ROOT, m)).read()
             for m in MODELS}
    rows = []
    for index in range(3):
        ranks = layouts("")[index][3]
        for name, text in texts.items():
            layout, section, divisor, _ = layouts(text)[index]
            tag = f"{name}-{layout.split()[0]}{ranks}"
            if args.only and args.only not in f"{name} {layout}":
                continue
            path = os.path.join(args.work, tag + ".model")
            open(path, "w").write(with_layout(text, section, divisor))
            exe = os.path.join(args.work, tag)
            run([tessel, "compile", path, "-o", exe, "-I", ROOT])
            # Calibrated just before the run: what the ranks get of the cores moves with the
            # machine's other work.
            cluster = os.path.join(args.work, tag + ".cluster")
            shapes = ["--model", path, "-I", ROOT] if args.gemm_shapes else []
            run([tessel, "calibrate", "--threads", "1", "--ranks", str(ranks), "-o", cluster]
                + shapes)
            est = json.loads(run([tessel, "estimate", path, "--cluster", cluster, "--json",
                                  "-I", ROOT]).stdout)
            predicted = est["prediction"]["step"]
            metrics = os.path.join(args.work, tag + ".metrics.jsonl")
            if os.path.exists(metrics):
                os.remove(metrics)
            out = run([exe, "--steps", str(args.steps), "--threads", str(ranks),
                       "--eval-every", "0", "--profile", "--metrics", metrics],
                      cwd=ROOT).stdout
            steps = [json.loads(l) for l in open(metrics) if '"step_time_s"' in l]
            measured = statistics.median(float(s["step_time_s"]) for s in steps[1:] or steps)
            err = predicted / measured - 1
            rows.append((name, layout, ranks, predicted, measured, err))
            print(f"{name:14s} {layout:30s} predicted {predicted * 1e3:9.1f} ms  measured "
                  f"{measured * 1e3:9.1f} ms  error {100 * err:+6.1f}%", flush=True)
            if args.kernels:
                got = profile_of(out, args.steps, est["prediction"].get("kernels_rank", 0))
                want = {k: v["seconds"] for k, v in est["prediction"]["kernels"].items()}
                for k in sorted(set(got) | set(want), key=lambda k: -got.get(k, 0)):
                    print(f"    {k:34s} predicted {want.get(k, 0) * 1e3:8.2f} ms  measured "
                          f"{got.get(k, 0) * 1e3:8.2f} ms")
    load_after = os.getloadavg()[0]
    within = sum(abs(r[5]) <= 0.15 for r in rows)
    print(f"{within} of {len(rows)} within 15%")
    if args.no_results or args.only or args.gemm_shapes:
        return
    lscpu = run(["lscpu"]).stdout
    cpu = re.search(r"Model name:\s*(.*)", lscpu).group(1).strip()
    out = [SECTION, "",
           f"{time.strftime('%Y-%m-%d')}, {cpu}, {cores} cores; load average {load_before:.1f} "
           f"before and {load_after:.1f} after (the machine was shared with other builds and "
           "runs outside the build lock: the figures move with the load). Each layout's ranks are "
           "calibrated together (`tessel calibrate --threads 1 --ranks R`) just before each run; "
           "each rank runs one compute thread. Measured: the median `step_time_s` of steps "
           f"2..{args.steps}.", "",
           "Command: `flock /tmp/tessel-build.lock benchmarks/predict_cpu.py --steps %d`" % args.steps, "",
           "| model | layout | ranks | predicted | measured | error |",
           "|---|---|---|---|---|---|"]
    for name, layout, ranks, p, m, e in rows:
        out.append(f"| {name} | {layout} | {ranks} | {p * 1e3:.1f} ms | {m * 1e3:.1f} ms | "
                   f"{100 * e:+.1f}% |")
    out += ["", f"{within} of {len(rows)} within the 15% goal.", "", ""]
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
