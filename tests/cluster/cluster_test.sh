#!/usr/bin/env bash
# cluster_test.sh CASE MESHTP: meshtp trained across an emulated cluster (scripts/cluster.sh:
# hosts in network namespaces on a bridge, shaped links) and broken there. CASE:
#   train     2 hosts × 2 ranks: losses equal one host's; cluster.sh's refusals (not root:
#             exit 77; bad arguments) and an idempotent down that leaves nothing behind
#   cut       host 2's link cut mid-training: the watchdog names host 2 and its ranks, the job
#             ends within --comm-timeout + 10 s; then a resume on host 1 alone, on another
#             layout, continues the loss curve from the last checkpoint (the uninterrupted
#             run's loss at that step)
#   killed    every process of host 2 SIGKILLed: the job ends within 10 s
#   restored  host 2's link cut for 2 s and restored within --comm-timeout: training goes on
#   node_disks  checkpoints in a per-node directory (STATE/disk, each host its own): only
#             host 1's holds them; --resume without a copy on host 2 fails naming the file
#             and rank 1; after copying host 1's directory to host 2's, --resume continues
#             the loss curve exactly (the uninterrupted run's losses)
# Exits 77 (ctest: skipped) where network namespaces cannot be made.
set -uo pipefail
case_name=$1
meshtp=$2
repo=$(cd "$(dirname "$0")/../.." && pwd)
cluster="$repo/scripts/cluster.sh"
name="t$((($$ % 9000) + 1000))"  # 5 characters: a 6th makes a second cluster's name
work=$(mktemp -d "${TMPDIR:-/tmp}/meshtp-cluster.XXXXXX")
failures=0
cleanup() {
  "$cluster" --name "$name" down
  rm -rf "$work"
}
trap cleanup EXIT
pass() { echo "ok   $*"; }
failed() {
  echo "FAIL $*"
  failures=$((failures + 1))
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
c() { "$cluster" --name "$name" "$@"; }

# up H R MBIT: the cluster, or skip the test where namespaces cannot be made.
up() {
  c up --hosts "$1" --ranks-per-host "$2" --link-mbit "$3"
  local status=$?
  [ $status -eq 77 ] && exit 77
  [ $status -eq 0 ] || { echo "FAIL cluster.sh up exited $status"; exit 1; }
}

# wait_for_step LOG N: until LOG shows training step N (at most 60 s).
wait_for_step() {
  local _
  for _ in $(seq 600); do
    grep -qE "^step +$2/" "$1" && return 0
    sleep 0.1
  done
  return 1
}

# job_end SECONDS: waits for the background job $job, SIGKILLing it after SECONDS (status
# 137 then); sets $status and $took. (Polls: a guard process would hold the test's output
# open until its sleep ended.)
job_end() {
  local start
  start=$(now)
  while kill -0 "$job" 2>/dev/null; do
    if awk -v a="$start" -v b="$(now)" -v l="$1" 'BEGIN { exit !(b - a > l) }'; then
      kill -KILL "$job" 2>/dev/null
      break
    fi
    sleep 0.1
  done
  wait "$job"
  status=$?
  took=$(elapsed "$start")
}

# nothing_left HOSTS…: no process is left in the given hosts.
nothing_left() {
  local h pids
  for h in "$@"; do
    pids=$(ip netns pids "mtp-$name-h$h" 2>/dev/null)
    [ -z "$pids" ] || { failed "processes left on host $h: $pids"; return 1; }
  done
  return 0
}

losses() { sed -nE 's/^step +([0-9]+)\/[0-9]+ +loss ([0-9.]+).*/\1 \2/p' "$1"; }

head -c 30000 /dev/urandom | base64 >"$work/corpus.txt"
train=(train --model tiny --data "$work/corpus.txt" --seq 32 --batch 4 --eval-batches 1)

case "$case_name" in
  train)
    # Not root: the script says why and exits 77, before making anything.
    out=$(setpriv --reuid 65534 --regid 65534 --clear-groups "$cluster" --name "$name" up \
      --hosts 2 --ranks-per-host 1 --link-mbit 100 2>&1)
    status=$?
    if [ "$(id -u)" -eq 0 ] && [ $status -eq 77 ] && grep -q "not root" <<<"$out"; then
      pass "not root: exit 77 ($out)"
    elif [ "$(id -u)" -eq 0 ]; then
      failed "not root: exit $status, expected 77: $out"
    fi
    up 2 2 200
    c show
    # Bad input: an error naming the value, exit 2 (usage) or 1, nothing made or changed.
    refused() {  # refused STATUS REGEX ARGS…
      local want=$1 regex=$2 out got
      shift 2
      out=$("$cluster" "$@" 2>&1)
      got=$?
      if [ $got -eq "$want" ] && grep -qE -- "$regex" <<<"$out"; then
        pass "refused: cluster.sh $* → exit $got"
      else
        failed "cluster.sh $*: exit $got, expected $want and /$regex/: $out"
      fi
    }
    refused 2 "--hosts '0': expected a positive integer" --name "${name}x" up --hosts 0 --ranks-per-host 1 --link-mbit 10
    refused 2 "--link-mbit '1e3'" --name "${name}x" up --hosts 2 --ranks-per-host 1 --link-mbit 1e3
    refused 2 "cluster name 'Bad!'" --name 'Bad!' down
    refused 2 "host '3' is not one of 1…2" --name "$name" cut 3
    refused 2 "run needs a command after --" --name "$name" run --
    refused 1 "is already up" --name "$name" up --hosts 1 --ranks-per-host 1 --link-mbit 10
    refused 1 "cluster '${name}y' is not up" --name "${name}y" run -- true
    refused 2 "host 1 is given twice" --name "$name" run --hosts 1,1 -- true
    refused 2 "a comma-separated list of host numbers" --name "$name" run --hosts 1,,2 -- true
    # A host cut before the launch is named at once — within run's --grace (default 3 s); nothing
    # starts.
    c cut 2 >/dev/null
    started=$(date +%s)
    refused 1 "host 2 .* is cut \\(its link is down\\)" --name "$name" run -- "$meshtp" "${train[@]}" --steps 4 --mesh 2x2
    [ $(($(date +%s) - started)) -le 3 ] || failed "a cut host was named only after $(($(date +%s) - started)) s, past the grace time (3 s)"
    c restore 2 >/dev/null
    ip netns list | grep -q "mtp-${name}x-" && failed "a refused up left namespaces"
    c run -- "$meshtp" "${train[@]}" --steps 4 --mesh 2x2 >"$work/cluster.log" 2>&1
    status=$?
    # One host, the same layout: the same losses to the printed digit.
    source "$repo/scripts/mpi_env.sh"
    mpirun -np 4 "$meshtp" "${train[@]}" --steps 4 --mesh 2x2 >"$work/local.log" 2>&1
    if [ $status -ne 0 ]; then
      failed "train on 2 hosts × 2 ranks: exit $status"
      tail -20 "$work/cluster.log"
    elif [ "$(losses "$work/cluster.log" | wc -l)" -ne 4 ] ||
      [ "$(losses "$work/cluster.log")" != "$(losses "$work/local.log")" ]; then
      failed "losses on 2 hosts differ from one host's:"
      paste <(losses "$work/cluster.log") <(losses "$work/local.log")
    else
      pass "2 hosts × 2 ranks, mesh 2x2: losses equal one host's ($(losses "$work/cluster.log" | tr '\n' ' '))"
    fi
    nothing_left 1 2
    # down twice: everything gone, and the second is a no-op.
    c down && c down
    if ip netns list | grep -q "mtp-$name-" || ip link show "mtp-$name" >/dev/null 2>&1 ||
      [ -e "/run/mtp-cluster/$name" ]; then
      failed "down left namespaces, the bridge or the state directory of '$name'"
    else
      pass "down (twice): no namespace, bridge or state left"
    fi
    ;;
  cut)
    up 2 2 200
    ck="$work/ck"
    # Every run of this case has --steps 60: the learning-rate schedule depends on it.
    c run -- "$meshtp" "${train[@]}" --steps 60 --mesh 2x2 --comm-timeout 3 \
      --checkpoint-dir "$ck" --checkpoint-every 5 >"$work/cut.log" 2>&1 &
    job=$!
    wait_for_step "$work/cut.log" 7 || failed "no step 7 within 60 s"
    sleep "0.$((RANDOM % 10))"  # anywhere in a step
    c cut 2
    job_end 20
    if [ $status -eq 0 ] || [ $status -eq 137 ]; then
      failed "link cut: exit $status after ${took} s (expected an error within 13 s)"
    elif awk -v t="$took" 'BEGIN { exit !(t > 13) }'; then
      failed "link cut: the job ended after ${took} s, more than --comm-timeout 3 + 10 s"
    elif ! grep -qE "did not complete within 3 s \(--comm-timeout.*world ranks? [23](,3)? did not arrive.*; on host mtp-$name-h2 \(world ranks? [23](,3)?\)" "$work/cut.log" ||
      grep -E "error: .*did not complete" "$work/cut.log" | grep -qv "on host mtp-$name-h2 "; then
      failed "link cut: exit $status in ${took} s without naming host 2 and ranks 2,3:"
      grep -m3 -E "error|cluster.sh" "$work/cut.log"
    else
      pass "host 2's link cut: exit $status in ${took} s: $(grep -m1 -oE 'error: [a-z_]+ #[0-9]+ on [^(]*|world ranks? [0-9,]+ did not arrive|; on host.*' "$work/cut.log" | head -3 | tr -d '\n')"
    fi
    nothing_left 1 2
    # Resume on host 1 alone, on a 2x1 mesh, from the newest checkpoint.
    c restore 2 >/dev/null
    c run --hosts 1 -- "$meshtp" "${train[@]}" --steps 60 --mesh 2x1 \
      --checkpoint-dir "$ck" --resume >"$work/resume.log" 2>&1
    status=$?
    first=$(losses "$work/resume.log" | head -1)
    step=${first%% *}
    # The same steps uninterrupted, on one host without the cluster: the loss the resumed run
    # must continue with (the cut run may have stopped right at its checkpoint).
    source "$repo/scripts/mpi_env.sh"
    mpirun -np 2 "$meshtp" "${train[@]}" --steps 60 --mesh 2x1 >"$work/ref.log" 2>&1
    before=$(losses "$work/ref.log" | awk -v s="$step" '$1 == s { print $2 }')
    if [ $status -ne 0 ] || [ -z "$first" ]; then
      failed "resume on host 1 (mesh 2x1): exit $status"
      tail -5 "$work/resume.log"
    elif [ -z "$before" ] || ! awk -v a="${first#* }" -v b="$before" 'BEGIN { d = a - b; exit !(d < 2e-3 && d > -2e-3) }'; then
      failed "resume on host 1 (mesh 2x1): step $step loss ${first#* }, uninterrupted '${before}'"
    else
      pass "resumed on host 1 alone (mesh 2x1) at step $step: loss ${first#* } (uninterrupted: $before)"
    fi
    ;;
  killed)
    up 2 2 200
    c run -- "$meshtp" "${train[@]}" --steps 100000 --mesh 2x2 --comm-timeout 30 \
      >"$work/killed.log" 2>&1 &
    job=$!
    wait_for_step "$work/killed.log" 5 || failed "no step 5 within 60 s"
    sleep "0.$((RANDOM % 10))"
    # shellcheck disable=SC2046
    kill -KILL $(ip netns pids "mtp-$name-h2")
    job_end 20
    if [ $status -eq 0 ] || [ $status -eq 137 ] || awk -v t="$took" 'BEGIN { exit !(t > 10) }'; then
      failed "host 2's processes killed: exit $status after ${took} s (expected an error within 10 s)"
      tail -5 "$work/killed.log"
    else
      pass "host 2's processes killed: exit $status in ${took} s"
    fi
    nothing_left 1 2
    ;;
  restored)
    up 2 2 200
    c run -- "$meshtp" "${train[@]}" --steps 30 --mesh 2x2 --comm-timeout 15 \
      >"$work/restored.log" 2>&1 &
    job=$!
    wait_for_step "$work/restored.log" 5 || failed "no step 5 within 60 s"
    c cut 2
    sleep 2
    c restore 2
    job_end 60
    if [ $status -ne 0 ] || [ "$(losses "$work/restored.log" | wc -l)" -ne 30 ]; then
      failed "link restored after 2 s: exit $status after ${took} s, $(losses "$work/restored.log" | wc -l) of 30 steps"
      grep -m3 error "$work/restored.log"
    else
      pass "host 2's link cut for 2 s and restored: all 30 steps, exit 0 (${took} s after the restore)"
    fi
    ;;
  node_disks)
    up 2 1 1000
    disk="/run/mtp-cluster/$name/disk"  # each host's own (cluster.sh up)
    disks="/run/mtp-cluster/$name/disks"
    c run -- "$meshtp" "${train[@]}" --steps 4 --checkpoint-every 2 --checkpoint-dir "$disk/ck"       >"$work/first.log" 2>&1
    status=$?
    if [ $status -ne 0 ] || [ ! -e "$disks/mtp-$name-h1/ck/checkpoint-00000004.safetensors" ] ||
      [ -e "$disks/mtp-$name-h2/ck" ]; then
      failed "per-node checkpoints: exit $status; host 1's disk: $(ls "$disks/mtp-$name-h1/ck" 2>&1 | tr '\n' ' '); host 2's: $(ls "$disks/mtp-$name-h2" | tr '\n' ' ')"
    else
      pass "steps 1-4: the checkpoints are on host 1's disk only (rank 0 writes them)"
    fi
    more=(--steps 8 --checkpoint-every 2 --checkpoint-dir "$disk/ck" --resume)
    c run -- "$meshtp" "${train[@]}" "${more[@]}" >"$work/nocopy.log" 2>&1
    status=$?
    if [ $status -ne 0 ] && grep -qE "error: --resume: .*cannot open '$disk/ck/checkpoint-00000004.safetensors': No such file or directory.*\(rank 1\)" "$work/nocopy.log"; then
      pass "--resume without host 1's checkpoints on host 2: exit $status naming the file and rank 1"
    else
      failed "--resume without a copy: exit $status:"
      grep -m3 error "$work/nocopy.log"
    fi
    cp -a "$disks/mtp-$name-h1/ck" "$disks/mtp-$name-h2/"
    c run -- "$meshtp" "${train[@]}" "${more[@]}" >"$work/copied.log" 2>&1
    status=$?
    c run -- "$meshtp" "${train[@]}" --steps 8 >"$work/straight.log" 2>&1
    if [ $status -ne 0 ] || [ "$(losses "$work/copied.log" | head -1 | cut -d' ' -f1)" != 5 ] ||
      [ "$(losses "$work/copied.log")" != "$(losses "$work/straight.log" | tail -4)" ]; then
      failed "--resume after the copy: exit $status; losses resumed / uninterrupted:"
      paste <(losses "$work/copied.log") <(losses "$work/straight.log" | tail -4)
    else
      pass "--resume after copying host 1's directory to host 2: steps 5-8 equal the uninterrupted run's ($(losses "$work/copied.log" | cut -d' ' -f2 | tr '\n' ' '))"
    fi
    nothing_left 1 2
    ;;
  *)
    echo "unknown case '$case_name'"
    exit 2
    ;;
esac
echo "$case_name: $failures failed"
[ $failures -eq 0 ]
