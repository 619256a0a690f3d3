#!/usr/bin/env bash
# Builds the front-end fuzzer with clang's libFuzzer and runs it for a bounded time, seeded
# with the examples and the standard library. Usage: scripts/fuzz.sh [seconds] (default 90).
# Exits non-zero when the fuzzer finds a crash, a leak, a timeout or a memory blow-up.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-90}
build="$root/build-fuzz"

CXX=clang++ CC=clang cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTESSEL_FRONTEND_ONLY=ON -DTESSEL_BUILD_FUZZER=ON > "$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
ninja -C "$build" tessel-fuzz-frontend

corpus="$build/corpus"
mkdir -p "$corpus" "$build/artifacts"
cp "$root"/examples/*.model "$root"/std/*.model "$corpus/"
find "$root/test/Frontend" -name '*.model' -exec cp {} "$corpus/" \; 2>/dev/null || true

echo "fuzz: running the front end for ${seconds}s"
status=0
"$build/test/fuzz/tessel-fuzz-frontend" "$corpus" -max_total_time="$seconds" -timeout=20 \
  -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="$build/artifacts/" > "$build/fuzz.log" 2>&1 || status=$?
grep -E 'ERROR|SUMMARY|DEADLYSIGNAL' "$build/fuzz.log" | head -20 || true
if [ "$status" -ne 0 ]; then
  tail -40 "$build/fuzz.log"
  echo "fuzz: FAILED with status $status (see $build/fuzz.log and $build/artifacts/)"
  exit 1
fi
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz.log" | grep -o '[0-9]*$')
echo "fuzz: clean, ${runs:-?} executions"
