#!/bin/sh
# How compile and estimate time and memory grow with the model and the mesh: `tessel estimate`
# and `tessel compile -o` of examples/gpt3_175b.model (1024 ranks), of the same model with
# other dp and tp sizes (the batch kept at 96 micro-batches of one sequence per dp rank), and of
# tiny_gpt with 64 to 1024 layers (examples/tiny_gpt.model with `layers` changed), whose
# check, estimate and compile should each grow linearly with the layers. Wall time and peak
# RSS come from /usr/bin/time -v, the size of what compile writes (the executable, or the plan
# file with --emit=plan-file) from the file; a run past the time limit is stopped and shown as
# "> LIMIT".
#
#   benchmarks/compile_scaling.sh                          # build/bin/tessel, 64 to 1024 layers
#   benchmarks/compile_scaling.sh --tessel /path/to/tessel --limit 300 --layers "96 256 512"
#   benchmarks/compile_scaling.sh --meshes ""              # skip the dp and tp variants
#
# Runs from anywhere; needs GNU time (/usr/bin/time) and coreutils' timeout.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
tessel="$root/build/bin/tessel"
limit=600
layers="64 128 256 512 1024"
# dp:tp pairs of the GPT-3 variants (pp stays 8).
meshes="8:8 64:8 16:4 16:16"
while [ $# -gt 0 ]; do
  case "$1" in
    --tessel) tessel=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --meshes) meshes=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
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

# measure LABEL COMMAND...: one row, "label  seconds  peak RSS  output", the output being the
# size of $work/exe or $work/plan when the command wrote one.
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
  output=
  for f in "$work/exe" "$work/plan"; do
    [ -f "$f" ] && output=$(awk -v b="$(wc -c < "$f")" 'BEGIN { printf "%.1f MB", b / 1e6 }')
  done
  printf '%-46s %14s %12s MiB %14s\n' "$label" "$seconds" \
    "$(awk -v k="$rss" 'BEGIN { printf "%.0f", k / 1024 }')" "$output"
  rm -f "$work/exe" "$work/plan"
}

echo "tessel: $tessel"
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo "time limit per run: $limit s"
echo
printf '%-46s %14s %16s %14s\n' "run" "wall time" "peak RSS" "output"
gpt3="$root/examples/gpt3_175b.model"
measure "estimate gpt3_175b (1024 ranks)" "$tessel" estimate "$gpt3"
measure "compile gpt3_175b (1024 ranks)" "$tessel" compile "$gpt3" -o "$work/exe"
measure "plan file gpt3_175b (1024 ranks)" "$tessel" compile "$gpt3" --emit=plan-file -o "$work/plan"
for m in $meshes; do
  dp=${m%:*}
  tp=${m#*:}
  ranks=$((dp * 8 * tp))
  sed -e "s/mesh { dp = 16, pp = 8, tp = 8 }/mesh { dp = $dp, pp = 8, tp = $tp }/" \
    -e "s/^  batch = 1536 /  batch = $((96 * dp)) /" "$gpt3" > "$work/gpt3_dp${dp}_tp$tp.model"
  variant="gpt3_175b dp $dp tp $tp ($ranks ranks)"
  measure "estimate $variant" "$tessel" estimate "$work/gpt3_dp${dp}_tp$tp.model"
  measure "plan file $variant" "$tessel" compile "$work/gpt3_dp${dp}_tp$tp.model" \
    --emit=plan-file -o "$work/plan"
done
for n in $layers; do
  sed "s/^  layers = 4$/  layers = $n/" "$root/examples/tiny_gpt.model" > "$work/tiny_gpt_$n.model"
  measure "check tiny_gpt, $n layers" "$tessel" check "$work/tiny_gpt_$n.model"
  measure "estimate tiny_gpt, $n layers" "$tessel" estimate "$work/tiny_gpt_$n.model"
  measure "compile tiny_gpt, $n layers" "$tessel" compile "$work/tiny_gpt_$n.model" -o "$work/exe"
done
