#!/bin/sh
# CPU throughput of Tessel against PyTorch, each at its best configuration; see
# benchmarks/README.md.
#   benchmarks/run.sh                                  # the default models, all cores
#   benchmarks/run.sh --quick                          # smoke test: 2 steps, no search
#   benchmarks/run.sh --model examples/llama_small.model --threads 1
# Runs from the repository root with Debian's python3 (it has torch); needs build/bin/tessel.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
python=${PYTHON:-/usr/bin/python3}
if [ ! -x build/bin/tessel ]; then
  echo "run.sh: build/bin/tessel is missing; build first (cmake -G Ninja -S . -B build && ninja -C build)" >&2
  exit 2
fi
exec "$python" benchmarks/cpu_step.py "$@"
