#!/usr/bin/env bash
# The one command a GPU window runs, over the folder scripts/gpu-prepare.sh made on the build
# machine (carried along, git-ignored). Correctness first, benchmarks last; every step has its
# own timeout and is skipped, saying so, once the time budget is spent; after every step
# everything seen so far is packed into $OUT (summary.txt and logs.tar.gz), so a window cut
# short still returns all it saw.
#
# Steps, in order:
#   env        the GPU, driver and toolkit; cuBLASLt, NVRTC, NCCL and cuDNN found on this
#              machine (each found or not with every place searched) and put on the loader path
#   cuda-tests tessel-cuda-tests once with a JSON report; each test that did not pass again
#              alone with its own timeout; compute-sanitizer memcheck on those
#   train      tiny_gpt and llama_small (fp32) 5 steps on the GPU against the carried CPU runs:
#              losses within 1e-4 relative, step-1 gradients within 1e-4 per tensor; tiny_gpt
#              in bf16 against the CPU's bf16 run within 1e-2 (16-bit rounding, summed in
#              other orders); then greedy generation from each model's step-5 checkpoint with
#              the KV cache against the whole window on the GPU, and (fp32) against the CPU
#   ranks      every multi-rank layout as threads sharing the GPU against the one-rank GPU run
#              of its model (losses within 1e-5)
#   unit       the runtime's unit tests (CPU code, on this machine's compiler and libraries)
#   bench      benchmarks/gpu_bench.sh (Tessel against PyTorch, same card, same call)
#   memcheck   compute-sanitizer memcheck on two training steps of tiny_gpt
#   racecheck  compute-sanitizer racecheck on the kernel tests whose kernels use shared memory
#
# Usage: scripts/gpu-window.sh [--budget SECONDS] [--steps LIST] [--dry-run] [--prepared DIR]
#   --budget S     the whole window's time (default 540: about 9 minutes)
#   --steps LIST   comma-separated steps to run (default: all, in the order above)
#   --dry-run      run without a GPU (as CI does): every GPU step reports "skipped: no CUDA
#                  device" and the summary is still written
#   --prepared DIR the folder of scripts/gpu-prepare.sh (default: gpu-window in the repository)
# Environment: OUT (where summary.txt and logs.tar.gz go; default /tmp/gpu-window-out)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prepared=$root/gpu-window
budget=540
only=""
dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) budget=$2; shift 2 ;;
    --steps) only=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --prepared) prepared=$2; shift 2 ;;
    -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-window: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
out=${OUT:-/tmp/gpu-window-out}
mkdir -p "$out"
work=$(mktemp -d /tmp/gpu-window.XXXXXX)
logs=$work/logs
mkdir -p "$logs"
summary=$out/summary.txt
: > "$summary"
started=$(date +%s)
data=$root/test/Integration/Parity/Inputs/text.txt
failures=0

note() { echo "$*" | tee -a "$summary"; }
elapsed() { echo $(($(date +%s) - started)); }
left() { echo $((budget - $(elapsed))); }
# Everything under logs/ into one archive beside summary.txt: at most two files come back.
# Data the steps make (token files, dumps, checkpoints) stays behind: a file that comes back
# may be 16 MiB at most.
pack() { tar czf "$out/logs.tar.gz.part" -C "$work" --exclude='*.bin' --exclude='*.safetensors' \
    --exclude='ckpt' logs 2> /dev/null && mv "$out/logs.tar.gz.part" "$out/logs.tar.gz"; }
fail() { note "FAIL $*"; failures=$((failures + 1)); }
# bounded SECONDS CMD...: CMD under a timeout no longer than the budget's rest.
bounded() {
  local limit=$1; shift
  local rest; rest=$(left)
  [ "$rest" -lt "$limit" ] && limit=$rest
  [ "$limit" -lt 5 ] && { echo "(no time left for: $*)"; return 124; }
  timeout -k 10 "$limit" "$@"
}
wanted() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }
# run_step NAME MIN_SECONDS: whether to run the step (enough budget, asked for), said in the summary.
run_step() {
  wanted "$1" || return 1
  if [ "$(left)" -lt "$2" ]; then
    note "SKIP $1: out of time ($(left) s left, the step needs at least $2)"
    return 1
  fi
  note "== $1 (at $(elapsed) s)"
  return 0
}

