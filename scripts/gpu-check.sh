#!/usr/bin/env bash
# The one command a session with a GPU runs: configures the runtime-only build with the CUDA
# backend (no MLIR, ANTLR or OpenBLAS needed), builds it, runs the CUDA tests and the unit
# tests, trains the plans compiled on the build machine (scripts/gpu-plans.sh) 5 steps on the
# GPU (the fused elementwise kernels compiled with NVRTC, which must not fall back to the
# interpreter) and on the CPU and compares their losses (as test/Runtime/cuda-train.test does
# where the compiler and a GPU are on one machine), and prints what passed, failed and was
# skipped. On a GPU machine a skipped CUDA test means the GPU could not be used, so it fails
# the check too. Then the multi-rank layouts (gpu-plans/ranks/<model>/*.plan) run as threads
# sharing the GPU, each 5 steps against its model's one-rank plan on the same GPU (the
# equivalence suite's comparison, test/Equivalence, with the GPU's tolerance). The NCCL test
# between processes needs two GPUs and is skipped, saying so, on one.
# Last it prints the CUDA kernels' rates (tessel-cuda-rate, tessel-cuda-fused-rate), for
# benchmarks/RESULTS.md.
#
# Usage: scripts/gpu-check.sh [build-dir]        (default: build-gpu in the repository)
# Environment:
#   TESSEL_GPU_PLANS  the folder of plan files to train (default: gpu-plans in the repository,
#                     made by scripts/gpu-plans.sh); without one the training check is skipped
#                     and the check fails.
#   GTEST_SOURCE_DIR  GoogleTest sources to build where none is installed (e.g. a copy of the
#                     build machine's /usr/src/googletest carried along); /usr/src/googletest
#                     is used when it exists.
#   OUT               if set, the logs and the tests' JSON reports are also written there.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
out=${OUT:-}

echo "== GPU"
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader ||
    echo "nvidia-smi failed"
else
  echo "nvidia-smi not found"
fi

# NCCL, where the toolkit has none: PyTorch's (the nvidia/nccl folder of its Python packages).
if [ -z "${NCCL_ROOT:-}" ]; then
  nccl_py=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])" 2> /dev/null)
  if [ -n "$nccl_py" ] && [ -f "$nccl_py/include/nccl.h" ]; then
    export NCCL_ROOT=$nccl_py
  fi
fi

echo "== configure ($build)"
gtest_args=()
gtest_src=${GTEST_SOURCE_DIR:-}
[ -z "$gtest_src" ] && [ -f /usr/src/googletest/CMakeLists.txt ] && gtest_src=/usr/src/googletest
[ -n "$gtest_src" ] && gtest_args=(-DTESSEL_GTEST_SOURCE_DIR="$gtest_src")
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
if ! cmake "${generator[@]}" -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DTESSEL_RUNTIME_ONLY=ON -DCMAKE_DISABLE_FIND_PACKAGE_BLAS=ON "${gtest_args[@]}" \
    > "$build.configure.log" 2>&1; then
  tail -40 "$build.configure.log"
  echo "gpu-check: configure failed"
  exit 1
fi
grep -E "^-- Tessel" "$build.configure.log"
if ! grep -q "CUDA TRUE" "$build.configure.log"; then
  echo "gpu-check: CMake found no CUDA toolkit (set CUDAToolkit_ROOT); nothing to check"
  exit 1
fi
if ! grep -q "GTest TRUE" "$build.configure.log"; then
  echo "gpu-check: no GoogleTest (install it, or set GTEST_SOURCE_DIR to a copy of its sources)"
  exit 1
fi

echo "== build"
if ! cmake --build "$build" --target tessel-cuda-tests tessel-unit-tests tessel-runner tessel-cuda-rate \
    tessel-cuda-fused-rate \
    > "$build.build.log" 2>&1; then
  grep -E "error|Error" "$build.build.log" | head -40
  echo "gpu-check: build failed (log: $build.build.log)"
  exit 1
fi

json() { [ -n "$out" ] && echo "--gtest_output=json:$out/$1.json"; }
[ -n "$out" ] && mkdir -p "$out"

echo "== CUDA tests (tessel-cuda-tests)"
"$build/bin/tessel-cuda-tests" $(json cuda-tests) 2>&1 | tee "$build.cuda-tests.log"
cuda_rc=${PIPESTATUS[0]}
echo "== unit tests (tessel-unit-tests)"
"$build/bin/tessel-unit-tests" --gtest_brief=1 $(json unit-tests) 2>&1 |
  tee "$build.unit-tests.log" | tail -5
unit_rc=${PIPESTATUS[0]}

