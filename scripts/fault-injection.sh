#!/usr/bin/env bash
# fault-injection.sh [KILLS] [STOPS] [SIGNALS]: the fault-injection suite of tests/faults/ with
# many trials — KILLS SIGKILLs during checkpoint writes (default 24), STOPS SIGSTOPs of one
# rank (default 6), SIGNALS graceful stops (default 6) — plus the bad-input catalogue, the
# damaged checkpoints, the full disk and the 18 defect checks. Prints each script's lines
# and, at the end, the counts as one JSON object:
#   {"bad_inputs": 176, "rejected_cleanly": 176, "kill_trials": 24, "checkpoints_lost": 0,
#    "hangs": 0, …}
# Takes ~15 minutes on 2 cores. Run from the repository after scripts/install.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env.sh
kills=${1:-24}
stops=${2:-6}
signals=${3:-6}
meshtp=build/src/cli/meshtp
mpiexec=$(command -v mpiexec)
[ -x "$meshtp" ] || { echo "error: $meshtp not built (run scripts/install.sh)"; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run() {  # run NAME SCRIPT ARGS…: one script, its output kept for the counts
  echo "== $1"
  local start=$SECONDS
  tests/faults/"$2" "$meshtp" "$mpiexec" "${@:3}" 2>&1 | tee -a "$log" | grep -E "^(ok|FAIL|skip)|trials|bad inputs|kill trials"
  echo "   ($((SECONDS - start)) s)"
}

run "bad inputs across every command" bad_inputs.sh all
run "the 18 defects" defects.sh
run "SIGKILL during checkpoint writes" kill_checkpoint.sh "$kills"
run "SIGSTOP of one rank (watchdog)" watchdog.sh "$stops"
run "SIGTERM/SIGINT mid-step (graceful stop, exact resume)" graceful_stop.sh "$signals"
run "damaged checkpoints" corrupt_checkpoints.sh
run "full disk" full_disk.sh

count() { grep -cE "$1" "$log"; }
tried=$(sed -nE 's/^bad inputs tried ([0-9]+).*/\1/p' "$log" | tail -1)
clean=$(sed -nE 's/.*rejected cleanly ([0-9]+).*/\1/p' "$log" | tail -1)
lost=$(sed -nE 's/.*checkpoints lost ([0-9]+).*/\1/p' "$log" | tail -1)
hangs=$(count "FAIL .*(hang|no exit within|still alive|still running)")
failures=$(count "^FAIL")
printf '{"bad_inputs": %s, "rejected_cleanly": %s, "kill_trials": %s, "checkpoints_lost": %s, ' \
  "${tried:-0}" "${clean:-0}" "$kills" "${lost:-0}"
printf '"stop_trials": %s, "signal_trials": %s, "hangs": %s, "checks": %s, "failed": %s}\n' \
  "$stops" "$signals" "$hangs" "$(count "^(ok|FAIL)")" "$failures"
[ "$failures" -eq 0 ]
