#!/usr/bin/env bash
# README command (1): install the runtime's packages, build the meshtp binary and install the
# Python module (the tests and the simulated build are the test command's: scripts/test.sh),
# then the main job
# on this machine's ranks —
#   1. calibrate: measure this machine's collectives and GeMM rate into a topology file;
#   2. plan + train: `meshtp train --mesh auto` asks the planner for the fastest tensor-
#      parallel layout on that topology, prints it, and trains the `small` GPT on the
#      default corpus (Debian's fortunes), writing a Chrome trace and per-step metrics.
# Each phase prints the time since the command started and how long it should take; the
# expected times are measured on a fresh 2-core machine (docs/building.md).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
phase() { printf '== [%s] %s ==\n' "$(date -u -d "@$((SECONDS - start))" +%M:%S)" "$*"; }

scripts/install.sh
source scripts/mpi_env.sh
build_dir=${MESHTP_BUILD_DIR:-build}
meshtp="$build_dir/src/cli/meshtp"
# The processors online, not nproc: nproc obeys OMP_NUM_THREADS (OMP_NUM_THREADS=1 is common
# on HPC clusters, and the demo would run 1 rank).
ranks=${MESHTP_RANKS:-$(getconf _NPROCESSORS_ONLN)}
out=${MESHTP_DEMO_DIR:-demo}
steps=${MESHTP_DEMO_STEPS:-200}
mkdir -p "$out"

echo
phase "1. calibrate $ranks local ranks → $out/local.json (about 5 seconds)"
mpirun -np "$ranks" "$meshtp" calibrate --out "$out/local.json" --seconds 0.05
echo
phase "2. plan + train the small GPT on $ranks ranks (--mesh auto), $steps steps (each line shows its eta)"
mpirun -np "$ranks" "$meshtp" train --model small --mesh auto --topology "$out/local.json" \
  --steps "$steps" --eval-every 50 --checkpoint-dir "$out/checkpoint" \
  --metrics "$out/metrics.jsonl" --trace "$out/trace.json"
phase "done: $out/metrics.jsonl, $out/trace.json (open in https://ui.perfetto.dev), $out/checkpoint/"
