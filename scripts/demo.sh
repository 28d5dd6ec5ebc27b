#!/usr/bin/env bash
# README command (1): install + build, then run the main job on this machine's ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
source scripts/mpi_env.sh
build_dir=${MESHTP_BUILD_DIR:-build}

echo "== meshtp bench collectives on 4 local ranks, mesh 2x2 =="
mpirun -np 4 "$build_dir/src/cli/meshtp" bench collectives --mesh 2x2