echo "== training on the GPU against the CPU (5 steps per plan)"
plans=${TESSEL_GPU_PLANS:-$root/gpu-plans}
train_rc=0
mkdir -p "$build.train"
trained=0
for plan in "$plans"/*.plan; do
  [ -f "$plan" ] || continue
  name=$(basename "$plan" .plan)
  for device in cpu cuda; do
    if ! "$build/bin/tessel-runner" --plan "$plan" --data "$root/test/parity/Inputs/text.txt" \
        --steps 5 --seed 1 --eval-every 0 --quiet --checkpoint-dir "$build.train/$name-$device" \
        --metrics "$build.train/$name-$device.jsonl" --device "$device" \
        > "$build.train-$name-$device.log" 2>&1; then
      echo "$name on $device failed:"
      tail -5 "$build.train-$name-$device.log"
      train_rc=1
    fi
  done
  echo "-- $name"
  # The CUDA device compiles the fused elementwise kernels with NVRTC at load (docs/nvrtc.md);
  # a fall back to the interpreter kernel here means NVRTC or the driver refused them.
  grep -h "fused elementwise calls" "$build.train-$name-cuda.log"
  if grep -q "interpreter kernel" "$build.train-$name-cuda.log"; then
    grep -h "interpreter kernel" "$build.train-$name-cuda.log"
    train_rc=1
  fi
  python3 "$root/test/Runtime/Inputs/close_losses.py" "$build.train/$name-cuda.jsonl" \
    "$build.train/$name-cpu.jsonl" --tol 5e-4 --steps 5 2>&1 | tee "$build.train-$name.log" ||
    train_rc=1
  trained=$((trained + 1))
done
if [ "$trained" -eq 0 ]; then
  echo "no plans in $plans (make them on the build machine with scripts/gpu-plans.sh)"
  train_rc=1
fi

echo "== multi-rank layouts as threads on one GPU against one rank (5 steps each)"
ranks_rc=0
layouts=0
for dir in "$plans"/ranks/*/; do
  [ -f "$dir/one-rank.plan" ] || continue
  model=$(basename "$dir")
  for plan in "$dir"/*.plan; do
    name=$(basename "$plan" .plan)
    log="$build.ranks-$model-$name"
    if ! "$build/bin/tessel-runner" --plan "$plan" --data "$root/test/parity/Inputs/text.txt" \
        --steps 5 --seed 1 --eval-every 0 --quiet --checkpoint-dir "$log.ckpt" \
        --metrics "$log.jsonl" --device cuda > "$log.log" 2>&1; then
      echo "$model $name on cuda failed:"
      tail -5 "$log.log"
      ranks_rc=1
    fi
  done
  for plan in "$dir"/*.plan; do
    name=$(basename "$plan" .plan)
    [ "$name" = one-rank ] && continue
    echo "-- $model $name"
    python3 "$root/test/Runtime/Inputs/close_losses.py" "$build.ranks-$model-$name.jsonl" \
      "$build.ranks-$model-one-rank.jsonl" --tol 5e-4 --steps 5 | tail -1 || ranks_rc=1
    layouts=$((layouts + 1))
  done
done
if [ "$layouts" -eq 0 ]; then
  echo "no multi-rank plans in $plans/ranks (make them on the build machine with scripts/gpu-plans.sh)"
  ranks_rc=1
fi

# Figures for benchmarks/RESULTS.md (the check does not depend on them).
echo "== kernel rates (tessel-cuda-rate)"
timeout 300 "$build/bin/tessel-cuda-rate" 2>&1 | tee "$build.cuda-rate.log" ||
  echo "tessel-cuda-rate failed or timed out"
echo "== fused elementwise kernels: NVRTC against the interpreter (tessel-cuda-fused-rate)"
timeout 300 "$build/bin/tessel-cuda-fused-rate" 2>&1 | tee "$build.cuda-fused-rate.log" ||
  echo "tessel-cuda-fused-rate failed or timed out"
[ -n "$out" ] && cp "$build".*.log "$out/" 2> /dev/null

count() { grep -E "^\[  $1 *\] [0-9]+ tests?" "$2" | head -1 | grep -oE "[0-9]+" | head -1; }
passed=$(count PASSED "$build.cuda-tests.log")
skipped=$(count SKIPPED "$build.cuda-tests.log")
# NCCL between GPUs needs two: on a one-GPU machine that skip is expected, not a failure.
two_gpus=$(grep -c "needs two CUDA devices" "$build.cuda-tests.log")
skipped=$((${skipped:-0} - two_gpus))
failed=$(count FAILED "$build.cuda-tests.log")
echo "== summary"
echo "CUDA tests: ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
echo "unit tests: $([ "$unit_rc" -eq 0 ] && echo passed || echo failed)"
echo "training against the CPU: $([ "$train_rc" -eq 0 ] && echo "$trained plans agree" || echo failed)"
echo "multi-rank layouts on one GPU: $([ "$ranks_rc" -eq 0 ] && echo "$layouts agree with one rank" || echo failed)"
if [ "${skipped:-0}" -gt 0 ]; then
  echo "gpu-check: CUDA tests were skipped: no usable GPU here (see the reasons above)"
  exit 1
fi
[ "$cuda_rc" -eq 0 ] && [ "$unit_rc" -eq 0 ] && [ "$train_rc" -eq 0 ] && [ "$ranks_rc" -eq 0 ] ||
  exit 1
echo "gpu-check: all passed"
