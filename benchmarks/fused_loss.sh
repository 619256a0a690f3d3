#!/bin/sh
# The fused output head on the CPU: one model compiled with `--fuse-loss=off` and with the
# fusion on at each chunk size asked for (rows of logits at a time; 0 is the automatic
# choice), trained on one rank; reports the forward-backward arena (the plan's peak of
# activations), the estimate's activations, the process's peak resident memory, the mean step
# time (over the steps after the warm-up, from the run's metrics) and the largest relative
# difference of the losses from the unfused run.
#
#   benchmarks/fused_loss.sh                       # gpt_4x384_vocab50k, chunks 0 256 1024
#   benchmarks/fused_loss.sh --chunks "64 128" --steps 6 --threads 1
#
# Time it with nothing else running: under the shared build lock, exclusively,
#   flock /tmp/tessel-build.lock benchmarks/fused_loss.sh
# Runs from anywhere; needs a built tree (build/bin/tessel, or --tessel PATH).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
tessel="$root/build/bin/tessel"
model="$root/benchmarks/models/gpt_4x384_vocab50k.model"
data=/usr/share/games/fortunes/fortunes
steps=8
warmup=2
threads=2
chunks="0 256 1024"
while [ $# -gt 0 ]; do
  case "$1" in
    --tessel) tessel=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --chunks) chunks=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "fused_loss.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -r "$data" ] || data="$root/test/Integration/Parity/Inputs/text.txt"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "model $(basename "$model"), $steps steps (mean of steps $((warmup + 1))-$steps), $threads threads, data $data"
printf '%-14s %16s %18s %14s %12s %14s\n' head "arena (f/b)" "est. activations" "peak RSS" "step time" "loss rel. diff"
for variant in off $chunks; do
  if [ "$variant" = off ]; then flags="--fuse-loss=off"; name=unfused; else flags="--loss-chunk=$variant"; name="chunk $variant"; fi
  [ "$variant" = 0 ] && name="chunk auto"
  "$tessel" compile "$model" $flags --emit=plan -o "$work/plan.mlir"
  arena=$(sed -n 's/.*plan.program "forward_backward" attributes {arena_bytes = \([0-9]*\).*/\1/p' "$work/plan.mlir")
  act=$("$tessel" estimate "$model" $flags --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["ranks"][0]["activations"])')
  "$tessel" compile "$model" $flags -o "$work/m" > /dev/null
  /usr/bin/time -f %M -o "$work/rss" "$work/m" --data "$data" --threads "$threads" --steps "$steps" \
    --eval-every 0 --quiet --metrics "$work/m_$variant.jsonl" > /dev/null 2>&1
  python3 - "$work/m_$variant.jsonl" "$work/m_off.jsonl" "$warmup" "$name" "$arena" "$act" "$(cat "$work/rss")" <<'PYEOF'
import json, sys
metrics, reference, warmup, name, arena, act, rss = sys.argv[1:8]
rows = [json.loads(l) for l in open(metrics) if l.strip()]
ref = [json.loads(l) for l in open(reference) if l.strip()]
times = [r["step_time_s"] for r in rows if "step_time_s" in r and r["step"] > int(warmup)]
diff = max(abs(a["loss"] - b["loss"]) / abs(b["loss"]) for a, b in zip(rows, ref) if "loss" in a)
mib = lambda b: "%.1f MiB" % (float(b) / 2**20)
print("%-14s %16s %18s %14s %10.3f s %14.1e" % (name, mib(arena), mib(act), mib(float(rss) * 1024),
                                                sum(times) / len(times), diff))
PYEOF
done
