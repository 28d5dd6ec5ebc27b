#!/usr/bin/env bash
# scripts/reproduce-papers.sh [OUT_DIR] [--full] [--suites atp,fig12,meshslice]: the papers'
# cases on simulated clusters (`meshtp simulate`, both builds from scripts/install.sh), written
# to OUT_DIR (default repro/) as results.md, results.json and PNG plots. Which cases run by
# default and which only with --full: scripts/reproduce_papers.py's docstring and
# docs/simulation.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=repro
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then out=$1; shift; fi
[ -x build/src/cli/meshtp ] && [ -x build-sim/src/cli/meshtp ] || scripts/install.sh
exec python3 scripts/reproduce_papers.py "$out" --meshtp build/src/cli/meshtp "$@"
