#!/bin/sh
# One model three ways on this machine: its four ranks (dp 2 x tp 2, sequence parallel,
# ZeRO-1) as threads of one process, the same executable as four MPI processes (mpirun -np 4),
# and the same model on one rank. Reports tokens per second (over the steps after the warm-up,
# from the run's metrics) and each process's peak RSS (GNU time around every process; under
# mpirun, around each rank's process). Each of the three runs at every compute-thread count of
# --threads-list (--threads, per rank), and the best of each is compared with the best one-rank
# run. MPI processes try only counts that keep every thread on a core of its own, and 1: four
# processes of two OpenMP threads each on 2 cores ran tiny_gpt 30 times slower (the threads
# spin waiting for cores).
#
#   benchmarks/ranks_vs_processes.sh                 # tiny_gpt, then gpt_6x384 (10.8M)
#   benchmarks/ranks_vs_processes.sh --quick         # tiny_gpt only, few steps
#   benchmarks/ranks_vs_processes.sh --steps-tiny 200 --steps-large 30 --warmup 3
#   benchmarks/ranks_vs_processes.sh --threads-list "1 2 4"   # default: 1 and the core count
#
# The models: examples/tiny_gpt.model against examples/tiny_gpt_parallel.model (0.8M
# parameters, 16 x 64 tokens a step), and benchmarks/models/gpt_6x384.model (10.8M, 8 x 256)
# against the same file with the parallel section of tiny_gpt_parallel (micro-batch 4 per dp
# rank, so the global batch stays 8). Each run trains on the model's own data when it exists
# (Debian's fortunes), else on test/Integration/Parity/Inputs/text.txt, without evaluation.
# Runs from anywhere; needs a built tree, GNU time (/usr/bin/time) and OpenMPI's mpirun.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
tessel="$root/build/bin/tessel"
steps_tiny=200
steps_large=20
warmup=2
large=1
threads_list="1 $(nproc)"
mpirun="mpirun --allow-run-as-root --oversubscribe"
while [ $# -gt 0 ]; do
  case "$1" in
    --tessel) tessel=$2; shift 2 ;;
    --steps-tiny) steps_tiny=$2; shift 2 ;;
    --steps-large) steps_large=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --quick) steps_tiny=20; large=0; shift ;;
    --threads-list) threads_list=$2; shift 2 ;;
    --mpirun) mpirun=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "ranks_vs_processes.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for need in "$tessel" /usr/bin/time; do
  if [ ! -x "$need" ]; then
    echo "ranks_vs_processes.sh: $need is missing (build with ninja -C build; Debian package 'time')" >&2
    exit 2
  fi
done
if ! command -v "${mpirun%% *}" > /dev/null; then
  echo "ranks_vs_processes.sh: ${mpirun%% *} is missing (Debian: openmpi-bin)" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The parallel section of tiny_gpt_parallel, for a model that has none.
parallel_section='parallel {
  mesh { dp = 2, tp = 2 }
  shard { batch = dp, heads = tp, ffn = tp, vocab = tp }
  sequence_parallel = true
  zero = 1
}
'

# tokens_per_s METRICS WARMUP: tokens per second over the steps after the first WARMUP.
tokens_per_s() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
tokens = seconds = 0.0
for line in open(sys.argv[1]):
    m = json.loads(line)
    if "tokens_per_s" in m and m["step"] > int(sys.argv[2]):
        tokens += m["tokens_per_s"] * m["step_time_s"]
        seconds += m["step_time_s"]
print(f"{tokens / seconds:.0f}" if seconds else "0")
EOF
}

# mib KB...: the largest of the figures, in MiB; with --sum their sum.
mib() {
  awk -v sum="$1" '{ s += $1; if ($1 > m) m = $1 } END { printf "%.0f", (sum ? s : m) / 1024 }' "$2"
}

