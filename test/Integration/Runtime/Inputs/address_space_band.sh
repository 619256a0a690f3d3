#!/usr/bin/env bash
# Usage: address_space_band.sh FROM_KB TO_KB STEP_KB -- COMMAND...
# Runs COMMAND under each address-space limit (ulimit -v) from FROM_KB to TO_KB and prints,
# per limit, whether the run was refused before it started ("refused"), ran to the end
# ("ran") or did anything else (a hang, a crash, a failure mid-run: "other" with its last
# line); then whether the outcomes are monotonic: refused below some limit, ran above it.
set -u
from=$1 to=$2 step=$3
shift 4
seen_ran=0 monotonic=yes
for ((kb = from; kb <= to; kb += step)); do
  out=$( (ulimit -v "$kb"; timeout 120 "$@" 2>&1); echo "exit $?")
  status=${out##*exit }
  if [ "$status" = 0 ]; then
    outcome=ran
    seen_ran=1
  elif [ "$status" = 1 ] && grep -q "the plan cannot run: .* of address space" <<<"$out"; then
    outcome=refused
    [ $seen_ran = 1 ] && monotonic=no
  else
    outcome="other (exit $status): $(tail -n 2 <<<"$out" | head -n 1)"
    monotonic=no
  fi
  echo "$kb KiB: $outcome"
done
echo "monotonic: $monotonic"
