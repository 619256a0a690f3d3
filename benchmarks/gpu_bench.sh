#!/usr/bin/env bash
# The GPU benchmarks of the CUDA backend against PyTorch, in one run on one GPU: GPT-2 124M
# training steps (tokens/s, MFU) with Tessel's runner and with PyTorch eager and torch.compile
# (benchmarks/torch_gpu.py), the time of each of Tessel's kernels over a few steps (--profile,
# timed on the GPU with CUDA events), then causal attention forward+backward TFLOP/s, Tessel's kernel
# (tessel-cuda-rate) against F.scaled_dot_product_attention, at sequences 1k-16k and head sizes
# 64 and 128. Figures go to benchmarks/RESULTS.md with the device name.
#
# scripts/gpu-window.sh runs it on the GPU machine with the folder scripts/gpu-prepare.sh made
# as the build directory (its bin/) and its plans/ as TESSEL_GPU_PLANS: the plans
# scripts/gpu-plans.sh compiled on the build machine (gpu-plans/bench/*.plan: the
# model at each precision the compiler accepts, and beside each the step-time model's prediction
# for each GPU preset, which is printed with the measured step: issue 15's GPU check).
#
# Usage: benchmarks/gpu_bench.sh [build-dir]       (default: build-gpu in the repository)
# Environment: TESSEL_GPU_PLANS (default gpu-plans), STEPS (default 20), OUT (logs go there too),
#   BENCH_PLANS (a glob of the plan names to run, default every one: gpt2_124m-bf16 for one),
#   BENCH_TIMEOUT (seconds for each program, default 600)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
plans=${TESSEL_GPU_PLANS:-$root/gpu-plans}/bench
steps=${STEPS:-20}
out=${OUT:-$build.bench}
limit=${BENCH_TIMEOUT:-600}
mkdir -p "$out"
python=${PYTHON:-python3}

if ! "$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_bench: skipped: no CUDA device (PyTorch sees none)"
  exit 1
fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2> /dev/null
# The shipped preset of this GPU, whose predictions scripts/gpu-plans.sh wrote beside the plans.
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1)
case "$gpu" in
  *H200*) preset=h200 ;;
  *H100*) preset=h100-sxm ;;
  *) preset= ;;
esac

# Random GPT-2 token ids (uint16), as many as the steps read, plus the held-out share.
tokens=$out/tokens.bin
"$python" - "$tokens" <<'PY'
import sys, numpy as np
np.random.default_rng(1).integers(0, 50257, 64 * 1024 * 1024, dtype=np.uint16).tofile(sys.argv[1])
PY

echo "== GPT-2 124M training step: Tessel"
for plan in "$plans"/${BENCH_PLANS:-*}.plan; do
  [ -f "$plan" ] || { echo "no plans in $plans (scripts/gpu-plans.sh makes them)"; break; }
  name=$(basename "$plan" .plan)
  rm -f "$out/$name.jsonl"
  if timeout "$limit" "$build/bin/tessel-runner" --plan "$plan" --data "$tokens" --device cuda \
      --steps "$steps" --eval-every 0 --quiet --metrics "$out/$name.jsonl" \
      > "$out/$name.log" 2>&1; then
    "$python" - "$out/$name.jsonl" "$name" "$plans/$name.$preset.json" <<'PY'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_s"' in l]
rows = rows[len(rows) // 4:]  # the first quarter warms up (NVRTC, cuBLASLt heuristics)
tps = statistics.median(r["tokens_per_s"] for r in rows)
step = statistics.median(r["step_time_s"] for r in rows)
extra = {k: rows[-1][k] for k in ("mfu", "device_memory_gib") if k in rows[-1]}
# The step-time model's prediction for this GPU's preset (tessel estimate --cluster), if any.
if os.path.isfile(sys.argv[3]):
    predicted = json.load(open(sys.argv[3]))["prediction"]["step"]
    extra.update(predicted_step_ms=round(1e3 * predicted, 3),
                 prediction_error=f"{100 * (predicted - step) / step:+.1f}%")
print(json.dumps({"peer": "tessel", "plan": sys.argv[2], "tokens_per_s": round(tps, 1),
                  "step_median_ms": round(1e3 * step, 3), "final_loss": rows[-1]["loss"],
                  **extra}))
PY
  else
    echo "$name: the runner failed:"
    tail -5 "$out/$name.log"
  fi
done

# Where a step's time goes: the kernels timed on the GPU (CUDA events around each launch).
for plan in "$plans"/${BENCH_PLANS:-*}.plan; do
  [ -f "$plan" ] || break
  name=$(basename "$plan" .plan)
  echo "== $name: time per kernel over 4 steps (--profile, CUDA events)"
  timeout "$limit" "$build/bin/tessel-runner" --plan "$plan" --data "$tokens" --device cuda \
    --steps 4 --eval-every 0 --quiet --profile > "$out/$name.profile" 2>&1 ||
    echo "$name: the profiled run failed"
  head -25 "$out/$name.profile"
done

echo "== GPT-2 124M training step: PyTorch (bf16 autocast, SDPA, fused AdamW)"
timeout "$limit" "$python" "$root/benchmarks/torch_gpu.py" step --steps "$steps" 2>&1 |
  tee "$out/torch-step.log"
echo "== GPT-2 124M training step: PyTorch in f32 (TF32 allowed), the peer of an f32 plan"
timeout "$limit" "$python" "$root/benchmarks/torch_gpu.py" step --steps "$steps" --dtype f32 \
  --modes eager 2>&1 | tee -a "$out/torch-step.log"

echo "== causal attention forward+backward: Tessel (f32 kernel)"
timeout "$limit" "$build/bin/tessel-cuda-rate" --seq 1024,2048,4096,8192,16384 --batch-heads 16 \
  2>&1 | tee "$out/tessel-attention.log"
echo "== causal attention forward+backward: PyTorch scaled_dot_product_attention"
timeout "$limit" "$python" "$root/benchmarks/torch_gpu.py" attention --batch-heads 16 2>&1 |
  tee "$out/torch-attention.log"
