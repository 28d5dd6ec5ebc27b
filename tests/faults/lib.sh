#!/usr/bin/env bash
# Helpers for the fault-injection tests; sourced as `source lib.sh MESHTP MPIEXEC`.
#
# Every trial runs under an environment marker (MESHTP_FAULT_TRIAL=<id>) so that the test
# can tell afterwards whether any rank of it is still alive (/proc/*/environ), whatever its
# command line.
set -u
meshtp=$1
mpiexec=$2
faults_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/meshtp-faults.XXXXXX")
failures=0
trials=0
trial_id=0
cleanup() {
  # Nothing of ours may outlive the test.
  for pid in $(marked_pids "meshtp-faults-$$-"); do kill -KILL "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

pass() { echo "ok   $*"; }
failed() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

# PIDs whose environment holds MESHTP_FAULT_TRIAL=<prefix…>.
marked_pids() {
  grep -l -a "MESHTP_FAULT_TRIAL=$1" /proc/[0-9]*/environ 2>/dev/null |
    sed -e 's|/proc/||' -e 's|/environ||' | grep -v "^$$\$" || true
}

# Fresh marker for the next trial.
next_trial() {
  trial_id=$((trial_id + 1))
  trial="meshtp-faults-$$-$trial_id"
}

# mpi NP ARGS…: meshtp on NP ranks (in the foreground), marked. Killed after 180 s (exit
# 124 or 137) so that a hang fails the test instead of stalling CI; every run here takes a
# few seconds.
mpi() {
  local np=$1
  shift
  MESHTP_FAULT_TRIAL=$trial timeout -k 5 180 "$mpiexec" --oversubscribe -np "$np" "$meshtp" "$@"
}

# Checksums of every regular file under the given paths (the "good files").
snapshot() { find "$@" -type f -print0 2>/dev/null | sort -z | xargs -0 -r sha256sum; }

# Seconds since the epoch, with decimals.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# expect_error NAME NP REGEX ARGS…: meshtp on NP ranks must exit non-zero within 10 s with
# output matching REGEX, leave no rank behind, and change no file under $good (if set).
expect_error() {
  local name=$1 np=$2 regex=$3
  shift 3
  next_trial
  trials=$((trials + 1))
  local before="" after="" start status out took
  [ -n "${good:-}" ] && before=$(snapshot "$good")
  start=$(now)
  out=$(MESHTP_FAULT_TRIAL=$trial timeout -k 1 10 "$mpiexec" --oversubscribe -np "$np" "$meshtp" "$@" 2>&1)
  status=$?
  took=$(elapsed "$start")
  sleep 0.2
  local left
  left=$(marked_pids "$trial")
  [ -n "${good:-}" ] && after=$(snapshot "$good")
  if [ "$status" -eq 0 ]; then
    failed "$name: succeeded (exit 0), expected an error: meshtp $*"
  elif [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    failed "$name: no exit within 10 s (hang): meshtp $*"
  elif ! grep -qE -- "$regex" <<<"$out"; then
    failed "$name: exit $status but the output does not match /$regex/: meshtp $*"
    echo "$out" | grep -v '^ \|^---\|^$' | head -8 | sed 's/^/       /'
  elif [ -n "${max_output:-}" ] && [ "${#out}" -gt "$max_output" ]; then
    failed "$name: the output is ${#out} bytes long (at most $max_output expected)"
  elif [ -n "$left" ]; then
    failed "$name: ranks still alive after exit: $left"
  elif [ "$before" != "$after" ]; then
    failed "$name: a good file changed:"
    diff <(echo "$before") <(echo "$after") | sed 's/^/       /'
  else
    pass "$name (exit $status in ${took} s)"
    return 0
  fi
  return 1
}

# start_bg NP LOG ARGS…: meshtp on NP ranks in the background; sets $job (mpirun's pid).
start_bg() {
  local np=$1 log=$2
  shift 2
  next_trial
  MESHTP_FAULT_TRIAL=$trial "$mpiexec" --oversubscribe -np "$np" "$meshtp" "$@" >"$log" 2>&1 &
  job=$!
}

# wait_job SECONDS: waits for the background job $job; SIGKILLs it if it has not ended after
# SECONDS (the exit status is then 137). Returns the job's exit status.
wait_job() {
  ( sleep "$1" && kill -KILL "$job" 2>/dev/null ) &
  local guard=$! status
  wait "$job"
  status=$?
  kill "$guard" 2>/dev/null
  wait "$guard" 2>/dev/null
  return "$status"
}

# rank_pids: the meshtp ranks (not mpirun) of the current trial.
rank_pids() {
  local pid
  for pid in $(marked_pids "$trial"); do
    [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = meshtp ] && echo "$pid"
  done
}

# wait_for_file PATTERN SECONDS: until a file matching the glob exists; 1 on timeout.
wait_for_file() {
  local pattern=$1 limit=$2 start
  start=$(now)
  while ! compgen -G "$pattern" >/dev/null; do
    sleep 0.05
    awk -v a="$start" -v b="$(now)" -v l="$limit" 'BEGIN { exit !(b - a > l) }' && return 1
  done
  return 0
}

# wait_gone SECONDS: until no process of the current trial is left; 1 on timeout.
wait_gone() {
  local limit=$1 start
  start=$(now)
  while [ -n "$(marked_pids "$trial")" ]; do
    sleep 0.05
    awk -v a="$start" -v b="$(now)" -v l="$limit" 'BEGIN { exit !(b - a > l) }' && return 1
  done
  return 0
}

# finish: the summary line and the exit status of the test.
finish() {
  echo "$trials trials, $failures failed"
  [ "$failures" -eq 0 ]
}

# A small corpus and the flags every training trial shares (tiny model, short sequences).
head -c 30000 /dev/urandom | base64 >"$work/corpus.txt"
small=(--data "$work/corpus.txt" --seq 32 --batch 4 --eval-batches 1)
