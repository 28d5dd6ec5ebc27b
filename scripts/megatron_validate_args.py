#!/usr/bin/env python3
"""Runs Megatron-LM's own argument checks on a file `meshtp plan … --emit megatron` wrote.

  scripts/megatron_validate_args.py MEGATRON_LM_DIR FILE WORLD_SIZE

MEGATRON_LM_DIR is a Megatron-LM checkout (docs/moe.md used core_v0.15.0, the spelling meshtp
emits); FILE is the emitted bash file (sourced by bash: its MEGATRON_ARGS array and
CUDA_DEVICE_MAX_CONNECTIONS, exported or unset); WORLD_SIZE the GPUs it is for. The arguments, with mock data and a
null tokenizer, go through Megatron-LM's parse_args and validate_args
(megatron/training/arguments.py), as pretrain_gpt.py runs them on rank 0; prints "validate_args
passed: …" with the degrees Megatron-LM derived, or its assertion.

Where no GPU and no recent PyTorch are at hand (this machine: Debian's CPU-only torch 1.13),
Megatron-LM's modules are imported with the few names newer PyTorch has stubbed
(torch.distributed._coalescing_manager, torch.cuda.memory.CUDAPluggableAllocator, and missing
optional modules), torch.jit.script and torch.compile made no-ops, and the device's compute
capability taken as an H100's (9.0): none of them is an argument check. Not checked here: what
Megatron-LM checks only once the model is built or run (parallel_state's rank groups,
MoELayer.forward's sequence-parallel rule) — meshtp's emit follows those itself (docs/moe.md).
"""
import contextlib
import importlib
import os
import re
import subprocess
import sys
import types


def import_megatron(root):
    sys.path.insert(0, root)
    import torch
    import torch.cuda.memory
    import torch.distributed
    torch.jit.script = lambda f=None, *a, **k: f
    torch.compile = lambda f=None, *a, **k: f if f is not None else (lambda g: g)
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
    if not hasattr(torch.distributed, "_coalescing_manager"):
        torch.distributed._coalescing_manager = contextlib.nullcontext
    if not hasattr(torch.cuda.memory, "CUDAPluggableAllocator"):
        torch.cuda.memory.CUDAPluggableAllocator = object

    def stub(name):
        module = types.ModuleType(name)
        module.__getattr__ = lambda attr: type(attr, (), {})
        module.__path__ = []
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            with contextlib.suppress(Exception):
                setattr(importlib.import_module(parent), child, module)

    for _ in range(100):
        try:
            return importlib.import_module("megatron.training.arguments")
        except ModuleNotFoundError as e:
            if e.name is None or e.name.startswith("megatron"):
                raise
            stub(e.name)
        except ImportError as e:
            m = re.match(r"cannot import name '(\w+)' from '([\w.]+)'", str(e))
            if not m or m.group(2).startswith("megatron"):
                raise
            setattr(importlib.import_module(m.group(2)), m.group(1), type(m.group(1), (), {}))
        for name in [n for n in sys.modules if n.startswith("megatron")]:
            del sys.modules[name]
    sys.exit("error: could not import megatron.training.arguments")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    root, path, world = sys.argv[1], sys.argv[2], sys.argv[3]
    shown = subprocess.run(
        ["bash", "-c", 'set -eu; unset CUDA_DEVICE_MAX_CONNECTIONS; source "$1"; '
         'printf "%s\\0" "${CUDA_DEVICE_MAX_CONNECTIONS-unset}" "${MEGATRON_ARGS[@]}"',
         "bash", path],
        capture_output=True, text=True, check=True).stdout.split("\0")[:-1]
    os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)  # as the file leaves it (Megatron-FSDP: unset)
    if shown[0] != "unset":
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = shown[0]
    os.environ.update(WORLD_SIZE=world, RANK="0")
    arguments = import_megatron(root)
    arguments.get_device_arch_version = lambda: 9  # an H100 (sm_90)
    sys.argv = ["pretrain_gpt.py", *shown[1:], "--mock-data", "--tokenizer-type",
                "NullTokenizer", "--vocab-size", "32000", "--train-iters", "10", "--lr", "1e-4"]
    args = arguments.parse_args()
    arguments.validate_args(args)
    print("validate_args passed: tp", args.tensor_model_parallel_size, "pp",
          args.pipeline_model_parallel_size, "dp", args.data_parallel_size, "ep",
          args.expert_model_parallel_size, "etp", args.expert_tensor_parallel_size, "experts",
          args.num_experts, "sequence_parallel", args.sequence_parallel, "grouped_gemm",
          args.moe_grouped_gemm, "sharding", args.data_parallel_sharding_strategy)


if __name__ == "__main__":
    main()
