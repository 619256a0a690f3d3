#!/usr/bin/env bash
# Builds the fuzzers with clang's libFuzzer and runs each for its share of a bounded time: the
# .model front end (half of it, seeded with the examples, the standard library and the front
# end's tests) and each reader of files from outside (test/fuzz/FuzzTargets.h: JSON,
# safetensors, plan files, cluster files, token files with llm.c's headers, fused elementwise
# bodies; the rest of the time shared between them, each seeded with test/fuzz/inputs/<target>).
#
#   scripts/fuzz.sh [SECONDS]       (default 90, all targets together)
#   scripts/fuzz.sh SECONDS TARGET  (one target: frontend, json, safetensors, plan, cluster,
#                                    tokens or elementwise-body)
#
# Exits non-zero when a fuzzer finds a crash, a leak, a timeout, a memory blow-up or a broken
# round trip. A crash's input is left in build-fuzz/artifacts/<target>/; to keep it as a
# regression test, copy it to test/fuzz/inputs/<target>/crash-<what> (the unit tests replay
# every file there: FuzzRegressionTest.cpp).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-90}
only=${2:-}
build="$root/build-fuzz"
formats=(json safetensors plan cluster tokens elementwise-body)
case "$only" in
  "" | frontend) ;;
  *) [[ " ${formats[*]} " == *" $only "* ]] ||
       { echo "fuzz: unknown target '$only' (frontend ${formats[*]})" >&2; exit 2; } ;;
esac

CXX=clang++ CC=clang cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTESSEL_FRONTEND_ONLY=ON -DTESSEL_BUILD_FUZZER=ON > "$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
ninja -C "$build" tessel-fuzz-frontend $(printf 'tessel-fuzz-%s ' "${formats[@]}")

# Runs fuzzer $1 on corpus $2 for $3 seconds; prints its summary; returns its status.
fuzz() {
  local target=$1 corpus=$2 time=$3 max_len=$4
  mkdir -p "$build/artifacts/$target"
  echo "fuzz: $target for ${time}s"
  local status=0
  "$build/test/fuzz/tessel-fuzz-$target" "$corpus" -max_total_time="$time" -timeout=20 \
    -rss_limit_mb=4096 -max_len="$max_len" -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$target/" > "$build/fuzz-$target.log" 2>&1 || status=$?
  grep -E 'ERROR|SUMMARY|DEADLYSIGNAL|fuzz target' "$build/fuzz-$target.log" | head -20 || true
  if [ "$status" -ne 0 ]; then
    tail -40 "$build/fuzz-$target.log"
    echo "fuzz: $target FAILED with status $status (see $build/fuzz-$target.log and" \
         "$build/artifacts/$target/)"
    return 1
  fi
  local runs
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz-$target.log" | grep -o '[0-9]*$')
  echo "fuzz: $target clean, ${runs:-?} executions"
}

failed=0
if [ -z "$only" ] || [ "$only" = frontend ]; then
  corpus="$build/corpus/frontend"
  mkdir -p "$corpus"
  cp "$root"/examples/*.model "$root"/std/*.model "$corpus/"
  find "$root/test/Frontend" -name '*.model' -exec cp {} "$corpus/" \; 2>/dev/null || true
  share=$seconds
  [ -z "$only" ] && share=$(( (seconds + 1) / 2 ))
  fuzz frontend "$corpus" "$share" 65536 || failed=1
fi
targets=("${formats[@]}")
[ -n "$only" ] && [ "$only" != frontend ] && targets=("$only")
[ "$only" = frontend ] && targets=()
if [ ${#targets[@]} -gt 0 ]; then
  rest=$seconds
  [ -z "$only" ] && rest=$(( seconds / 2 ))
  share=$(( rest / ${#targets[@]} ))
  [ "$share" -lt 1 ] && share=1
  for target in "${targets[@]}"; do
    # A working corpus seeded from the kept inputs, so the fuzzer's finds stay out of the tree.
    corpus="$build/corpus/$target"
    mkdir -p "$corpus"
    cp "$root/test/fuzz/inputs/$target"/* "$corpus/"
    # Inputs up to 64 KiB, or the largest seed (a plan with its decode plan), whole.
    largest=$(wc -c "$root/test/fuzz/inputs/$target"/* | sort -n | tail -2 | head -1 | awk '{print $1}')
    fuzz "$target" "$corpus" "$share" $(( largest > 65536 ? largest : 65536 )) || failed=1
  done
fi
if [ "$failed" -ne 0 ]; then
  echo "fuzz: FAILED"
  exit 1
fi
echo "fuzz: clean"
