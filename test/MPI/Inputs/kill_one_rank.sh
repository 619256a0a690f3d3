#!/usr/bin/env bash
# Usage: kill_one_rank.sh RANK CHECKPOINT_DIR -- MPIRUN_COMMAND...
# Starts the MPI job, waits for its first checkpoint, kills the process of rank RANK with
# SIGKILL, and reports how the job ended and how long the others took to stop.
set -u
rank=$1 ckdir=$2
shift 3
"$@" &
job=$!
for _ in $(seq 600); do [ -f "$ckdir/latest" ] && break; sleep 0.1; done
[ -f "$ckdir/latest" ] || { echo "no checkpoint appeared"; kill -9 $job; exit 1; }
# Whether process $1 descends from this job's mpirun: only its ranks are candidates, never those
# of another MPI job that happens to run on the machine.
descends_from_job() {
  local p=$1
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do
    [ "$p" = "$job" ] && return 0
    p=$(awk '/^PPid:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
  done
  return 1
}
victim=""
for env in /proc/[0-9]*/environ; do
  pid=${env#/proc/}; pid=${pid%/environ}
  [ "$pid" = "$job" ] && continue
  if tr '\0' '\n' < "$env" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank" &&
     descends_from_job "$pid"; then
    victim=$pid
  fi
done
[ -n "$victim" ] || { echo "rank $rank's process not found"; kill -9 $job; exit 1; }
start=$(date +%s)
kill -9 "$victim"
# Every other rank must end within 30 s.
for _ in $(seq 300); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
if kill -0 $job 2>/dev/null; then
  echo "the job still runs 30 s after rank $rank was killed"
  kill -9 $job
  exit 1
fi
wait $job
status=$?
echo "job ended with status $status within $(( $(date +%s) - start + 1 )) s"
