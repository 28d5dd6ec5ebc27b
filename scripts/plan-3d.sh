#!/usr/bin/env bash
# The 3D planner's large-model questions (docs/pipeline.md): MT-NLG 530B on 256 TPUv4 chips,
# and GPT-3 175B at Megatron-LM's batch of 1536 on 1024 A100s (128 DGX A100 nodes) and on
# 1536 (192 nodes: the GPU count of Narayanan et al. 2021 Table 1's 175B row, t = 8, p = 16).
# Pure computation, a few seconds. Usage: scripts/plan-3d.sh [MESHTP]
set -euo pipefail
meshtp=${1:-build/src/cli/meshtp}
set -x
"$meshtp" plan --3d --topology tpuv4-torus-16x16 --model mt-nlg-530b \
  --strategies atp,tp1d,meshslice --top 5
"$meshtp" plan --3d --topology dgx-a100-128x8 --model gpt3-175b --batch 1536 --top 5
"$meshtp" plan --3d --topology dgx-a100-192x8 --model gpt3-175b --batch 1536 --top 5
