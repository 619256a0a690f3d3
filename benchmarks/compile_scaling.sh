#!/bin/sh
# How compile and estimate time and memory grow with the model and the mesh: `tessel estimate`
# and `tessel compile -o` of examples/gpt3_175b.model (1024 ranks) and of tiny_gpt with many
# layers (examples/tiny_gpt.model with `layers` changed). Wall time and peak RSS come from
# /usr/bin/time -v; a run past the time limit is stopped and shown as "> LIMIT".
#
#   benchmarks/compile_scaling.sh                          # build/bin/tessel, 96/384/1024 layers
#   benchmarks/compile_scaling.sh --tessel /path/to/tessel --limit 300 --layers "96 256 512"
#
# Runs from anywhere; needs GNU time (/usr/bin/time) and coreutils' timeout.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
tessel="$root/build/bin/tessel"
limit=600
layers="96 384 1024"
while [ $# -gt 0 ]; do
  case "$1" in
    --tessel) tessel=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "compile_scaling.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ ! -x "$tessel" ]; then
  echo "compile_scaling.sh: $tessel is missing; build first (ninja -C build)" >&2
  exit 2
fi
if [ ! -x /usr/bin/time ]; then
  echo "compile_scaling.sh: needs GNU time at /usr/bin/time (Debian package 'time')" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# measure LABEL COMMAND...: one row, "label  seconds  peak RSS".
measure() {
  label=$1
  shift
  status=0
  /usr/bin/time -v -o "$work/time.txt" timeout "$limit" "$@" > "$work/out.txt" 2> "$work/err.txt" || status=$?
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time.txt" |
    awk -F: '{ s = 0; for (i = 1; i <= NF; ++i) s = s * 60 + $i; printf "%.2f", s }')
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time.txt")
  case $status in
    0) seconds="$wall s" ;;
    124|137) seconds="> $limit s" ;;
    *) seconds="failed ($status)"; sed 's/^/    /' "$work/err.txt" | tail -5 >&2 ;;
  esac
  printf '%-34s %14s %12s MiB\n' "$label" "$seconds" "$(awk -v k="$rss" 'BEGIN { printf "%.0f", k / 1024 }')"
  rm -f "$work/exe"
}

echo "tessel: $tessel"
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo "time limit per run: $limit s"
echo
printf '%-34s %14s %16s\n' "run" "wall time" "peak RSS"
measure "estimate gpt3_175b (1024 ranks)" "$tessel" estimate "$root/examples/gpt3_175b.model"
measure "compile gpt3_175b (1024 ranks)" "$tessel" compile "$root/examples/gpt3_175b.model" -o "$work/exe"
for n in $layers; do
  sed "s/^  layers = 4$/  layers = $n/" "$root/examples/tiny_gpt.model" > "$work/tiny_gpt_$n.model"
  measure "estimate tiny_gpt, $n layers" "$tessel" estimate "$work/tiny_gpt_$n.model"
  measure "compile tiny_gpt, $n layers" "$tessel" compile "$work/tiny_gpt_$n.model" -o "$work/exe"
done
