#!/usr/bin/env bash
# moe_forced_memory.sh MESHTP MPIEXEC…: with forced balanced routing (--moe-force-balance,
# the routing the planner prices), every rank's predicted / measured tensor memory of tiny-moe
# lies within 10% on the expert layouts train runs (expert parallelism over the whole mesh,
# ep × etp, with a pipeline); and the flag is refused for a dense model, naming it.
set -euo pipefail
meshtp=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
check() {  # NP FLAGS…
  local np=$1
  shift
  "${mpi[@]}" -np "$np" "$meshtp" train --model tiny-moe --steps 2 --eval-batches 1 \
    --moe-force-balance "$@" > "$work/log" 2>&1 || { cat "$work/log"; exit 1; }
  python3 - "$work/log" "np=$np $*" <<'PY'
import re, sys
text, what = open(sys.argv[1]).read(), sys.argv[2]
ratios = [float(r) for r in re.findall(r"predicted/measured ([0-9.]+)", text)]
assert ratios, f"{what}: no memory lines:\n{text}"
worst = max(abs(r - 1) for r in ratios)
assert worst <= 0.10, f"{what}: predicted/measured {ratios} (beyond 10%)"
print(f"{what}: predicted/measured {min(ratios):.3f}-{max(ratios):.3f}")
PY
}
mpi=("$@")
check 4 --mesh 4x1 --sequence-parallel
check 4 --mesh 4x1 --sequence-parallel --ep 2 --etp 2
check 4 --pp 2 --microbatches 2 --mesh 2x1 --sequence-parallel
"$here/../expect_failure.sh" "error: --moe-force-balance: model 'tiny' has no experts \(num_experts=0\)" \
  "${mpi[@]}" -np 2 "$meshtp" train --model tiny --steps 1 --moe-force-balance > "$work/fail" 2>&1 ||
  { cat "$work/fail"; exit 1; }
echo "moe_forced_memory: ok"
