#!/usr/bin/env bash
# watchdog.sh MESHTP MPIEXEC [TRIALS]: SIGSTOP one random rank of a training job at a random
# moment; with --comm-timeout 2 the job must end within 15 s, non-zero, with an error naming
# the operation, its mesh dim(s) and the stopped rank as the one that did not arrive.
# Alternates the ATP stack (collectives) and Cannon's 2D GeMM (point-to-point shifts).
source "$(dirname "$0")/lib.sh" "$1" "$2"
n=${3:-2}
layouts=("--mesh 2x2" "--mesh 2x2 --strategy cannon")
for t in $(seq "$n"); do
  layout=${layouts[$(((t - 1) % 2))]}
  log="$work/watchdog$t.log"
  trials=$((trials + 1))
  # shellcheck disable=SC2086
  start_bg 4 "$log" train "${small[@]}" --steps 100000 $layout --comm-timeout 2
  for _ in $(seq 300); do grep -q "^step" "$log" && break; sleep 0.05; done
  sleep "0.$((RANDOM % 10))"
  victim=$(rank_pids | shuf -n 1)
  rank=$(tr '\0' '\n' </proc/"$victim"/environ | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
  kill -STOP "$victim"
  start=$(now)
  wait_job 15
  status=$?
  took=$(elapsed "$start")
  if [ "$status" -eq 137 ]; then
    failed "trial $t ($layout): hang — no exit 15 s after SIGSTOP of rank $rank"
  elif ! grep -qE "error: [a-z_]+ (#[0-9]+|with world rank [0-9]+) on (mesh [0-9x]+ dims? [0-9,]+|the world).* did not complete within 2 s \(--comm-timeout.*world ranks? ([0-9]+,)*$rank(,[0-9]+)* did not arrive" "$log"; then
    failed "trial $t ($layout): exit $status in $took s without naming rank $rank:"
    grep -m2 error "$log" | sed 's/^/       /'
  else
    pass "trial $t ($layout): rank $rank stopped → exit $status in $took s: $(grep -m1 -oE 'error: [a-z_]+ [^(]*' "$log")"
  fi
  wait_gone 5 || failed "trial $t: ranks left after the job ended"
  for pid in $(marked_pids "$trial"); do kill -KILL "$pid" 2>/dev/null; done
done
finish
