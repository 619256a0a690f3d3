#!/usr/bin/env bash
# Draws the memory pictures docs/ and README.md show, from the examples, with the tessel that
# scripts/build.sh built (build/bin/tessel, or TESSEL):
#   docs/memory-gpt2-small.svg             GPT-2 small (bf16, dp 8, ZeRO-1), rank 0, no recompute
#   docs/memory-gpt2-small-selective.svg   the same with recompute = selective
#   docs/memory-1f1b-stage0.svg            tiny_gpt_pipeline as 1F1B over 4 stages, stage 0
# Each is tessel estimate --memory-svg: the prediction, which the runner's --memory-trace
# measures to the byte (test/Integration/Runtime/memory-trace.test).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tessel=${TESSEL:-$root/build/bin/tessel}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$root"

"$tessel" estimate examples/gpt2_small.model --rank 0 \
  --memory-svg docs/memory-gpt2-small.svg > /dev/null
sed -e 's/^  overlap = true .*$/&\n  recompute = selective/' examples/gpt2_small.model \
  > "$work/gpt2_small.model"
grep -q "recompute = selective" "$work/gpt2_small.model"
"$tessel" estimate "$work/gpt2_small.model" --rank 0 \
  --memory-svg docs/memory-gpt2-small-selective.svg > /dev/null
sed -e 's/schedule = interleaved, virtual = 2, microbatches = 8/schedule = 1f1b, microbatches = 8/' \
  examples/tiny_gpt_pipeline.model > "$work/tiny_gpt_pipeline.model"
grep -q "schedule = 1f1b" "$work/tiny_gpt_pipeline.model"
"$tessel" estimate "$work/tiny_gpt_pipeline.model" --rank 0 \
  --memory-svg docs/memory-1f1b-stage0.svg > /dev/null