note "gpu-window: $(cat "$prepared/MANIFEST" 2> /dev/null | head -1 || echo "no MANIFEST")"
# The binaries and their libraries travel packed (binaries.tar.xz: a third of their size); they
# are unpacked into the work folder, never into the carried one, which stays small enough to
# carry again.
binaries=$prepared
if [ -f "$prepared/binaries.tar.xz" ]; then
  binaries=$work/binaries
  mkdir -p "$binaries"
  tar -C "$binaries" -xJf "$prepared/binaries.tar.xz" ||
    { note "FAIL $prepared/binaries.tar.xz does not unpack"; pack; exit 1; }
fi
bin=$binaries/bin
if [ ! -x "$bin/tessel-runner" ]; then
  note "FAIL no prepared folder at $prepared (make it with scripts/gpu-prepare.sh and carry it)"
  pack
  exit 1
fi
export LD_LIBRARY_PATH=$binaries/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# --- env -------------------------------------------------------------------------------------
gpu=0
if run_step env 5; then
  {
    date -u
    uname -a
    nvidia-smi 2>&1 || echo "nvidia-smi: none"
    /usr/local/cuda/bin/nvcc --version 2>&1 || nvcc --version 2>&1 || echo "nvcc: none"
    command -v compute-sanitizer ncu python3 2>&1
    python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda, torch.cuda.is_available())" 2>&1
  } > "$logs/env.txt" 2>&1
  device=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2> /dev/null | head -1)
  if [ "$dry" = 0 ] && [ -n "$device" ]; then
    gpu=1
    note "device: $device"
    note "toolkit: $( (/usr/local/cuda/bin/nvcc --version || nvcc --version) 2> /dev/null | grep -oE 'V[0-9.]+' | head -1)"
  else
    note "device: none (skipped: no CUDA device${device:+; --dry-run})"
  fi
  # Where this machine keeps each library the CUDA device opens: the loader's cache, the
  # toolkit, and the Python environment's nvidia-* packages (PyTorch's). The first folder that
  # holds one goes on the loader path.
  py_nvidia=$(python3 -c "import nvidia, os; print(' '.join(sorted(set(p for p in nvidia.__path__))))" 2> /dev/null)
  places=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib
    /usr/lib/x86_64-linux-gnu)
  for p in $py_nvidia; do
    for d in "$p"/*/lib "$p"/cu*/lib; do [ -d "$d" ] && places+=("$d"); done
  done
  for lib in libcublasLt.so.13 libnvrtc.so.13 libnccl.so.2 libcudnn.so.9; do
    found=""
    cached=$(ldconfig -p 2> /dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}')
    if [ -n "$cached" ]; then
      found=$cached
    else
      for d in "${places[@]}"; do
        if [ -e "$d/$lib" ]; then found=$d/$lib; break; fi
      done
    fi
    if [ -n "$found" ]; then
      note "library $lib: $found"
      dir=$(dirname "$found")
      case ":$LD_LIBRARY_PATH:" in *":$dir:"*) ;; *) LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$dir ;; esac
    else
      note "library $lib: not found (searched the loader cache and ${places[*]})"
      [ "$gpu" = 1 ] && fail "env: $lib not found"
    fi
  done
  export LD_LIBRARY_PATH
  note "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  pack
fi

gpu_step() { # NAME MIN: a step that needs the GPU
  wanted "$1" || return 1
  if [ "$gpu" != 1 ]; then
    note "SKIP $1: skipped: no CUDA device"
    return 1
  fi
  run_step "$@"
}