# run LABEL PROCESSES EXE STEPS DATA THREADS: trains and prints one row; the tokens per second
# are left in $tps.
run() {
  label=$1 processes=$2 exe=$3 steps=$4 data=$5 threads=$6
  rm -f "$work"/rss.* "$work/metrics.jsonl"
  set -- "$exe" --data "$data" --steps "$steps" --eval-every 0 --quiet --threads "$threads" \
    --metrics "$work/metrics.jsonl"
  start=$(date +%s.%N)
  if [ "$processes" -gt 1 ]; then
    # Each process under its own GNU time, writing rss.<rank>.
    $mpirun -np "$processes" sh -c \
      'exec /usr/bin/time -f %M -o "$0.${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}" "$@"' \
      "$work/rss" "$@" > "$work/out.txt" 2>&1 || { cat "$work/out.txt" >&2; exit 1; }
  else
    /usr/bin/time -f %M -o "$work/rss.0" "$@" > "$work/out.txt" 2>&1 || { cat "$work/out.txt" >&2; exit 1; }
  fi
  wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
  cat "$work"/rss.* > "$work/rss.all"
  tps=$(tokens_per_s "$work/metrics.jsonl" "$warmup")
  printf '%-30s %9s %7s %10s %12s MiB %10s MiB %8.1f s\n' "$label" "$processes" "$threads" \
    "$tps" "$(mib 0 "$work/rss.all")" "$(mib 1 "$work/rss.all")" "$wall"
}

# peer LABEL PROCESSES EXE STEPS DATA: a row per compute-thread count of $threads_list; the
# fastest run's tokens per second and thread count are left in $best and $best_threads.
peer() {
  best=0 best_threads=
  for t in $threads_list; do
    [ "$t" = 1 ] || [ $(($2 * t)) -le "$(nproc)" ] || continue
    run "$1" "$2" "$3" "$4" "$5" "$t"
    if awk -v a="$tps" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$tps best_threads=$t; fi
  done
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# compare NAME ONE_RANK_MODEL FOUR_RANK_MODEL STEPS
compare() {
  name=$1 one=$2 par=$3 steps=$4
  data=$(sed -n 's/^[[:space:]]*data = "\(.*\)".*/\1/p' "$one" | head -1)
  [ -e "$data" ] || data="$root/test/Integration/Parity/Inputs/text.txt"
  "$tessel" compile "$one" -o "$work/one" > /dev/null
  "$tessel" compile "$par" -o "$work/par" > /dev/null
  echo "$name: $steps steps ($warmup warm-up), data $data"
  printf '%-30s %9s %7s %10s %16s %14s %10s\n' "run" "processes" "threads" "tok/s" \
    "peak RSS/process" "RSS in all" "wall"
  peer "one rank" 1 "$work/one" "$steps" "$data"
  one_best=$best one_threads=$best_threads
  peer "4 ranks as threads" 1 "$work/par" "$steps" "$data"
  threads_best=$best threads_threads=$best_threads
  peer "4 ranks as MPI processes" 4 "$work/par" "$steps" "$data"
  echo "best of each (compute threads per rank): one rank $one_best tok/s ($one_threads);" \
    "4 ranks as threads $threads_best tok/s ($threads_threads), $(ratio "$threads_best" "$one_best") x one rank;" \
    "4 MPI processes $best tok/s ($best_threads), $(ratio "$best" "$one_best") x one rank"
  echo
}

echo "tessel: $tessel"
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)," \
  "$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo); $($mpirun --version | head -1)"
echo
compare "tiny_gpt (0.8M parameters, 16 x 64 tokens a step)" "$root/examples/tiny_gpt.model" \
  "$root/examples/tiny_gpt_parallel.model" "$steps_tiny"
if [ "$large" = 1 ]; then
  large_model="$root/benchmarks/models/gpt_6x384.model"
  # The benchmark model with tiny_gpt_parallel's layout, before its train section; micro-batch 4
  # per dp rank keeps the global batch of 8. (Its import is found in the library root.)
  sed -e 's/^  micro_batch = 8$/  micro_batch = 4/' "$large_model" |
    awk -v section="$parallel_section" '/^train \{/ { printf "%s\n", section } { print }' \
      > "$work/gpt_6x384_parallel.model"
  compare "gpt_6x384 (10.8M parameters, 8 x 256 tokens a step)" "$large_model" \
    "$work/gpt_6x384_parallel.model" "$steps_large"
fi
