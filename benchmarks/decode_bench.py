#!/usr/bin/python3
"""Generation speed: Tessel's KV-cache decoding against its whole-window recomputation and
against a PyTorch decode loop with a KV cache (benchmarks/torch_decode.py), in one run.

For each model: B prompts of --prompt random tokens, --tokens new tokens each, greedy, at
batch 1 and batch 8. Tessel compiles the model (its context raised to hold prompt and
generation) with decode programs for batches 1 and 8 and generates from its initial weights
(a checkpoint of no steps); PyTorch runs the same architecture and sizes at each of its thread
settings, the fastest counted. Reported: the time until every prompt has its first token,
decode tokens/s after it, the ratios, and Tessel's peak KV cache against the formula
2 x layers x kv_heads x head x 4 bytes per token held.

Usage: benchmarks/decode_bench.py [--quick] [--models gpt2,llama] [--threads N]
"""
import argparse
import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name: (spec, context, architecture for torch_decode.py)
MODELS = {
    "gpt2": ("benchmarks/models/gpt2_124m.model", 1024,
             dict(arch="gpt", layers=12, embed=768, heads=12, ffn=3072, vocab=50304)),
    "llama": ("benchmarks/models/llama_8x512.model", 512,
              dict(arch="llama", layers=8, embed=512, heads=8, kv_heads=4, ffn=1408, vocab=32000)),
}

STATS = re.compile(r"generated (\d+) tokens for (\d+) prompts? \((\d+) prompt tokens\): first token "
                   r"after ([0-9.]+) s; prefill ([0-9.]+) tokens/s, decode ([0-9.]+) tokens/s over "
                   r"(\d+) steps; KV cache ([0-9.]+) MiB at its peak")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"decode_bench: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return r


def ffn_of(spec):
    text = open(os.path.join(ROOT, spec)).read()
    m = re.search(r"^\s*ffn\s*=\s*(\d+)\s*$", text, re.M)
    return int(m.group(1)) if m else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="16 new tokens, 2 prompts: a smoke test")
    p.add_argument("--models", default="gpt2,llama")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--prompt", type=int, default=256)
    p.add_argument("--tokens", type=int, default=256)
    a = p.parse_args()
    batches = [1, 2] if a.quick else [1, 8]
    tokens = 16 if a.quick else a.tokens
    tessel = os.path.join(ROOT, "build/bin/tessel")
    work = tempfile.mkdtemp(prefix="decode-bench.")
    rows = []
    for name in a.models.split(","):
        spec, context, arch = MODELS[name]
        text = open(os.path.join(ROOT, spec)).read()
        model = os.path.join(work, name + ".model")
        with open(model, "w") as f:
            f.write(re.sub(r"^(\s*)seq = \d+", rf"\g<1>seq = {context}", text, count=1, flags=re.M))
        exe = os.path.join(work, name)
        run([tessel, "compile", model, "-I", ROOT, "-o", exe, "--decode-batches",
             ",".join(map(str, batches)), "--prefill", str(a.prompt)])
        rnd = random.Random(1)
        data = os.path.join(work, name + ".bin")
        with open(data, "wb") as f:
            f.write(struct.pack("<65536H", *[rnd.randrange(arch["vocab"]) for _ in range(65536)]))
        ck = os.path.join(work, name + "-ck")
        run([exe, "--steps", "0", "--data", data, "--checkpoint-dir", ck, "--quiet"])
        prompts = [" ".join(str(rnd.randrange(arch["vocab"])) for _ in range(a.prompt))
                   for _ in range(max(batches))]
        # Whole-window recomputation, batch 1: the time of 4 tokens less that of 1, per token.
        one = os.path.join(work, name + ".1.txt")
        open(one, "w").write(prompts[0] + "\n")
        base = [exe, "--generate", "--checkpoint", ck, "--top-k", "1", "--threads", str(a.threads)]
        wall = {}
        # A first run reads the checkpoint into the page cache, which the timed runs then share.
        run(base + ["--no-kv-cache", "--prompt", prompts[0], "--tokens", "1"])
        for n in (1, 4):
            t0 = time.perf_counter()
            run(base + ["--no-kv-cache", "--prompt", prompts[0], "--tokens", str(n)])
            wall[n] = time.perf_counter() - t0
        full_rate = 3 / max(wall[4] - wall[1], 1e-9)
        for b in batches:
            pf = os.path.join(work, f"{name}.{b}.txt")
            open(pf, "w").write("\n".join(prompts[:b]) + "\n")
            r = run(base + ["--prompt-file", pf, "--batch", str(b), "--tokens", str(tokens)])
            m = STATS.search(r.stderr)
            if not m:
                sys.exit(f"decode_bench: no statistics line in:\n{r.stderr[-2000:]}")
            new, _, prompt_tokens, _, prefill_rate, decode_rate, _, cache_mib = m.groups()
            first_all = int(prompt_tokens) / float(prefill_rate)
            best = None
            for threads in sorted({1, a.threads}):
                t = run([sys.executable, os.path.join(ROOT, "benchmarks/torch_decode.py"),
                         "--context", str(a.prompt + tokens), "--batch", str(b), "--prompt",
                         str(a.prompt), "--tokens", str(tokens), "--threads", str(threads)] +
                        [f"--{k.replace('_', '-')}={v}" for k, v in arch.items()])
                j = json.loads(t.stdout.strip().splitlines()[-1])
                if not best or j["decode_tokens_per_s"] > best["decode_tokens_per_s"]:
                    best = j
            per_token = 2 * arch["layers"] * arch.get("kv_heads", arch["heads"]) * \
                (arch["embed"] // arch["heads"]) * 4
            formula_mib = per_token * b * (a.prompt + tokens) / 2**20
            rows.append((name, b, first_all, float(decode_rate), full_rate if b == 1 else None,
                         best, float(cache_mib), formula_mib))
    print(f"| model | batch | Tessel first tokens (s) | PyTorch first tokens (s) | Tessel decode tok/s "
          f"| whole-window tok/s | PyTorch decode tok/s (threads) | vs whole window | vs PyTorch "
          f"| KV peak MiB / formula |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, b, first, rate, full, best, cache, formula in rows:
        print(f"| {name} | {b} | {first:.2f} | {best['first_token_s']:.2f} | {rate:.1f} | "
              f"{'%.2f' % full if full else '-'} | {best['decode_tokens_per_s']:.1f} "
              f"({best['threads']}) | {'%.0f×' % (rate / full) if full else '-'} | "
              f"{rate / best['decode_tokens_per_s']:.2f} | {cache:.1f} / {formula:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
