#!/usr/bin/env bash
# cluster-bench.sh OUT [SHAPE:MBIT …]: the planner against execution on an emulated cluster
# (scripts/cluster.sh), one cluster per SHAPE:MBIT (default 2x2:50 2x2:200; SHAPE is
# HOSTSxRANKS_PER_HOST): calibrate across the hosts (the two levels: shared memory inside a
# host, the shaped link between), bench plan (predicted vs
# measured step and communication time of the planner's top candidates), and a few steps of
# train --mesh auto. Writes OUT/<shape>-<mbit>/{calibrate,bench-plan,train}.txt and the
# topology; docs/cluster.md holds a recorded run. About 10 minutes per cluster on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:?usage: scripts/cluster-bench.sh OUT [SHAPE:MBIT …]}
shift
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(2x2:50 2x2:200)
meshtp=$PWD/build/src/cli/meshtp
[ -x "$meshtp" ] || { echo "error: $meshtp not built (scripts/install.sh)"; exit 1; }
name=bench
trap 'scripts/cluster.sh --name $name down' EXIT
# The messages the bench model sends (8K–1M here) and beyond: a shaped link's time per byte
# grows up to ~256 KiB (its burst, TCP's window), and a fit through small sizes prices the
# large messages, which take the time, too cheaply (docs/cluster.md).
sizes=${CLUSTER_BENCH_SIZES:-64K,256K,1M,2M}
strategies=${CLUSTER_BENCH_STRATEGIES:-atp,megatron,tp1d}
for c in "${cases[@]}"; do
  shape=${c%%:*}
  mbit=${c##*:}
  hosts=${shape%%x*}
  rph=${shape##*x}
  dir="$out/$shape-$mbit"
  mkdir -p "$dir"
  echo "== $hosts hosts × $rph ranks, ${mbit} Mbit/s links → $dir"
  scripts/cluster.sh --name $name down
  scripts/cluster.sh --name $name up --hosts "$hosts" --ranks-per-host "$rph" --link-mbit "$mbit" || exit $?
  run() { scripts/cluster.sh --name $name run -- "$meshtp" "$@"; }
  start=$SECONDS
  # Intra-host times on 2 shared cores are noisy enough that a fit can find no slope: once more.
  for attempt in 1 2; do
    run calibrate --out "$dir/topology.json" --name "cluster-$shape-$mbit" --sizes "$sizes" \
      >"$dir/calibrate.txt" 2>&1 && break
    echo "   calibrate failed (attempt $attempt): $(grep -m1 '^error' "$dir/calibrate.txt")"
  done
  echo "   calibrate $((SECONDS - start)) s"
  [ -f "$dir/topology.json" ] || continue
  start=$SECONDS
  run bench plan --topology "$dir/topology.json" --strategies "$strategies" --top 6 \
    >"$dir/bench-plan.txt" 2>&1
  echo "   bench plan $((SECONDS - start)) s"
  start=$SECONDS
  run train --model small --mesh auto --topology "$dir/topology.json" --steps 4 \
    --eval-batches 1 >"$dir/train.txt" 2>&1
  echo "   train --mesh auto $((SECONDS - start)) s"
  grep -E "predicted best|step time:|communication estimate" "$dir/bench-plan.txt" | sed 's/^/   /'
  grep -E "^layout" "$dir/train.txt" | sed 's/^/   /'
done
