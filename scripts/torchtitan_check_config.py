#!/usr/bin/env python3
"""Runs torchtitan's own configuration checks on a file `meshtp plan … --emit torchtitan` wrote.

  scripts/torchtitan_check_config.py TORCHTITAN_DIR FILE WORLD_SIZE LAYERS

TORCHTITAN_DIR is a torchtitan checkout (v0.2.2, the spelling meshtp emits); FILE the emitted
TOML; WORLD_SIZE the GPUs it is for; LAYERS the model's layer count (the [model] flavor is
torchtitan's own, so its n_layers is given here). Prints "torchtitan checks passed: …" with the
degrees torchtitan derived, or the check that failed (exit 1).

What runs is torchtitan's own code, loaded from TORCHTITAN_DIR file by file:
- config/manager.py's ConfigManager.parse_args with `--job.config_file FILE`: the TOML read by
  tomllib, every section and key matched against config/job_config.py's JobConfig dataclasses
  (_dict_to_dataclass refuses an unknown name), then _validate_config;
- distributed/parallel_dims.py's ParallelDims, built as train.py's init_distributed builds it:
  its _validate (the degrees multiply to WORLD_SIZE, dp_shard −1 resolved, ETP = TP or 1);
- distributed/pipeline_parallel.py's generate_llm_fqn_per_model_part (the stages' modules, with
  its empty-stage and weight checks).
Restated from v0.2.2's source, because the code around them needs a process group or a model:
parallel_dims.py's build_mesh (the experts' mesh pp × dp_replicate × efsdp × ep × etp, efsdp =
dp_shard·cp·tp // (etp·ep), must tile the world); train.py's batch check (global batch a multiple of local batch × the batch mesh,
dp_replicate × dp_shard) and pipeline_parallel.py's pipeline_llm stage count (virtual stages =
⌈(LAYERS + first_less + last_less) / layers_per_stage⌉, divisible by pp, one a rank for a
single-stage schedule, at least two for a looped one) and build_pipeline_schedule's local batch
divisible by the microbatch size.

Stubbed, none of them a configuration check: tyro (ConfigManager parses only the config file
here, so tyro.cli returns the TOML's config; tyro is not a Debian package), torch's
device_mesh and tools/utils.py's device helpers (Debian's torch 1.13 predates both;
ParallelDims only names them), and the package __init__ files (they import the trainer's
modules, which need a recent torch).
"""
import ast
import math
import os
import sys
import types

# torch.distributed.pipelining's schedule names (torch 2.9 schedules.py get_schedule_class, the
# torch torchtitan v0.2.2 requires): the single-stage ones and the looped ones.
SINGLE_STAGE = {"1f1b", "gpipe"}
LOOPED = {"interleaved1f1b", "loopedbfs", "interleavedzerobubble", "zbvzerobubble", "dualpipev"}


def package(name, path):
    module = types.ModuleType(name)
    module.__path__ = [path]
    sys.modules[name] = module
    return module


def load_torchtitan(root):
    """Import the few torchtitan modules the checks need, without its package __init__s."""
    src = os.path.join(root, "torchtitan")
    for name in ("torchtitan", "torchtitan.config", "torchtitan.distributed", "torchtitan.tools"):
        package(name, os.path.join(src, *name.split(".")[1:]))
    tyro = types.ModuleType("tyro")
    constructors = types.ModuleType("tyro.constructors")

    class ConstructorRegistry:
        def primitive_rule(self, rule):
            return rule

    constructors.ConstructorRegistry = ConstructorRegistry
    constructors.PrimitiveTypeInfo = constructors.PrimitiveConstructorSpec = object
    tyro.constructors = constructors
    tyro.cli = lambda cls, args, default, registry: default
    sys.modules["tyro"], sys.modules["tyro.constructors"] = tyro, constructors
    import torch.distributed
    if "torch.distributed.device_mesh" not in sys.modules:
        mesh = types.ModuleType("torch.distributed.device_mesh")
        mesh.DeviceMesh = type("DeviceMesh", (), {})
        mesh.init_device_mesh = None
        sys.modules["torch.distributed.device_mesh"] = mesh
    utils = types.ModuleType("torchtitan.tools.utils")  # the trainer's device helpers
    utils.device_type = "cuda"
    sys.modules["torchtitan.tools.utils"] = utils
    import importlib
    manager = importlib.import_module("torchtitan.config.manager")
    parallel_dims = importlib.import_module("torchtitan.distributed.parallel_dims")
    # generate_llm_fqn_per_model_part is plain Python in a module that imports torch's
    # pipelining: take the function itself from the file.
    path = os.path.join(src, "distributed", "pipeline_parallel.py")
    tree = ast.parse(open(path).read(), path)
    fn = next(n for n in tree.body
              if isinstance(n, ast.FunctionDef) and n.name == "generate_llm_fqn_per_model_part")
    scope = {}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), path, "exec"), scope)
    return manager.ConfigManager, parallel_dims.ParallelDims, scope[fn.name]


