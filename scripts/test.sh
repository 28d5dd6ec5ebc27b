#!/usr/bin/env bash
# README command (2): install + build everything (build/ with its tests, build-sim/ with its
# tests), then run the whole test suite (unit, MPI at 1/2/4/8 ranks, and bad-input tests) and
# the simulated tree's tests (build-sim/, label sim: the same code on SimGrid SMPI). ctest
# sets the MPI environment itself.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh --tests --sim
build_dir=${MESHTP_BUILD_DIR:-build}
# MPI tests take 2 processors each; two at a time keep the 2-core machine busy, not swamped.
ctest --test-dir "$build_dir" --output-on-failure -j 2
ctest --test-dir "${MESHTP_SIM_BUILD_DIR:-build-sim}" --output-on-failure -j 2
