#!/usr/bin/env bash
# smpirun.sh NP PROGRAM ARGS…: run a program of the simulated tree (build-sim/) on NP simulated
# devices of tests/sim/flat16.xml (or $MESHTP_SIM_PLATFORM):
# NP·(1 + streams) SMPI ranks — the devices, then each communication stream's engines
# (src/comm/smpi_glue.hpp) — with the hostfile listing the devices' hosts once per role, under
# src/sim/smpirun_options.txt. MESHTP_SIM_MODE=values|charged passes through.
set -euo pipefail
np=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
platform=${MESHTP_SIM_PLATFORM:-$here/flat16.xml}
streams=${MESHTP_SIM_STREAMS:-2}
export MESHTP_SIM_STREAMS=$streams
mapfile -t options < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' \
  "$here/../../src/sim/smpirun_options.txt")
hostfile=$(mktemp)
trap 'rm -f "$hostfile"' EXIT
for _ in $(seq 0 "$streams"); do
  for i in $(seq 0 $((np - 1))); do echo "d$i"; done
done >"$hostfile"
smpirun -np $((np * (streams + 1))) -platform "$platform" -hostfile "$hostfile" "${options[@]}" "$@"
