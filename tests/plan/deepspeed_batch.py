#!/usr/bin/env python3
"""deepspeed_batch.py MESHTP WORKDIR: the batch sizes of `--emit deepspeed`, as DeepSpeed v0.16.4
itself computes and checks them when `deepspeed.initialize` builds its config (issue 48, "Done
when: Exports"). DeepSpeed is not installed here, so its arithmetic is restated from its source
at tag v0.16.4, and the world it counts comes from the case (the GPUs launched), not from the
file's own `_meshtp` notes:

- deepspeed/__init__.py, initialize: a model that is not a PipelineModule gets
  DeepSpeedConfig(config, mpu) with the caller's mpu — none for AutoTP (the emitted comment says
  no mpu is given) — and mesh_device only where the config has both "sequence_parallel_size" and
  "data_parallel_size"; a PipelineModule gets DeepSpeedConfig(config, model.mpu()).
- deepspeed/runtime/config.py, DeepSpeedConfig.__init__: world_size is
  mpu.get_data_parallel_world_size() with an mpu, else dist.get_world_size() — every rank,
  the AutoTP group's ranks included. _set_batch_related_parameters changes nothing when
  train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps are all
  given; _batch_assertion then asserts each > 0 and train_batch_size == micro × accumulation ×
  world_size.
- deepspeed/runtime/pipe/module.py, PipelineModule.__init__: without a topology, num_stages
  stages and PipeDataParallelTopology(num_pp=num_stages, num_dp=world // num_stages), so its
  mpu's data-parallel world is world / num_stages; deepspeed/runtime/pipe/engine.py,
  PipelineEngine.__init__, asserts the same product against grid.data_parallel_size.
- deepspeed/runtime/engine.py, _configure_tensor_parallel_states (autotp_size > 1): ZeRO stage
  at most 2.

Beyond DeepSpeed's own check, a step must train the planner's batch B of distinct sequences:
micro × accumulation × (the data-parallel groups: GPUs / (autotp_size × num_stages)) = B.
Prints one line per case."""
import json
import os
import re
import subprocess
import sys

meshtp, workdir = sys.argv[1:3]
os.makedirs(workdir, exist_ok=True)

# (GPUs launched, the batch B, plan arguments): evaluated layouts of every kind DeepSpeed
# runs — data parallel alone, AutoTP without an mpu (with accumulation, with ZeRO-1), a
# pipeline (PipelineModule's mpu) — one it cannot run (AutoTP under its pipeline engine: the
# fallback), and searched ones (3D, the 2D table's fallback, GPT-3 on 1,024 GPUs).
CASES = [
    (8, 16, ["--3d", "--evaluate", "--topology", "nvswitch-8xa100", "--model", "tiny",
             "--batch", "16", "--dp", "8"]),
    (8, 16, ["--3d", "--evaluate", "--topology", "nvswitch-8xa100", "--model", "tiny",
             "--batch", "16", "--dp", "2", "--mesh", "4x1", "--strategy", "megatron",
             "--microbatches", "2"]),
    (8, 32, ["--3d", "--evaluate", "--topology", "nvswitch-8xa100", "--model", "tiny",
             "--batch", "32", "--dp", "4", "--mesh", "2x1", "--strategy", "megatron",
             "--microbatches", "4", "--zero", "1"]),
    (8, 16, ["--3d", "--evaluate", "--topology", "nvswitch-8xa100", "--model", "tiny",
             "--batch", "16", "--dp", "4", "--pp", "2", "--microbatches", "4", "--schedule",
             "1f1b"]),
    (8, 16, ["--3d", "--evaluate", "--topology", "nvswitch-8xa100", "--model", "tiny",
             "--batch", "16", "--dp", "2", "--mesh", "2x1", "--strategy", "megatron", "--pp",
             "2", "--microbatches", "2", "--schedule", "1f1b"]),
    (8, 8, ["--3d", "--topology", "nvswitch-8xa100", "--model", "tiny"]),
    (8, 4, ["--topology", "pcie-8xa100", "--model", "atp-m4", "--devices", "8"]),
    (1024, 1536, ["--3d", "--topology", "dgx-a100-128x8", "--model", "gpt3-175b", "--batch",
                  "1536"]),
]


def fail(message):
    sys.exit(f"deepspeed_batch: {message}")


autotp_cases = pipeline_cases = 0
for n, (gpus, batch, args) in enumerate(CASES, 1):
    target = f"{workdir}/case{n}.json"
    shown = " ".join(args)
    run = subprocess.run([meshtp, "plan", *args, "--emit", "deepspeed", "--emit-file", target],
                         capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"plan {shown}: exit {run.returncode}: {run.stderr.strip()}")
    config = json.load(open(target))
    comments = config["_meshtp"]["comment"]
    stages = [int(m.group(1)) for c in comments
              if (m := re.search(r"PipelineModule\(\.\.\., num_stages=(\d+)\)", c))]
    num_stages = stages[0] if stages else 1
    autotp = config.get("tensor_parallel", {}).get("autotp_size", 1)
    train = config.get("train_batch_size")
    micro = config.get("train_micro_batch_size_per_gpu")
    accumulation = config.get("gradient_accumulation_steps")
    if None in (train, micro, accumulation):
        fail(f"plan {shown}: all three batch keys are needed for DeepSpeed to take them as "
             f"given: {train}, {micro}, {accumulation}")
    if "sequence_parallel_size" in config or "data_parallel_size" in config:
        fail(f"plan {shown}: the config would make deepspeed.initialize build a mesh device")
    if num_stages > 1:
        if autotp > 1:
            fail(f"plan {shown}: AutoTP {autotp} under the pipeline engine")
        if gpus % num_stages:
            fail(f"plan {shown}: num_stages {num_stages} does not divide {gpus} GPUs")
        world = gpus // num_stages  # PipelineModule's mpu: the data-parallel world
        how = f"PipelineModule's mpu, {gpus} / {num_stages} stages"
        pipeline_cases += 1
    else:
        world = gpus  # no mpu: dist.get_world_size()
        how = "no mpu, every rank" + (f" (AutoTP {autotp})" if autotp > 1 else "")
        autotp_cases += autotp > 1
    if min(train, micro, accumulation) <= 0 or train != micro * accumulation * world:
        fail(f"plan {shown}: DeepSpeed's _batch_assertion fails: {train} != {micro} * "
             f"{accumulation} * {world} ({how})")
    if autotp > 1 and config["zero_optimization"]["stage"] > 2:
        fail(f"plan {shown}: AutoTP with ZeRO stage {config['zero_optimization']['stage']}")
    groups = gpus // (autotp * num_stages)
    if micro * accumulation * groups != batch:
        fail(f"plan {shown}: a step trains {micro} × {accumulation} × {groups} data-parallel "
             f"groups = {micro * accumulation * groups} distinct sequences, not the batch {batch}")
    print(f"ok   plan {shown}: train_batch_size {train} = {micro} × {accumulation} × {world} "
          f"({how}); {batch} distinct sequences per step")
if not autotp_cases or not pipeline_cases:
    fail(f"the cases must include AutoTP ({autotp_cases}) and a pipeline ({pipeline_cases})")
print(f"{len(CASES)} cases, {autotp_cases} with AutoTP and no mpu, {pipeline_cases} pipelined")