# --- cuda-tests ------------------------------------------------------------------------------
if gpu_step cuda-tests 30; then
  bounded 180 "$bin/tessel-cuda-tests" --gtest_output="json:$logs/cuda-tests.json" \
    > "$logs/cuda-tests.log" 2>&1
  rc=$?
  note "tessel-cuda-tests: exit $rc; $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$logs/cuda-tests.log" | tr '\n' ' ')"
  # The tests to run again alone: those the report says did not pass, or every test where the
  # process died before writing it (a sticky CUDA error or a crash ends the whole binary).
  "$bin/tessel-cuda-tests" --gtest_list_tests 2> /dev/null |
    awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}' > "$work/all-tests"
  python3 - "$logs/cuda-tests.json" "$work/all-tests" > "$work/rerun" <<'PY'
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except Exception:
    print("\n".join(l.strip() for l in open(sys.argv[2]) if l.strip()))
    sys.exit(0)
for suite in report.get("testsuites", []):
    for t in suite.get("testsuite", []):
        name = suite["name"] + "." + t["name"]
        if t.get("failures") or t.get("result") not in ("COMPLETED", "SKIPPED"):
            print(name)
        elif t.get("result") == "SKIPPED" or t.get("skipped"):
            print("#skipped " + name)
PY
  grep "^#skipped" "$work/rerun" | sed 's/^#skipped /skipped: /' | tee -a "$summary"
  sed -i '/^#/d' "$work/rerun"
  : > "$work/still-failing"
  while read -r t; do
    [ -n "$t" ] || continue
    if bounded 30 "$bin/tessel-cuda-tests" --gtest_filter="$t" > "$logs/alone-$t.log" 2>&1; then
      note "alone: $t passed (it failed only beside the others)"
    else
      note "alone: $t FAILED:"
      grep -A3 -m3 -E 'Failure|error|rror:' "$logs/alone-$t.log" | cut -c1-300 | sed 's/^/    /' |
        tee -a "$summary"
      echo "$t" >> "$work/still-failing"
    fi
    pack
  done < "$work/rerun"
  n=$(wc -l < "$work/still-failing")
  [ "$n" -gt 0 ] && fail "cuda-tests: $n tests fail alone"
  if [ "$n" -gt 0 ] && command -v compute-sanitizer > /dev/null; then
    while read -r t; do
      bounded 60 compute-sanitizer --tool memcheck --print-limit 20 \
        "$bin/tessel-cuda-tests" --gtest_filter="$t" > "$logs/memcheck-$t.log" 2>&1
      note "memcheck $t: $(grep -m1 -E 'ERROR SUMMARY' "$logs/memcheck-$t.log")"
      pack
    done < "$work/still-failing"
  fi
  [ "$rc" -eq 0 ] && [ "$n" -eq 0 ] && note "cuda-tests: all passed"
  pack
fi