def check(root, file, world_size, layers):
    ConfigManager, ParallelDims, fqn_per_model_part = load_torchtitan(root)
    config = ConfigManager().parse_args(["--job.config_file", file])
    p, t = config.parallelism, config.training
    dims = ParallelDims(dp_shard=p.data_parallel_shard_degree,
                        dp_replicate=p.data_parallel_replicate_degree,
                        cp=p.context_parallel_degree, tp=p.tensor_parallel_degree,
                        pp=p.pipeline_parallel_degree, ep=p.expert_parallel_degree,
                        etp=p.expert_tensor_parallel_degree, world_size=world_size)
    # parallel_dims.py build_mesh: the experts' mesh (pp, dp_replicate, efsdp, ep, etp), with
    # efsdp = dp_shard·cp·tp // (etp·ep), unflattened from the world: it must tile it.
    efsdp = dims.dp_shard * dims.cp * dims.tp // (dims.etp * dims.ep)
    assert efsdp >= 1 and dims.pp * dims.dp_replicate * efsdp * dims.ep * dims.etp == world_size, (
        f"the experts' mesh pp({dims.pp}) * dp_replicate({dims.dp_replicate}) * efsdp({efsdp}) "
        f"* ep({dims.ep}) * etp({dims.etp}) does not tile WORLD_SIZE({world_size})")
    # train.py (v0.2.2) __init__: "verify batch sizes".
    batch_degree = dims.dp_replicate * dims.dp_shard
    global_batch = t.global_batch_size if t.global_batch_size >= 0 else \
        t.local_batch_size * batch_degree
    assert global_batch > 0
    assert global_batch % (t.local_batch_size * batch_degree) == 0, (
        f"global batch size must be multiple of local batch size times data-parallel degree "
        f"({global_batch} % ({t.local_batch_size} * {batch_degree}) != 0)")
    accumulation = global_batch // (t.local_batch_size * batch_degree)
    stages = 1
    if dims.pp > 1:
        # pipeline_parallel.py (v0.2.2) pipeline_llm and build_pipeline_schedule.
        schedule = p.pipeline_parallel_schedule.lower()
        if schedule not in SINGLE_STAGE | LOOPED:
            raise ValueError(f"unknown pipeline schedule {p.pipeline_parallel_schedule!r}")
        single = schedule in SINGLE_STAGE
        first, last = (p.pipeline_parallel_first_stage_less_layers,
                       p.pipeline_parallel_last_stage_less_layers)
        if p.pipeline_parallel_layers_per_stage is not None:
            stages = math.ceil((layers + first + last) / p.pipeline_parallel_layers_per_stage)
            if stages % dims.pp != 0:
                raise ValueError(f"Number of virtual stages ({stages}) must be divisible by "
                                 f"pipeline parallel size ({dims.pp})")
            per_rank = stages // dims.pp
            if single and per_rank != 1:
                raise ValueError(f"Single stage schedule requires exactly 1 stage per rank, "
                                 f"but got {per_rank} stages per rank")
            if not single and per_rank < 2:
                raise ValueError(f"Multi-stage schedule requires at least 2 stages per rank, "
                                 f"but got {per_rank} stages per rank")
        else:
            stages = dims.pp * (1 if single else 2)
        if p.module_fqns_per_model_part is None:
            fqn_per_model_part(stages, layers, first, last)
        if t.local_batch_size % p.pipeline_parallel_microbatch_size != 0:
            raise ValueError(f"Batch size {t.local_batch_size} must be divisible by "
                             f"microbatch_size {p.pipeline_parallel_microbatch_size}")
    return (f"torchtitan checks passed: dp_replicate {dims.dp_replicate} dp_shard "
            f"{dims.dp_shard} cp {dims.cp} tp {dims.tp} pp {dims.pp} ep {dims.ep} etp "
            f"{dims.etp} = {world_size} GPUs; global batch {global_batch}, local "
            f"{t.local_batch_size}, accumulation {accumulation}; {stages} pipeline stage(s)")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.split("\n\n")[1])
    root, file, world_size, layers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    try:
        print(check(root, file, world_size, layers))
    except (AssertionError, ValueError, TypeError) as e:
        print(f"torchtitan refuses {file}: {type(e).__name__}: {e}")
        sys.exit(1)


if __name__ == "__main__":
    main()
