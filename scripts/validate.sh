#!/usr/bin/env bash
# Validation against published runs: scripts/validate.sh OUT [--check] [--simulate].
#   Korthikanti et al. 2023 Table 5's eight Megatron-LM runs, priced: OUT/validation.{md,json,png}
#   MeshSlice §5.1's FC-layer gains over Wang at 256 TPUv4 chips, planned (and with
#   --simulate, simulated: minutes): OUT/meshslice.{md,json}
# --check exits 1 when either misses its criterion (docs/validation.md says which, and where
# every constant comes from).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { echo "usage: scripts/validate.sh OUT [--check] [--simulate]" >&2; exit 2; }
table5_args=()
for arg in "$@"; do [[ $arg == --simulate ]] || table5_args+=("$arg"); done
python3 scripts/validate.py "${table5_args[@]}"
python3 scripts/validate_meshslice.py "$@"
