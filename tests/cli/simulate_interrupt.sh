#!/usr/bin/env bash
# simulate_interrupt.sh MESHTP: Ctrl-C (SIGINT) on `meshtp simulate` ends smpirun and every
# simulated process, removes the simulation's temporary directory and exits 130
# (sim/launch.cpp runs smpirun in a process group of its own and ends that group: SIGTERM,
# SIGKILL after 3 s, then reaping, so meshtp is gone within ~4 s; the test allows 8 s for a
# loaded machine). Then `kill -9` of meshtp, which no handler sees: the guard sim/launch.cpp
# puts around smpirun (setpriv --pdeathsig) ends the group and removes the directory as well,
# within 5 s.
set -u
meshtp=$1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# 64 simulated devices of a GPT-3 layer: several seconds of simulation, so SIGINT lands mid-run.
start() {
"$meshtp" simulate --topology nvlink-network-64 --model gpt3-175b --devices 64 --mesh 8x8 \
  --strategy meshslice --ignore-memory >"$log" 2>&1 &
pid=$!
}
# wait_running: sets $smpirun (the simulation's process group) once it runs; 1 if it never does.
wait_running() {
smpirun=""
for _ in $(seq 200); do
  smpirun=$(pgrep -P "$pid" -f smpirun | head -1)
  [ -n "$smpirun" ] && break
  sleep 0.1
done
if [ -z "$smpirun" ]; then
  echo "FAIL: no smpirun started by meshtp simulate"; cat "$log"; kill -9 "$pid"; exit 1
fi
sleep 1.5
if ! pgrep -g "$smpirun" >/dev/null; then
  echo "FAIL: the simulation ended before the signal (make it longer)"; cat "$log"; exit 1
fi
}
start
wait_running
sent=$(date +%s.%N)
kill -INT "$pid"
for _ in $(seq 80); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then
  echo "FAIL: meshtp simulate still running 8 s after SIGINT"; kill -9 "$pid"
  pkill -9 -g "$smpirun"; exit 1
fi
wait "$pid"
status=$?
echo "meshtp simulate exited $(python3 -c "import time; print(round(time.time() - $sent, 2))") s after SIGINT"
failures=0
if pgrep -g "$smpirun" >/dev/null; then
  echo "FAIL: simulation processes left behind:"; pgrep -a -g "$smpirun"; pkill -9 -g "$smpirun"
  failures=1
fi
if [ "$status" -ne 130 ]; then echo "FAIL: exit status $status, expected 130"; failures=1; fi
if [ -e "/tmp/meshtp-simulate-$pid" ]; then
  echo "FAIL: /tmp/meshtp-simulate-$pid left behind"; rm -rf "/tmp/meshtp-simulate-$pid"; failures=1
fi
if ! grep -q "error: interrupted by signal 2: the simulation and its processes were ended" "$log"; then
  echo "FAIL: no message naming the signal"; failures=1
fi
cat "$log"
[ "$failures" -eq 0 ] && echo "ok: SIGINT ended the simulation, its processes and its files"

start
wait_running
kill -KILL "$pid"
wait "$pid" 2>/dev/null
for _ in $(seq 50); do
  pgrep -g "$smpirun" >/dev/null || break
  sleep 0.1
done
if pgrep -g "$smpirun" >/dev/null; then
  echo "FAIL: simulation processes left 5 s after meshtp was killed:"; pgrep -a -g "$smpirun"
  pkill -9 -g "$smpirun"; failures=$((failures + 1))
elif [ -e "/tmp/meshtp-simulate-$pid" ]; then
  echo "FAIL: /tmp/meshtp-simulate-$pid left behind after kill -9"; rm -rf "/tmp/meshtp-simulate-$pid"
  failures=$((failures + 1))
else
  echo "ok: kill -9 of meshtp ended the simulation's processes and removed its files"
fi
exit "$failures"
