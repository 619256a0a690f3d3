#!/usr/bin/env bash
# Compiles the plans scripts/gpu-window.sh trains on a GPU machine, which has no compiler (no
# MLIR, no ANTLR): run it on the build machine, then carry the folder along (it is git-ignored).
#
# Usage: scripts/gpu-plans.sh [tessel-binary] [out-dir]
#        (defaults: build/bin/tessel, gpu-plans in the repository)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tessel=${1:-$root/build/bin/tessel}
out=${2:-$root/gpu-plans}
mkdir -p "$out"
# One-rank fp32 models whose every kernel the CUDA device has (docs/architecture.md lists them).
for model in tiny_gpt llama_small; do
  "$tessel" compile "$root/examples/$model.model" --emit=plan-file -o "$out/$model.plan"
done
# Multi-rank layouts for ranks as threads sharing one GPU (gpu-window.sh trains each against its
# one-rank plan): the equivalence suite's GPT over dp 2, tp 2 with sequence parallelism, dp 2 x
# tp 2 with ZeRO-1, and its eight-layer GPT over a two-stage 1F1B pipeline.
python3 "$root/test/Integration/Equivalence/equivalence.py" --tessel "$tessel" \
  --model "$root/test/Integration/Equivalence/Inputs/gpt.model" --data "$root/test/Integration/Parity/Inputs/text.txt" \
  --workdir "$out" --emit-plans "$out/ranks/gpt" \
  --layout 2,1,0,0,1 --layout 1,2,1,0,1 --layout 2,2,0,1,1 > /dev/null
python3 "$root/test/Integration/Equivalence/equivalence.py" --tessel "$tessel" \
  --model "$root/test/Integration/Equivalence/Inputs/gpt_pipeline.model" \
  --data "$root/test/Integration/Parity/Inputs/text.txt" --workdir "$out" --emit-plans "$out/ranks/gpt_pipeline" \
  --layout 1,1,0,0,2,2,1f1b > /dev/null
# benchmarks/gpu_bench.sh's model: GPT-2 124M as llm.c trains it on one GPU (sequences of 1024
# tokens, 16 per step), one rank, in fp32 and in bf16.
mkdir -p "$out/bench"
sed -e 's/^    seq = 256$/    seq = 1024/' -e 's/^  batch = 4$/  batch = 16/' \
  -e 's/^  micro_batch = 4$/  micro_batch = 16/' "$root/benchmarks/models/gpt2_124m.model" \
  > "$out/bench/gpt2_124m.model"
grep -q "seq = 1024" "$out/bench/gpt2_124m.model" && grep -q "micro_batch = 16" \
  "$out/bench/gpt2_124m.model" || { echo "gpu-plans: could not resize gpt2_124m.model" >&2; exit 1; }
"$tessel" compile "$out/bench/gpt2_124m.model" -I "$root" --emit=plan-file \
  -o "$out/bench/gpt2_124m-fp32.plan"
# The same in bf16 mixed precision (fp32 masters and optimizer state).
sed -e 's/^  precision = fp32/  precision = bf16/' "$out/bench/gpt2_124m.model" > "$out/bench/gpt2_124m_bf16.model"
"$tessel" compile "$out/bench/gpt2_124m_bf16.model" -I "$root" --emit=plan-file \
  -o "$out/bench/gpt2_124m-bf16.plan"
# And with the output head's loss in chunks of 2048 rows rather than the default rule's 256
# (whose products accumulate the head's f32 gradient 64 times a step, at k = 256).
"$tessel" compile "$out/bench/gpt2_124m_bf16.model" -I "$root" --emit=plan-file \
  --loss-chunk 2048 -o "$out/bench/gpt2_124m-bf16-chunk2048.plan"
# The step-time model's prediction of each benchmark plan on each shipped GPU preset, for
# benchmarks/gpu_bench.sh to set beside the measured step (the GPU machine has no compiler).
for precision in fp32 bf16; do
  model="$out/bench/gpt2_124m.model"
  [ "$precision" = bf16 ] && model="$out/bench/gpt2_124m_bf16.model"
  for cluster in h100-sxm h200; do
    "$tessel" estimate "$model" -I "$root" --cluster "$cluster" --json \
      > "$out/bench/gpt2_124m-$precision.$cluster.json"
  done
done
for cluster in h100-sxm h200; do
  "$tessel" estimate "$out/bench/gpt2_124m_bf16.model" -I "$root" --cluster "$cluster" --json \
    --loss-chunk 2048 > "$out/bench/gpt2_124m-bf16-chunk2048.$cluster.json"
done
