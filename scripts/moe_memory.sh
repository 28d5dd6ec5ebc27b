#!/usr/bin/env bash
# Memory predicted / measured of tiny-moe on each layout `meshtp train` runs a mixture of
# experts on (docs/moe.md, the runtime's memory table): the ratios of every rank, sorted;
# the layouts with context parallelism; then tiny-moe with 4 layers and moe_every 2 (MoE
# layers 0 and 2, dense 1 and 3).
#   scripts/moe_memory.sh [MESHTP [FLAG…]]   (default build/src/cli/meshtp; each FLAG is
#                                           added to every run, e.g. --moe-force-balance)
set -euo pipefail
cd "$(dirname "$0")/.."
meshtp=${1:-build/src/cli/meshtp}
shift || true
extra=("$@")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
model=tiny-moe
run() {
  local np=$1; shift
  local out
  out=$(mpirun --oversubscribe -np "$np" "$meshtp" train --model "$model" --steps 3 "$@" "${extra[@]}" 2>&1) || {
    echo "np=$np $*: failed"; echo "$out" | grep -m1 error >&2; return 1; }
  echo "np=$np $*: $(echo "$out" | grep -o 'predicted/measured [0-9.]*' | awk '{print $2}' |
                      sort -n | tr '\n' ' ')"
}
run 1
run 2 --mesh 2x1 --sequence-parallel
run 2 --mesh 2x1 --sequence-parallel --ep 1 --etp 2
run 4 --mesh 4x1 --sequence-parallel
run 4 --mesh 4x1 --sequence-parallel --ep 2 --etp 2
run 4 --mesh 4x1 --sequence-parallel --ep 1 --etp 4
run 4 --dp 2 --mesh 2x1 --sequence-parallel --zero 1
run 4 --dp 2 --mesh 2x1 --sequence-parallel --ep 1 --etp 2 --zero 1
run 4 --dp 2 --mesh 2x1 --sequence-parallel --zero 2
run 4 --pp 2 --microbatches 2 --mesh 2x1 --sequence-parallel
run 4 --pp 2 --microbatches 2 --mesh 2x1 --sequence-parallel --ep 1 --etp 2 --recompute full
run 8 --dp 2 --pp 2 --microbatches 2 --mesh 2x1 --sequence-parallel --ep 1 --etp 2
run 2 --mesh 2x1 --sequence-parallel --recompute full
run 2 --dp 2 --mesh 1x1
echo "context parallelism (the experts folded over tp·cp):"
run 2 --cp 2
run 2 --cp 2 --ep 1 --etp 2
run 4 --mesh 2x1 --sequence-parallel --cp 2
run 4 --mesh 2x1 --sequence-parallel --cp 2 --ep 2 --etp 2
run 4 --dp 2 --cp 2
run 4 --cp 4
run 4 --pp 2 --microbatches 2 --cp 2

every2=$(mktemp --suffix=.json)
trap 'rm -f "$every2"' EXIT
python3 - "$every2" <<'PY'
import json, sys
m = json.load(open("models/tiny-moe.json"))
m.update(name="tiny-moe-every-2", layers=4, moe_every=2)
json.dump(m, open(sys.argv[1], "w"))
PY
model=$every2
echo "moe_every 2:"
run 1
run 1 --recompute full
run 2 --mesh 2x1 --sequence-parallel
run 2 --mesh 2x1 --sequence-parallel --recompute full
run 4 --mesh 4x1 --sequence-parallel --ep 2 --etp 2
run 4 --mesh 4x1 --sequence-parallel --ep 1 --etp 4 --recompute full
run 4 --pp 2 --microbatches 2 --mesh 2x1 --sequence-parallel
