#!/usr/bin/env bash
# plan --3d writes a plan.json (pp, microbatches, schedule, zero, recompute, mesh) that
# `train --plan` runs: on 2 ranks a topology where the search picks a 2-stage pipeline, on 4
# ranks an NVLink-Network switch. Usage: plan3d_to_train.sh MESHTP SLOW_PAIR_JSON MPIEXEC…
set -euo pipefail
meshtp=$1 slow_pair=$2
shift 2
mpiexec=("$@")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() {  # ranks topology
  "$meshtp" plan --3d --topology "$2" --model tiny --out "$dir/plan.json" --top 3
  grep -q '"pp"' "$dir/plan.json"
  "${mpiexec[@]}" -np "$1" "$meshtp" train --model tiny --plan "$dir/plan.json" --steps 1 \
    --eval-batches 1 | tee "$dir/train.log"
  grep -q "layout from $dir/plan.json" "$dir/train.log"
  grep -Eq "^step +1/1  loss [0-9.]+" "$dir/train.log"
}
run 2 "$slow_pair"
grep -q "pp=2 microbatches=" "$dir/train.log"  # the search's pick for two slow links
run 4 nvlink-network-4
