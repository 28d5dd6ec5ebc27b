#!/usr/bin/env python3
"""emit_torchtitan_checks.py MESHTP WORKDIR: torchtitan configurations meshtp writes, through
torchtitan's own configuration checks (issue 45, "Done when: Export"; issue 46's expert degree).

Each layout below is planned with `--emit torchtitan --emit-file F`. The world size and the layer
count come from F's header ("… (N devices)", "a flavor of L layers"). Where TORCHTITAN_DIR names a
torchtitan checkout (v0.2.2, the spelling meshtp emits), F goes through
scripts/torchtitan_check_config.py (torchtitan's ConfigManager, ParallelDims and stage split;
run by /usr/bin/python3) and must pass; a copy of the first with one degree changed must be
refused, so the check cannot pass by accident. Without TORCHTITAN_DIR that step is said to be
skipped. Prints one line per layout."""
import os
import re
import subprocess
import sys

meshtp, workdir = sys.argv[1], sys.argv[2]
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.makedirs(workdir, exist_ok=True)
checker = os.path.join(root, "scripts", "torchtitan_check_config.py")
titan = os.environ.get("TORCHTITAN_DIR", "")

LAYOUTS = {
    # README §4: Llama 3 405B at 131,072 tokens, context parallel 16, uneven stages.
    "llama3-405b-131k": ["--3d", "--runtime", "megatron", "--topology", "dgx-h100-2048x8",
                         "--model", "llama3-405b", "--seq", "131072", "--batch", "128",
                         "--max-cp", "16", "--uneven-stages", "--max-tp", "8",
                         "--strategies", "tp1d"],
    # README §2: GPT-3 175B on 64 A100 (interleaved pipeline).
    "gpt3-175b": ["--3d", "--topology", "dgx-a100-8x8", "--model", "gpt3-175b"],
    # README §5: Mixtral 8x7B on two DGX H100 nodes (expert parallel 8).
    "mixtral-8x7b": ["--3d", "--topology", "dgx-h100-2x8", "--model", "mixtral-8x7b"],
    # FSDP (ZeRO-3) without a pipeline: Llama 3 8B on one node.
    "llama3-8b-fsdp": ["--3d", "--evaluate", "--topology", "dgx-h100-1x8", "--model",
                       "llama3-8b", "--batch", "64", "--dp", "8", "--mesh", "1x1", "--zero", "3",
                       "--microbatches", "8", "--attention", "fused"],
}


def fail(message):
    sys.exit(f"emit_torchtitan_checks: {message}")


def check(path, world, layers):
    return subprocess.run(["/usr/bin/python3", checker, titan, path, str(world), str(layers)],
                          capture_output=True, text=True)


first = None
for name, args in LAYOUTS.items():
    path = os.path.join(workdir, name + ".toml")
    run = subprocess.run([meshtp, "plan", *args, "--emit", "torchtitan", "--emit-file", path],
                         capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"{name}: meshtp plan failed: {run.stderr.strip()}")
    text = open(path).read()
    world = re.search(r"\((\d+) devices\)", text)
    layers = re.search(r"a flavor of (\d+) layers", text)
    if not world or not layers:
        fail(f"{name}: the header names no device count or layer count")
    world, layers = int(world.group(1)), int(layers.group(1))
    if not titan:
        print(f"{name}: {world} GPUs, {layers} layers; torchtitan checks skipped "
              "(TORCHTITAN_DIR not set)")
        continue
    result = check(path, world, layers)
    if result.returncode != 0 or "torchtitan checks passed" not in result.stdout:
        fail(f"{name}: {result.stdout.strip()} {result.stderr.strip()[-400:]}")
    print(f"{name}: {result.stdout.strip()}")
    first = first or (path, world, layers, text)

if first:
    path, world, layers, text = first
    damaged = os.path.join(workdir, "damaged.toml")
    degree = re.search(r"tensor_parallel_degree = (\d+)", text).group(1)
    with open(damaged, "w") as f:
        f.write(text.replace(f"tensor_parallel_degree = {degree}",
                             f"tensor_parallel_degree = {2 * int(degree)}", 1))
    result = check(damaged, world, layers)
    if result.returncode == 0:
        fail("a configuration with its tensor-parallel degree doubled passed the checks")
    print(f"self-check: {result.stdout.strip().splitlines()[0]}")
