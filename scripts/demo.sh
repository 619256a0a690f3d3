#!/usr/bin/env bash
# The main job: installs what Tessel needs, builds it, checks every example model and prints
# the graph IR of the tiny GPT.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
for model in examples/*.model; do
  build/bin/tessel check "$model"
done
echo
echo "== graph IR of examples/tiny_gpt.model (first 30 lines; all of it with:"
echo "   build/bin/tessel compile examples/tiny_gpt.model --emit=graph)"
build/bin/tessel compile examples/tiny_gpt.model --emit=graph | head -30
