#!/usr/bin/env bash
# meshtp against PyTorch on the same GPT, in one run: checks both train the same model (same
# state, same batches → same losses), then times their training steps interleaved at 1 and 2
# tensor-parallel ranks (bench/peers/bench_peer.py). Needs Debian's python3-torch:
# `scripts/install.sh --peers`. Extra arguments go to bench_peer.py (--model, --ranks,
# --steps, --repeats, --json FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env.sh
# Debian's torch lives in the system interpreter's dist-packages.
python=/usr/bin/python3
[ -x "$python" ] || python=python3
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "error: PyTorch is not installed for $python: run scripts/install.sh --peers" >&2
  exit 1
fi
build_dir=${MESHTP_BUILD_DIR:-build}
[ -x "$build_dir/src/cli/meshtp" ] || scripts/install.sh
exec "$python" bench/peers/bench_peer.py --meshtp "$build_dir/src/cli/meshtp" "$@"
