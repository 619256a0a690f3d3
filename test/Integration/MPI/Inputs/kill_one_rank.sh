#!/usr/bin/env bash
# Usage: kill_one_rank.sh [--signal SIG] RANK CHECKPOINT_DIR -- MPIRUN_COMMAND...
# Starts the MPI job, waits for its first checkpoint, sends the process of rank RANK signal SIG
# (default KILL; STOP leaves it alive but silent), and reports how the job ended and how long
# the others took to stop.
set -u
signal=KILL
if [ "$1" = --signal ]; then signal=$2; shift 2; fi
rank=$1 ckdir=$2
shift 3
"$@" &
job=$!
for _ in $(seq 1200); do [ -f "$ckdir/latest" ] && break; sleep 0.1; done
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
  if { tr '\0' '\n' < "$env"; } 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank" &&
     descends_from_job "$pid"; then
    victim=$pid
  fi
done
[ -n "$victim" ] || { echo "rank $rank's process not found"; kill -9 $job; exit 1; }
start=$(date +%s)
kill -s "$signal" "$victim"
# Every other rank must end within 60 s (the job's wait limits, and a launcher taking the job
# down on a machine busy with other work).
for _ in $(seq 600); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
if kill -0 $job 2>/dev/null; then
  echo "the job still runs 60 s after rank $rank was sent SIG$signal"
  kill -9 "$victim" $job
  exit 1
fi
# A stopped rank the launcher left behind is not the test's to keep.
kill -9 "$victim" 2>/dev/null
wait $job
status=$?
echo "job ended with status $status within $(( $(date +%s) - start + 1 )) s"
