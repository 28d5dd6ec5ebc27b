#!/usr/bin/env bash
# README command (1), scripts/demo.sh, runs on the processors online, not on nproc's count,
# which obeys OMP_NUM_THREADS (issue 48: with OMP_NUM_THREADS=1, common on HPC clusters, the
# demo ran 1 rank and failed at calibrate). The demo is run as written, from a copy of
# scripts/ whose install.sh does nothing, with OMP_NUM_THREADS=1 and an mpirun on the PATH that
# records its arguments: both of its launches must ask for every processor online.
# usage: demo_ranks.sh REPO
set -uo pipefail
repo=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/repo/scripts" "$work/bin"
cp "$repo/scripts/demo.sh" "$repo/scripts/mpi_env.sh" "$work/repo/scripts/"
printf '#!/bin/sh\nexit 0\n' >"$work/repo/scripts/install.sh"
printf '#!/bin/sh\necho "$*" >>"%s/mpirun.log"\n' "$work" >"$work/bin/mpirun"
chmod +x "$work/repo/scripts/install.sh" "$work/bin/mpirun"
env -u MESHTP_RANKS OMP_NUM_THREADS=1 PATH="$work/bin:$PATH" "$work/repo/scripts/demo.sh" \
  >"$work/out.txt" 2>&1 || { echo "FAIL: demo.sh exited $?: $(cat "$work/out.txt")"; exit 1; }
want=$(getconf _NPROCESSORS_ONLN)
got=$(sed -n 's/^-np \([0-9]*\) .*/\1/p' "$work/mpirun.log" | sort -u | tr '\n' ' ')
if [ "$(wc -l <"$work/mpirun.log")" -ne 2 ] || [ "$got" != "$want " ]; then
  echo "FAIL: with OMP_NUM_THREADS=1 (nproc: $(OMP_NUM_THREADS=1 nproc)) the demo launched:"
  cat "$work/mpirun.log"
  echo "expected two launches of -np $want (the processors online)"
  exit 1
fi
echo "demo_ranks: ok (OMP_NUM_THREADS=1, nproc $(OMP_NUM_THREADS=1 nproc): both launches -np $want)"
