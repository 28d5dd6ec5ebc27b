#!/usr/bin/env bash
# scripts/bf16-curve.sh OUT [--model small] [--steps 200] [--ranks 2] [--mesh 2x1] [--check]: bf16 mixed
# precision against fp32 on the same training run (scripts/bf16_curve.py: both loss curves,
# their difference per step range, the validation losses; docs/precision.md).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { echo "usage: scripts/bf16-curve.sh OUT [--model M] [--steps N] [--ranks R] [--mesh d1xd2]" >&2; exit 2; }
[ -x build/src/cli/meshtp ] || scripts/install.sh
source scripts/mpi_env.sh
py=python3
if ! python3 -c "import matplotlib" 2>/dev/null && [ -x /usr/bin/python3 ] &&
  /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  py=/usr/bin/python3
fi
exec "$py" scripts/bf16_curve.py "$@"
