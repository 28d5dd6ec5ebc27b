#!/usr/bin/env bash
# Validation against published runs: scripts/validate.sh OUT [--check]. Prices Korthikanti et
# al. 2023 Table 5's eight Megatron-LM runs and writes OUT/validation.{md,json,png}
# (docs/validation.md says where every constant comes from).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { echo "usage: scripts/validate.sh OUT [--check]" >&2; exit 2; }
exec python3 scripts/validate.py "$@"
