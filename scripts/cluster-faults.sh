#!/usr/bin/env bash
# cluster-faults.sh [TRIALS] [KINDS]: the cluster fault tests (tests/cluster/cluster_test.sh) repeated
# TRIALS times each (default 10) on fresh emulated clusters of 2 hosts × 2 ranks: host 2's link
# cut mid-step (watchdog naming host 2, end within --comm-timeout 3 + 10 s, resume from the
# last checkpoint on host 1 alone), host 2's processes killed (end within 10 s), host 2's link
# cut for 2 s and restored (training goes on). Prints every trial's line, then the counts and
# the end times (docs/cluster.md holds a recorded run). KINDS: some of "cut killed restored"
# (default all). About 15 s per cut trial, 6–9 s per other trial.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
n=${1:-10}
kinds=${2:-cut killed restored}
meshtp=$PWD/build/src/cli/meshtp
[ -x "$meshtp" ] || { echo "error: $meshtp not built (scripts/install.sh)"; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for kind in $kinds; do
  for t in $(seq "$n"); do
    tests/cluster/cluster_test.sh "$kind" "$meshtp" 2>&1 | grep -E "^(ok|FAIL)" |
      sed "s/^/$kind $t: /" | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 77 ] && { echo "skipped: no network namespaces here"; exit 77; }
  done
done
end_times() { grep -E "^$1 [0-9]+: ok .*$2" "$log" | grep -oE "in [0-9.]+ s" | awk '{print $2}' | sort -n | tr '\n' ' '; }
echo "link cut, named and ended in time: $(grep -cE '^cut [0-9]+: ok +host' "$log")/$n; end times (s): $(end_times cut "link cut")"
echo "resumed from the last checkpoint on host 1: $(grep -cE '^cut [0-9]+: ok +resumed' "$log")/$n"
echo "host killed, ended within 10 s: $(grep -cE '^killed [0-9]+: ok' "$log")/$n; end times (s): $(end_times killed killed)"
echo "link restored, training went on: $(grep -cE '^restored [0-9]+: ok' "$log")/$n"
echo "failed: $(grep -cE '^[a-z]+ [0-9]+: FAIL' "$log")"
! grep -qE '^[a-z]+ [0-9]+: FAIL' "$log"
