#!/usr/bin/env bash
# Usage: signal_run.sh METRICS LINES SIGNALS -- COMMAND...
# Starts COMMAND, waits until its metrics file METRICS holds LINES lines, then sends it the
# signals SIGNALS (a comma-separated list: with several, the process is stopped first and
# resumed after, so that all arrive together), and prints how it ended.
set -u
metrics=$1 lines=$2 signals=$3
shift 4
# The job gets SIGINT as a terminal's foreground job has it, not ignored as a script's
# background job (or this script, under a test runner) has it.
python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' "$@" &
job=$!
for _ in $(seq 600); do
  [ -f "$metrics" ] && [ "$(wc -l < "$metrics")" -ge "$lines" ] && break
  kill -0 $job 2>/dev/null || break
  sleep 0.1
done
if [[ $signals == *,* ]]; then
  kill -STOP $job
  for s in ${signals//,/ }; do kill -s "$s" $job; done
  kill -CONT $job
else
  kill -s "$signals" $job
fi
# It must end within 60 s.
for _ in $(seq 600); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
if kill -0 $job 2>/dev/null; then
  echo "still running 60 s after the signal"
  kill -9 $job
  exit 1
fi
wait $job
echo "exit $?"
