#!/usr/bin/env bash
# The main job: installs what Tessel needs, builds it, compiles the tiny GPT into an
# executable, trains it on the CPU on Debian's fortune-cookie collection (or on the text file
# or directory given as the first argument), then prints a sample from the trained model.
# Usage: scripts/demo.sh [TEXT_FILE_OR_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"

data_args=()
if [ $# -gt 0 ]; then
  data_args=(--data "$1")
fi

echo "== compiling examples/tiny_gpt.model"
build/bin/tessel compile examples/tiny_gpt.model -o build/tiny_gpt
echo "== training (checkpoints in runs/tiny_gpt; ./build/tiny_gpt --help lists the options)"
rm -rf runs/tiny_gpt
build/tiny_gpt --metrics runs/tiny_gpt.metrics.jsonl "${data_args[@]}"
echo
echo "== a sample from the trained model"
build/tiny_gpt --generate --checkpoint runs/tiny_gpt --tokens 400 --prompt "The "