# --- train -----------------------------------------------------------------------------------
runner() { # NAME PLAN DEVICE DIR [extra]: 5 steps, metrics in DIR/metrics.jsonl
  local name=$1 plan=$2 dev=$3 dir=$4; shift 4
  mkdir -p "$dir"
  TESSEL_NVRTC_CACHE=$work/nvrtc-cache bounded 120 "$bin/tessel-runner" --plan "$plan" \
    --data "$data" --steps 5 --seed 1 --eval-every 0 --quiet --device "$dev" \
    --checkpoint-dir "$dir/ckpt" --metrics "$dir/metrics.jsonl" "$@" > "$dir/run.log" 2>&1
}
# Generation from the step-5 checkpoint, greedy (KvDecode.h): the decode plan on the GPU
# (paged_attention's split-K kernel, rope at positions) draws the tokens the whole-window
# recomputation draws on the GPU, and (fp32) those the CPU draws; 3 prompts at once too.
decode_check() { # NAME PLAN DIR
  local name=$1 plan=$2 dir=$3 d
  local gen=("$bin/tessel-runner" --plan "$plan" --generate --checkpoint "$dir/ckpt" --top-k 1 --quiet)
  printf 'The \nOnce upon a time\nx\n' > "$dir/prompts.txt"
  for d in cuda-cached:cuda: cuda-full:cuda:--no-kv-cache cpu-cached:cpu: ; do
    local tag=${d%%:*} rest=${d#*:}
    local dev=${rest%%:*} extra=${rest#*:}
    TESSEL_NVRTC_CACHE=$work/nvrtc-cache bounded 60 "${gen[@]}" --device "$dev" --prompt "The " \
      --tokens 40 $extra > "$dir/gen-$tag.txt" 2> "$dir/gen-$tag.err" ||
      { fail "decode $name $tag: $(tail -2 "$dir/gen-$tag.err" | tr '\n' ' ' | cut -c1-300)"; return; }
  done
  TESSEL_NVRTC_CACHE=$work/nvrtc-cache bounded 60 "${gen[@]}" --device cuda \
    --prompt-file "$dir/prompts.txt" --tokens 20 > "$dir/gen-batch.txt" 2> "$dir/gen-batch.err" ||
    fail "decode $name batch: $(tail -2 "$dir/gen-batch.err" | tr '\n' ' ' | cut -c1-300)"
  cmp -s "$dir/gen-cuda-cached.txt" "$dir/gen-cuda-full.txt" &&
    note "decode $name: the KV cache draws the whole window's 40 tokens on the GPU" ||
    fail "decode $name: the KV cache and the whole window draw other tokens on the GPU"
  if [ "$name" != tiny_gpt_bf16 ]; then
    cmp -s "$dir/gen-cuda-cached.txt" "$dir/gen-cpu-cached.txt" &&
      note "decode $name: the GPU draws the CPU's tokens" ||
      fail "decode $name: the GPU and the CPU draw other tokens (a near tie, or a kernel)"
  fi
}
if gpu_step train 20; then
  cp -r "$prepared/nvrtc-cache" "$work/nvrtc-cache" 2> /dev/null
  for name in tiny_gpt llama_small tiny_gpt_bf16; do
    plan=$prepared/plans/$name.plan
    [ -f "$plan" ] || { fail "train: no plan $name"; continue; }
    dir=$logs/train-$name
    if ! runner "$name" "$plan" cuda "$dir" --dump-dir "$dir/dump"; then
      fail "train $name: the runner failed: $(tail -3 "$dir/run.log" | tr '\n' ' ' | cut -c1-300)"
      pack
      continue
    fi
    note "train $name: $(grep -h 'fused elementwise calls' "$dir/run.log" | head -1)"
    grep -q "interpreter kernel" "$dir/run.log" && fail "train $name: fused kernels fell back to the interpreter"
    tol=1e-4
    [ "$name" = tiny_gpt_bf16 ] && tol=1e-2
    python3 "$root/test/Integration/Runtime/Inputs/close_losses.py" "$dir/metrics.jsonl" \
      "$prepared/ref/$name/metrics.jsonl" --tol "$tol" --steps 5 > "$dir/losses.txt" 2>&1 ||
      fail "train $name: losses differ from the CPU beyond $tol"
    note "train $name losses: $(tail -1 "$dir/losses.txt")"
    python3 "$root/test/Integration/Runtime/Inputs/compare_dumps.py" "$dir/dump" "$prepared/ref/$name/dump" \
      --tol "$tol" > "$dir/grads.txt" 2>&1 || fail "train $name: step-1 gradients differ beyond $tol"
    note "train $name gradients: $(tail -1 "$dir/grads.txt")"
    decode_check "$name" "$plan" "$dir"
    rm -rf "$dir/ckpt" "$dir/dump"
    pack
  done
fi

# --- ranks -----------------------------------------------------------------------------------
if gpu_step ranks 20; then
  for mdir in "$prepared"/plans/ranks/*/; do
    model=$(basename "$mdir")
    [ -f "$mdir/one-rank.plan" ] || continue
    runner "$model-one-rank" "$mdir/one-rank.plan" cuda "$logs/ranks-$model-one-rank" ||
      { fail "ranks $model one-rank failed: $(tail -2 "$logs/ranks-$model-one-rank/run.log" | tr '\n' ' ')"; continue; }
    for plan in "$mdir"/*.plan; do
      name=$(basename "$plan" .plan)
      [ "$name" = one-rank ] && continue
      dir=$logs/ranks-$model-$name
      if ! runner "$model-$name" "$plan" cuda "$dir"; then
        fail "ranks $model $name failed: $(tail -2 "$dir/run.log" | tr '\n' ' ' | cut -c1-300)"
        continue
      fi
      python3 "$root/test/Integration/Runtime/Inputs/close_losses.py" "$dir/metrics.jsonl" \
        "$logs/ranks-$model-one-rank/metrics.jsonl" --tol 1e-5 --steps 5 > "$dir/losses.txt" 2>&1 ||
        fail "ranks $model $name: losses differ from one rank beyond 1e-5"
      note "ranks $model $name: $(tail -1 "$dir/losses.txt")"
      rm -rf "$dir/ckpt"
      pack
    done
    rm -rf "$logs/ranks-$model-one-rank/ckpt"
  done
fi

# --- unit ------------------------------------------------------------------------------------
if run_step unit 20; then
  bounded 120 "$bin/tessel-unit-tests" --gtest_brief=1 > "$logs/unit-tests.log" 2>&1 ||
    fail "unit: tessel-unit-tests failed (exit $?)"
  note "unit: $(grep -E '^\[  (PASSED|FAILED) ' "$logs/unit-tests.log" | tr '\n' ' ')"
  pack
fi

# --- bench -----------------------------------------------------------------------------------
if gpu_step bench 60; then
  # The unpacked binaries are the build folder gpu_bench.sh expects (its bin/); the plans are
  # the prepared folder's.
  OUT=$logs/bench STEPS=${BENCH_STEPS:-8} TESSEL_GPU_PLANS=$prepared/plans \
    BENCH_PLANS=${BENCH_PLANS:-*} BENCH_TIMEOUT=${BENCH_TIMEOUT:-150} \
    bounded 300 "$root/benchmarks/gpu_bench.sh" "$binaries" > "$logs/bench.log" 2>&1 ||
    fail "bench: gpu_bench.sh failed or ran out of time (exit $?)"
  grep -E '^\{' "$logs/bench.log" | tee -a "$summary" > /dev/null
  pack
fi

# --- memcheck --------------------------------------------------------------------------------
if gpu_step memcheck 40 && command -v compute-sanitizer > /dev/null; then
  mkdir -p "$logs/memcheck-train"
  TESSEL_NVRTC_CACHE=$work/nvrtc-cache bounded 150 compute-sanitizer --tool memcheck \
    --print-limit 20 "$bin/tessel-runner" --plan "$prepared/plans/tiny_gpt.plan" --data "$data" \
    --steps 2 --seed 1 --eval-every 0 --quiet --device cuda \
    --checkpoint-dir "$logs/memcheck-train/ckpt" > "$logs/memcheck-train/log.txt" 2>&1
  note "memcheck tiny_gpt 2 steps: $(grep -m1 'ERROR SUMMARY' "$logs/memcheck-train/log.txt" || echo 'no summary (timed out?)')"
  grep -q "ERROR SUMMARY: 0 errors" "$logs/memcheck-train/log.txt" || fail "memcheck: a training step"
  rm -rf "$logs/memcheck-train/ckpt"
  pack
fi

# --- racecheck -------------------------------------------------------------------------------
if gpu_step racecheck 40 && command -v compute-sanitizer > /dev/null; then
  filter='*Attention*:*Norm*:*Softmax*:*Reduce*:*CrossEntropy*:*TopK*'
  bounded 200 compute-sanitizer --tool racecheck --print-limit 20 "$bin/tessel-cuda-tests" \
    --gtest_filter="$filter" > "$logs/racecheck.log" 2>&1
  note "racecheck ($filter): $(grep -m1 'ERROR SUMMARY\|RACECHECK SUMMARY' "$logs/racecheck.log" || echo 'no summary (timed out?)')"
  grep -qE "(ERROR|RACECHECK) SUMMARY: 0 (errors|hazards)" "$logs/racecheck.log" || fail "racecheck"
  pack
fi

note "== done at $(elapsed) s of $budget: $failures failures"
pack
rm -rf "$work"
[ "$failures" -eq 0 ]
