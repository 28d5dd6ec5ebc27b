#!/usr/bin/env bash
# Validation against published runs: scripts/validate.sh OUT [--check] [--simulate].
#   Korthikanti et al. 2023 Table 5's eight Megatron-LM runs, priced, each with its band (the
#   step at the ends of the topology's sourced ranges) and the coverage: how many measured
#   runs fall inside their band; the same layouts' activations per GPU against the paper's
#   Table 2: OUT/validation.{md,json,png} and OUT/index.html, the report page (docs/reports.md)
#   MeshSlice §5.1's FC-layer gains over Wang at 256 TPUv4 chips and its slice-count sweep
#   (Fig. 14), planned (and with --simulate, simulated: minutes), its strong-scaling trend
#   (Fig. 12, batch 32 on 64–256 chips), dataflow gain (Table 2) and real 4x4 slice without
#   overlap (Table 3), planned: OUT/meshslice.{md,json}
#   ATP Table 3's rates and chunk gains on IC1–IC4 beside the planner's, and its measured
#   mesh choices: OUT/atp.{md,json}, each sourced effect's move OUT/atp-effects.md, the
#   topologies priced OUT/atp-ic*.json (a comparison; no criterion)
#   the Llama 3 paper's Table 4 405B rows on H100 priced: OUT/llama3.{md,json} (a comparison)
#   published mixture-of-experts runs on H100 (Megatron-Core's Mixtral 8x7B, its MoE model zoo's
#   Mixtral 8x22B; Liu et al. 2025's Mixtral 8x22B and Qwen2-57B-A14B rows have no layout found
#   and are not priced): OUT/moe.{md,json} (a comparison; docs/moe.md)
#   a fit on one published run (Narayanan et al. 2021 Table 1's 39.1B row, calibrate
#   --from-step-log) checked on the table's other nine: OUT/narayanan.{md,json}
#   published runs of DeepSpeed's pipeline engine (BLOOM-176B, MT-NLG 530B) priced as Megatron-LM
#   and as DeepSpeed runs a pipeline: OUT/deepspeed.{md,json} (a comparison)
# --check exits 1 when either misses its criterion (docs/validation.md says which, and where
# every constant comes from).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { echo "usage: scripts/validate.sh OUT [--check] [--simulate]" >&2; exit 2; }
# Debian's python3 has python3-matplotlib (scripts/install.sh); a python3 earlier on the PATH
# (a pyenv, a venv) may not, and then the plots and the page would be skipped.
py=python3
if ! python3 -c "import matplotlib" 2>/dev/null && [ -x /usr/bin/python3 ] &&
  /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  py=/usr/bin/python3
fi
table5_args=()
for arg in "$@"; do [[ $arg == --simulate ]] || table5_args+=("$arg"); done
"$py" scripts/validate.py "${table5_args[@]}"
"$py" scripts/validate_meshslice.py "$@"
"$py" scripts/validate_atp.py "$1"
# The Llama 3 paper's Table 4 405B rows on H100: a comparison, no criterion (not met; docs/validation.md).
"$py" scripts/validate_llama3.py "$1"
# Published MoE runs on H100: a comparison, no criterion (docs/moe.md says which rows have no
# stated layout and are not priced).
"$py" scripts/validate_moe.py "$1"
# A fit on one published run checked on the other runs of the same cluster: Narayanan et al.
# 2021 Table 1, its 39.1B row fitted by calibrate --from-step-log, the other nine priced before
# and after (docs/validation.md): OUT/narayanan.{md,json}; a comparison, no criterion.
"$py" scripts/validate_narayanan.py "$1"
# Published runs of DeepSpeed's pipeline engine (BLOOM-176B, MT-NLG 530B), priced as Megatron-LM
# and as DeepSpeed runs a pipeline (--runtime megatron / deepspeed): OUT/deepspeed.{md,json}; a
# comparison, no criterion (docs/validation.md "DeepSpeed's pipeline engine").
"$py" scripts/validate_deepspeed.py "$1"
