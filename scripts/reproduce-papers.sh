#!/usr/bin/env bash
# scripts/reproduce-papers.sh [OUT_DIR] [--full] [--suites atp,fig12,meshslice,ksweep] [--jobs N]
# [--max-devices N] [--algorithms A,B] [--what gemm2d|layer] [--merge] [--reprice]: the papers'
# cases on simulated clusters (`meshtp simulate`, both builds from scripts/install.sh --sim), written
# to OUT_DIR (default repro/) as results.md, results.json and PNG plots. Which cases run by
# default and which only with --full: scripts/reproduce_papers.py's docstring and
# docs/simulation.md. --max-devices N runs only the cases of at most N devices; --algorithms
# and --what only the MeshSlice-suite cases of those 2D GeMM algorithms / of that kind (after a
# change to one algorithm); --merge keeps OUT_DIR's recorded cases that are not run now;
# --reprice simulates nothing and prices the recorded runs again with this build's planner.
set -euo pipefail
cd "$(dirname "$0")/.."
out=repro
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then out=$1; shift; fi
[ -x build/src/cli/meshtp ] && [ -x build-sim/src/cli/meshtp ] || scripts/install.sh --sim
# Debian's python3 has python3-matplotlib (scripts/install.sh --sim); a python3 earlier on PATH (a
# pyenv, a venv) may not, and then the plots would be skipped.
py=python3
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  py=/usr/bin/python3
fi
exec "$py" scripts/reproduce_papers.py "$out" --meshtp build/src/cli/meshtp "$@"
