#!/usr/bin/env bash
# Installs what Tessel needs, builds it, and runs every test: the lit suite (compiler,
# diagnostics, dialects, examples), the runtime-only build with its unit tests, the GPU window
# prepared and dry-run (scripts/gpu-prepare.sh, scripts/gpu-window.sh --dry-run), and a bounded
# fuzzing run of the front end.
# Usage: scripts/test.sh            (FUZZ_SECONDS=90 by default)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"

failed=0
# What the tokenizer parity test compares with: Hugging Face's tokenizers from the npm registry
# (the test installs it too; here a failed install shows first). Without Node.js and npm the
# script says so and lit reports the test unsupported.
"$root/scripts/install-tokenizer-reference.sh" "$root/build/tokenizer-reference" || failed=1
echo "== lit"
lit_log=$(mktemp)
/usr/lib/llvm-22/bin/lit -sv "$root/build/test" > "$lit_log" 2>&1 || failed=1
grep -E '^(FAIL|XPASS|UNRESOLVED|TIMEOUT):|Failed Tests|^  Tessel ::' "$lit_log" || true
if [ "$failed" -ne 0 ]; then
  # What each failing test printed, so a failure on another machine can be read from the log:
  # its first lines (the commands) and its last (what FileCheck or the test found wrong).
  awk '
    /^\*+ TEST .* FAILED \*+$/ { show = 1; n = 0; print; next }
    show && /^\*+$/ {
      for (i = (n > 100 ? n - 99 : 1); i <= n; i++) {
        if (n > 100 && i == n - 99) print "[... " (n - 100) " lines left out ...]"
        print line[i]
      }
      print; show = 0; next
    }
    show { line[++n] = $0 }
  ' "$lit_log"
fi
count() { { grep -oE "^ *($1) *: *[0-9]+" "$lit_log" || true; } | { grep -oE '[0-9]+$' || true; } | awk '{s+=$1} END {print s+0}'; }
lit_passed=$(count 'Passed')
lit_failed=$(count 'Failed|Unresolved|Timed Out')
if [ "$failed" -ne 0 ] && [ "$lit_failed" -eq 0 ]; then lit_failed=1; fi
# Tests this machine cannot run (lit: UNSUPPORTED), and lit.cfg.py's notes saying why.
lit_skipped=$(count 'Unsupported')
grep -E 'note: skipped' "$lit_log" || true
echo "lit: ${lit_passed} passed, ${lit_failed} failed, ${lit_skipped} skipped"

# The build a GPU machine makes: the runtime, the runner and the unit tests without MLIR, ANTLR
# or OpenBLAS (TESSEL_RUNTIME_ONLY; the products then run in plain loops), for the Hopper GPUs
# the windows are lent (sm_90 only: each further architecture adds its copy of every kernel to
# every binary, and the prepared window must travel in 64 MiB).
echo "== runtime-only build"
runtime_failed=0
runtime_build="$root/build-runtime-only"
{
  [ -f "$runtime_build/build.ninja" ] ||
    cmake -G Ninja -S "$root" -B "$runtime_build" -DCMAKE_BUILD_TYPE=Release \
      -DTESSEL_RUNTIME_ONLY=ON -DCMAKE_DISABLE_FIND_PACKAGE_BLAS=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 > /dev/null
  ninja -C "$runtime_build" > "$runtime_build.log" 2>&1 &&
    "$runtime_build/bin/tessel-unit-tests" --gtest_brief=1 >> "$runtime_build.log" 2>&1
} || { runtime_failed=1; tail -40 "$runtime_build.log"; }
[ "$runtime_failed" -eq 0 ] || failed=1
echo "runtime-only build and unit tests: $([ "$runtime_failed" -eq 0 ] && echo passed || echo failed)"

# The GPU window's preparation and a dry run of it (every GPU step says "skipped: no CUDA
# device"), so neither script rots between the windows that a lent GPU makes possible.
echo "== GPU window (prepared here, dry run)"
window_failed=0
if [ "$runtime_failed" -eq 0 ] && [ -x "$runtime_build/bin/tessel-cuda-tests" ]; then
  {
    "$root/scripts/gpu-prepare.sh" --build "$runtime_build" --out "$runtime_build.gpu-window" &&
      OUT="$runtime_build.gpu-window-out" "$root/scripts/gpu-window.sh" --dry-run \
        --prepared "$runtime_build.gpu-window" \
        --steps env,cuda-tests,train,ranks,bench,memcheck,racecheck
  } > "$runtime_build.gpu-window.log" 2>&1 || { window_failed=1; tail -40 "$runtime_build.gpu-window.log"; }
  grep -E "^(SKIP|FAIL|== done)" "$runtime_build.gpu-window-out/summary.txt" 2> /dev/null || true
else
  echo "skipped: the runtime-only build has no CUDA tests (no CUDA toolkit here)"
fi
[ "$window_failed" -eq 0 ] || failed=1
echo "GPU window dry run: $([ "$window_failed" -eq 0 ] && echo passed || echo failed)"

echo "== fuzz"
fuzz_failed=0
"$root/scripts/fuzz.sh" "${FUZZ_SECONDS:-90}" || fuzz_failed=1
[ "$fuzz_failed" -eq 0 ] || failed=1

total_passed=$(( lit_passed + (1 - fuzz_failed) + (1 - runtime_failed) + (1 - window_failed) ))
total_failed=$(( lit_failed + fuzz_failed + runtime_failed + window_failed ))
echo
echo "${total_passed} passed, ${total_failed} failed$([ "$lit_skipped" -eq 0 ] || echo ", ${lit_skipped} skipped")"
exit "$failed"
