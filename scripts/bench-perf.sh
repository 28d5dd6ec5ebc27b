#!/usr/bin/env bash
# The README's performance numbers in one run (10–20 minutes on two idle cores), printed and
# written as one JSON file (default bench-perf.json; `--out FILE`; the raw JSON lines of every
# run go to bench-perf-raw/):
#   1. the elementwise kernels against their naive references (bench elementwise), and the
#      rate `meshtp calibrate` measures (LayerNorm + GeLU, forward + backward) both ways; with
#      `--baseline BIN` (a meshtp built before the fast kernels) also `calibrate` itself on
#      2 ranks, this build and BIN interleaved;
#   2. the GPT block stack's forward + backward (bench layer, 2 blocks, every mesh, chunks 1
#      and 2; the best layout counts) on h512/s256/b4, h1024/s512/b2, h256/s128/b8;
#   3. the `small` model's whole training step per phase (bench train);
#   4. when Debian's python3-torch is installed (scripts/install.sh --peers), the PyTorch peer
#      on the same model (scripts/bench-peer.sh);
# each at 1 and 2 ranks, as ratios to one rank's BLAS measured in the same run, medians over
# `--repeats` runs (default 3). Ratios, not absolute times, carry over between machines and
# loads; `uptime` is printed first and last so a loaded machine shows.
#   scripts/bench-perf.sh [--out FILE] [--repeats N] [--seconds S] [--no-peer] [--baseline BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env.sh
out=bench-perf.json repeats=3 seconds=2 peer=1 baseline=
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --no-peer) peer=0; shift ;;
    --baseline) baseline=$2; shift 2 ;;
    *) echo "error: unknown argument '$1' (scripts/bench-perf.sh [--out FILE] [--repeats N] [--seconds S] [--no-peer] [--baseline BIN])" >&2
       exit 2 ;;
  esac
done
meshtp=${MESHTP_BUILD_DIR:-build}/src/cli/meshtp
[ -x "$meshtp" ] || scripts/install.sh
if [ -n "$baseline" ] && [ ! -x "$baseline" ]; then
  echo "error: --baseline '$baseline' is not an executable meshtp" >&2
  exit 2
fi
# the raw JSON lines of every run, kept next to the summary for a second look
raw=${out%.json}-raw
rm -rf "$raw" && mkdir -p "$raw"
uptime | tee "$raw/uptime_start"
# What ran: the CPU, the elementwise kernels' instruction set, OpenBLAS's kernel core
# (OPENBLAS_CORETYPE in the environment overrides its CPU detection, for meshtp and the
# PyTorch peer alike: both load the same libopenblas).
blas_core=$(/usr/bin/python3 -c 'import ctypes; f = ctypes.CDLL("libopenblas.so.0").openblas_get_corename
f.restype = ctypes.c_char_p; print(f().decode())' 2>/dev/null || echo unknown)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "{\"cpu\": \"$cpu\", \"cores\": $(nproc), \"openblas_core\": \"$blas_core\", \"openblas_coretype_env\": \"${OPENBLAS_CORETYPE:-}\"}" \
  >"$raw/machine.json"
echo "cpu: $cpu, $(nproc) cores; OpenBLAS kernels: $blas_core"
# The load probe: a lone 1 MiB all_reduce between 2 ranks, first and last. When other jobs
# share the cores it grows to scheduler time slices (tens of ms), and so does every 2-rank
# step's "comm wait": read the 2-rank ratios against it.
probe() { mpirun -np 2 "$meshtp" bench collectives --sizes 1M --seconds 0.3 --json |
  grep '"all_reduce"' >>"$raw/probe.jsonl"; }
probe

echo; echo "== 1. elementwise kernels vs their naive references (bench elementwise)"
"$meshtp" bench elementwise
for _ in $(seq "$repeats"); do "$meshtp" bench elementwise --json >>"$raw/elementwise.jsonl"; done
if [ -n "$baseline" ]; then
  # calibrate prints "… N GB/s elementwise per rank" (every version does); the collective and
  # GeMM parts are cut to the minimum, the elementwise part is calibrate's default.
  for _ in $(seq "$repeats"); do
    for which in baseline current; do
      bin=$meshtp; [ "$which" = baseline ] && bin=$baseline
      gbps=$(mpirun -np 2 "$bin" calibrate --out "$raw/calibrate.json" --sizes 16K,64K \
        --gemm 64x64x64 --repeats 3 | sed -n 's/.* \([0-9.]*\) GB\/s elementwise per rank.*/\1/p')
      echo "calibrate ($which): $gbps GB/s elementwise per rank"
      echo "{\"binary\": \"$which\", \"elementwise_gbps\": $gbps}" >>"$raw/calibrate.jsonl"
    done
  done
fi

echo; echo "== 2. GPT block stack, forward + backward (bench layer --layers 2, every mesh, chunks 1,2)"
for cfg in "512 8 256 4" "1024 16 512 2" "256 8 128 8"; do
  read -r h a s b <<<"$cfg"
  for np in 1 2; do
    for _ in $(seq "$repeats"); do
      mpirun -np "$np" "$meshtp" bench layer --hidden "$h" --heads "$a" --seq "$s" --batch "$b" \
        --layers 2 --mesh all --chunks 1,2 --seconds "$seconds" --json |
        sed "s/^{/{\"np\":$np,/" >>"$raw/layer.jsonl"
    done
  done
done

echo; echo "== 3. the small model's training step per phase (bench train)"
for np in 1 2; do
  mpirun -np "$np" "$meshtp" bench train --model small --mesh "${np}x1" --steps 10
  for _ in $(seq "$repeats"); do
    mpirun -np "$np" "$meshtp" bench train --model small --mesh "${np}x1" --steps 10 --json \
      >>"$raw/train.jsonl"
  done
done

if [ "$peer" = 1 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo; echo "== 4. PyTorch peer (scripts/bench-peer.sh)"
  scripts/bench-peer.sh --model small --ranks 1,2 --steps 10 --repeats "$repeats" \
    --json "$raw/peer.json"
else
  echo; echo "(4. PyTorch peer skipped: scripts/install.sh --peers installs python3-torch)"
fi
probe
uptime | tee "$raw/uptime_end"

python3 scripts/bench_perf_summary.py "$raw" "$out"
