#!/usr/bin/env bash
# Configures (once) and builds Tessel in build/ with Ninja, in Release mode, using ccache when
# it is installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
fi
start=$(date +%s)
ninja -C "$build"
echo "build: done in $(( $(date +%s) - start ))s"
