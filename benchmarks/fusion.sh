#!/bin/sh
# Elementwise fusion on the CPU: one model compiled with `--fuse=off` and `--fuse=on` (the
# output head's fusion left out of both, `--fuse-loss=off`), trained
# on one rank; reports the mean step time (over the steps after the warm-up, from the run's
# metrics), the kernel calls per step and the seconds per step spent in elementwise kernels
# (binary, unary, unary_grad, where, fill, fused_elementwise; from --profile), and checks that
# both runs give the same losses and gradient norms, bit for bit.
#
#   benchmarks/fusion.sh                                   # gpt_6x384, 2 threads, 12 steps
#   benchmarks/fusion.sh --model examples/tiny_gpt.model --steps 50 --threads 1
#
# Time it with nothing else running: under the shared build lock, exclusively,
#   flock /tmp/tessel-build.lock benchmarks/fusion.sh
# Runs from anywhere; needs a built tree (build/bin/tessel, or --tessel PATH).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
tessel="$root/build/bin/tessel"
model="$root/benchmarks/models/gpt_6x384.model"
data=/usr/share/games/fortunes/fortunes
steps=12
warmup=2
threads=2
while [ $# -gt 0 ]; do
  case "$1" in
    --tessel) tessel=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "fusion.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -r "$data" ] || data="$root/test/Integration/Parity/Inputs/text.txt"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "model $(basename "$model"), $steps steps (mean of steps $((warmup + 1))-$steps), $threads threads, data $data"
printf '%-5s %12s %18s %24s\n' fuse "step time" "kernel calls/step" "elementwise s/step"
for fuse in off on; do
  # The output head's fusion sums the loss in chunks (not the same bits): benchmarks/fused_loss.sh.
  "$tessel" compile "$model" --fuse=$fuse --fuse-loss=off -o "$work/m_$fuse" > /dev/null
  "$work/m_$fuse" --data "$data" --threads "$threads" --steps "$steps" --eval-every 0 --quiet \
    --metrics "$work/m_$fuse.jsonl" --profile > "$work/profile_$fuse.txt" 2>&1
  python3 - "$work/m_$fuse.jsonl" "$work/profile_$fuse.txt" "$steps" "$warmup" "$fuse" <<'EOF'
import json, sys
metrics, profile, steps, warmup, fuse = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rows = [json.loads(line) for line in open(metrics) if line.strip()]
times = [r["step_time_s"] for r in rows if "step_time_s" in r and r["step"] > warmup]
calls, elementwise = 0, 0.0
words = {"binary", "unary", "unary_grad", "where", "fill", "fused_elementwise"}
for line in open(profile):
    f = line.split()
    if len(f) == 4 and f[2].isdigit():
        calls += int(f[2])
        if f[0] in words:
            elementwise += float(f[1]) / 1e3  # the table is in milliseconds
print("%-5s %10.3f s %18.1f %24.3f" % (fuse, sum(times) / len(times), calls / steps, elementwise / steps))
EOF
done
strip='/^{"run":/d; s/"tokens_per_s.*//'
if [ "$(sed "$strip" "$work/m_off.jsonl")" = "$(sed "$strip" "$work/m_on.jsonl")" ]; then
  echo "losses and gradient norms: the same bits with and without fusion"
else
  echo "fusion.sh: the losses differ with and without fusion" >&2
  exit 1
fi
