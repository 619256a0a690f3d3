#!/usr/bin/env bash
# Compiles the plans scripts/gpu-check.sh trains on a GPU machine, which has no compiler (no
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
