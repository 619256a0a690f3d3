#!/usr/bin/env bash
# Prepares, on the build machine, everything a GPU window (scripts/gpu-window.sh) runs, in one
# git-ignored folder that the window's call carries. The GPU machine has the CUDA toolkit, the
# driver and PyTorch, but no MLIR, ANTLR, OpenBLAS, MPI or GoogleTest, and no network; and its
# time is short. So everything that needs no GPU happens here:
#   binaries.tar.xz  bin/: the runtime-only build for sm_90 (BLAS and MPI off; the CUDA tests,
#                the unit tests, the runner, tessel-nvrtc and the kernel-rate tools), stripped;
#                lib/: the shared libraries those binaries need that are not part of the C
#                library or libstdc++ (libgomp), which a GPU machine's image may lack. Packed
#                with xz they weigh a third of their size; the window unpacks them;
#   plans/       the plans compiled by scripts/gpu-plans.sh, plus a bf16 tiny_gpt;
#   ref/         the CPU references, computed by the same runner on its CPU device: per plan
#                the metrics of 5 steps and the first step's dumps (weights, batches, gradients);
#   nvrtc-cache/ the fused elementwise kernels of every plan but one (llama_small), compiled
#                for sm_90 with this machine's NVRTC, so that the window compiles that one plan's
#                kernels with the device's NVRTC and reads the others from the cache;
#   MANIFEST     the commit, the toolkit, and the folder's size.
# It is rebuilt from the current tree in one command, and says how big it is (a window carries
# at most 64 MiB, the repository included).
#
# Usage: scripts/gpu-prepare.sh [--out DIR] [--tessel BINARY] [--build DIR]
#   --out DIR       the prepared folder (default: gpu-window in the repository)
#   --tessel BIN    the compiler that makes the plans (default: build/bin/tessel)
#   --build DIR     the runtime-only CUDA build (default: build-gpu in the repository)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/gpu-window
tessel=$root/build/bin/tessel
build=$root/build-gpu
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --tessel) tessel=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-prepare: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
step() { echo "== gpu-prepare: $*"; }
die() { echo "gpu-prepare: error: $*" >&2; exit 1; }
[ -x "$tessel" ] || die "no compiler at $tessel (build it first: scripts/build.sh)"
command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ] ||
  die "no nvcc: the CUDA toolkit (/usr/local/cuda) is needed to build the CUDA backend"

step "configure the runtime-only CUDA build ($build, sm_90, no BLAS, no MPI)"
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTESSEL_RUNTIME_ONLY=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_BLAS=ON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 > "$build.configure.log" 2>&1 ||
    { tail -30 "$build.configure.log"; die "configure failed (log: $build.configure.log)"; }
fi
# A build configured elsewhere (or before) for more architectures carries a copy of every kernel
# per architecture in every binary; the window's GPUs are Hopper, so sm_90 alone.
archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt" 2> /dev/null)
if [ "$archs" != 90 ]; then
  step "reconfigure $build for sm_90 alone (it was configured for '${archs:-none}')"
  cmake "$build" -DCMAKE_CUDA_ARCHITECTURES=90 > "$build.configure.log" 2>&1 ||
    { tail -30 "$build.configure.log"; die "reconfigure failed (log: $build.configure.log)"; }
fi
binaries=(tessel-runner tessel-cuda-tests tessel-unit-tests tessel-nvrtc tessel-cuda-rate
  tessel-cuda-fused-rate)
step "build ${binaries[*]}"
ninja -C "$build" "${binaries[@]}" > "$build.build.log" 2>&1 ||
  { grep -E "error" "$build.build.log" | head -30; die "build failed (log: $build.build.log)"; }

# Only a folder this script made (it has a MANIFEST) is replaced.
if [ -e "$out" ] && [ ! -f "$out/MANIFEST" ] && [ -n "$(ls -A "$out" 2> /dev/null)" ]; then
  die "$out exists and is not a prepared folder (no MANIFEST): name another with --out"
fi
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/ref" "$out/nvrtc-cache"
echo "incomplete: scripts/gpu-prepare.sh did not finish" > "$out/MANIFEST"
step "binaries and the libraries they need"
for b in "${binaries[@]}"; do
  cp "$build/bin/$b" "$out/bin/"
  strip "$out/bin/$b"
