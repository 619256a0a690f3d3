#!/usr/bin/env bash
# The main job: installs what Tessel needs, builds it, compiles the tiny GPT into an
# executable, trains it on the CPU on Debian's fortune-cookie collection (or on the text file
# or directory given as an argument), then prints a sample from the trained model.
#
# Usage: scripts/demo.sh [--short] [TEXT_FILE_OR_DIR]
#   --short   train 50 steps instead of the model's 600 (what CI runs; also DEMO_STEPS=N)
# Fails (nonzero exit) when any stage fails, so CI can prove the job on a clean clone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

steps=${DEMO_STEPS:-}
data_args=()
for arg in "$@"; do
  case "$arg" in
    --short) steps=${steps:-50} ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "demo.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    *) data_args=(--data "$arg") ;;
  esac
done
step_args=()
[ -n "$steps" ] && step_args=(--steps "$steps" --eval-every "$steps")

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"

start=$(date +%s)
echo "== compiling examples/tiny_gpt.model"
build/bin/tessel compile examples/tiny_gpt.model -o build/tiny_gpt
echo "== training (checkpoints in runs/tiny_gpt; ./build/tiny_gpt --help lists the options)"
rm -rf runs/tiny_gpt runs/tiny_gpt.metrics.jsonl
build/tiny_gpt --metrics runs/tiny_gpt.metrics.jsonl "${step_args[@]}" "${data_args[@]}"
echo
echo "== a sample from the trained model"
build/tiny_gpt --generate --checkpoint runs/tiny_gpt --tokens 400 --prompt "The " |
  tee runs/tiny_gpt.sample.txt
# The job proves itself: a checkpoint, and a sample of the asked length (the prompt, 400
# sampled bytes and a newline).
[ -f runs/tiny_gpt/latest ] || { echo "demo.sh: no checkpoint was written" >&2; exit 1; }
sample_bytes=$(wc -c < runs/tiny_gpt.sample.txt)
[ "$sample_bytes" -eq 405 ] ||
  { echo "demo.sh: the sample has $sample_bytes bytes, not 405" >&2; exit 1; }
echo "demo: done in $(( $(date +%s) - start ))s after the build"
