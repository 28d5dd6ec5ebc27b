#!/usr/bin/env bash
# train_device_cli.sh MESHTP MPIEXEC…: --device and --collectives (cli/device_flags.hpp).
#  1. `train --device cpu --model tiny --mesh 2x2` on 4 ranks trains the losses of 1 rank
#     (every step's printed loss within 2e-4: the 4-decimal print and float reordering), and
#     its header says where tensors live and what moves them;
#  2. what cannot run is refused on every command that takes the flags, naming the value,
#     non-zero, on every rank (expect_failure.sh's rules: no rank left behind).
set -euo pipefail
meshtp=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(train --model tiny --seq 32 --batch 4 --steps 6 --eval-batches 1 --device cpu)
"$@" -np 1 "$meshtp" "${common[@]}" > "$work/one.log" 2>&1 || { cat "$work/one.log"; exit 1; }
"$@" -np 4 "$meshtp" "${common[@]}" --mesh 2x2 --collectives mpi > "$work/four.log" 2>&1 ||
  { cat "$work/four.log"; exit 1; }
grep -q "^device  cpu; collectives mpi (host memory over Open MPI)$" "$work/four.log" ||
  { echo "no device line:"; cat "$work/four.log"; exit 1; }
python3 - "$work/one.log" "$work/four.log" <<'PY'
import re, sys
def losses(path):
    return [float(m.group(1)) for m in re.finditer(r"^step +\d+/\d+  loss ([0-9.]+)", open(path).read(), re.M)]
one, four = losses(sys.argv[1]), losses(sys.argv[2])
assert len(one) == 6 and len(four) == 6, (one, four)
worst = max(abs(a - b) for a, b in zip(one, four))
assert worst <= 2e-4, f"mesh 2x2 losses {four} differ from 1 rank's {one} by {worst}"
print(f"losses 1 rank {one} / 2x2 {four}: max |diff| {worst:.1e}")
PY
fail() {  # fail REGEX NP ARGS…
  local regex=$1 np=$2
  shift 2
  "$here/../expect_failure.sh" "$regex" "${mpi[@]}" -np "$np" "$meshtp" "$@" > "$work/fail.log" 2>&1 ||
    { echo "FAIL: $*"; cat "$work/fail.log"; exit 1; }
}
mpi=("$@")
# Where no GPU answers, every command that runs on the CUDA backend fails alike on every rank,
# naming CUDA's error (block reads its files first: a missing one is named before any GPU).
if ! "$(dirname "$meshtp")/meshtp-gpu" probe 2>/dev/null | grep -q '^GPU: none'; then
  :  # a GPU (or no meshtp-gpu to ask): gpu-check.sh runs these for real
else
  cuda="error: --device cuda: no GPU to run on: no CUDA device: cudaError[A-Za-z]+ \\("
  fail "$cuda" 2 bench train --model tiny --steps 1 --device cuda
  fail "$cuda" 2 bench layer --device cuda --mesh 2x1 --no-check
  fail "$cuda" 1 bench rank --model tiny --mesh 2x1 --device cuda
  fail "$cuda" 2 train --model tiny --device cuda --precision bf16
fi
fail "error: cannot open 'w': No such file" 2 block --weights w --input x --out y --device cuda
fail "error: --device 'tpu' is not cpu or cuda" 2 train --model tiny --device tpu
fail "error: --collectives 'gloo' is not auto, mpi, host-staged or nccl" 2 train --model tiny --collectives gloo
fail "error: --collectives nccl moves device memory, but --device cpu keeps tensors in host memory" 2 \
  bench train --model tiny --collectives nccl
fail "error: --collectives host-staged moves device memory" 2 train --model tiny --collectives host-staged
echo "train_device_cli: ok"