done
# Everything the binaries link that is not the C library, the loader or libstdc++ (which every
# machine with a C++ compiler has, newer than ours) travels along.
ldd "$out"/bin/* | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
ls "$out/lib"

step "plans (scripts/gpu-plans.sh)"
"$root/scripts/gpu-plans.sh" "$tessel" "$out/plans" > "$out/plans.log" 2>&1 ||
  { tail -20 "$out/plans.log"; die "gpu-plans.sh failed"; }
# tiny_gpt in bf16 mixed precision, against the CPU's bf16 run.
sed -e 's/^\( *\)precision = fp32/\1precision = bf16/' "$root/examples/tiny_gpt.model" \
  > "$out/plans/tiny_gpt_bf16.model"
grep -q "precision = bf16" "$out/plans/tiny_gpt_bf16.model" ||
  die "examples/tiny_gpt.model names no 'precision = fp32' to turn into bf16"
"$tessel" compile "$out/plans/tiny_gpt_bf16.model" -I "$root" --emit=plan-file \
  -o "$out/plans/tiny_gpt_bf16.plan" > /dev/null
rm -rf "$out/plans/work" "$out/plans"/*.model.d 2> /dev/null || true

step "CPU references (the carried runner on its CPU device: 5 steps, step-1 dumps)"
data=$root/test/Integration/Parity/Inputs/text.txt
for plan in "$out"/plans/*.plan; do
  name=$(basename "$plan" .plan)
  mkdir -p "$out/ref/$name"
  "$out/bin/tessel-runner" --plan "$plan" --data "$data" --steps 5 --seed 1 --eval-every 0 \
    --quiet --device cpu --metrics "$out/ref/$name/metrics.jsonl" \
    --dump-dir "$out/ref/$name/dump" > "$out/ref/$name/run.log" 2>&1 ||
    { tail -5 "$out/ref/$name/run.log"; die "the CPU reference of $name failed"; }
  echo "  $name: $(wc -l < "$out/ref/$name/metrics.jsonl") metric lines"
done

step "NVRTC cache (every plan but llama_small, whose kernels the device's NVRTC compiles)"
cached=()
for plan in "$out"/plans/*.plan "$out"/plans/ranks/*/*.plan; do
  [ "$(basename "$plan" .plan)" = llama_small ] && continue
  cached+=("$plan")
done
"$out/bin/tessel-nvrtc" --arch sm_90 --cache "$out/nvrtc-cache" "${cached[@]}" \
  > "$out/nvrtc.log" 2>&1 || { tail -10 "$out/nvrtc.log"; die "tessel-nvrtc failed"; }
tail -1 "$out/nvrtc.log"

step "pack the binaries (binaries.tar.xz)"
XZ_OPT=-T0 tar -C "$out" -cJf "$out/binaries.tar.xz" bin lib || die "packing the binaries failed"
rm -rf "$out/bin" "$out/lib"
echo "  $(du -sh "$out/binaries.tar.xz" | cut -f1)"

{
  echo "commit $(git -C "$root" rev-parse HEAD 2> /dev/null || echo unknown)$(
    git -C "$root" diff --quiet 2> /dev/null || echo ' (with uncommitted changes)')"
  echo "prepared $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "nvcc $(/usr/local/cuda/bin/nvcc --version | grep -oE 'V[0-9.]+' | head -1), sm_90"
  echo "size $(du -sh "$out" | cut -f1)"
} > "$out/MANIFEST"
cat "$out/MANIFEST"
size_kib=$(du -sk "$out" | cut -f1)
repo_kib=$(git -C "$root" ls-files -z | (cd "$root" && xargs -0 du -ck 2> /dev/null) | tail -1 | cut -f1)
total=$((size_kib + ${repo_kib:-0}))
echo "gpu-prepare: $out is $((size_kib / 1024)) MiB; with the repository $((total / 1024)) MiB of the 64 a window carries"
if [ "$total" -ge $((64 * 1024)) ]; then
  du -sk "$out"/* "$out"/ref/* | sort -n | tail -8
  die "too big to carry (64 MiB at most)"
fi
