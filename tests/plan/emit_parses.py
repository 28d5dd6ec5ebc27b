#!/usr/bin/env python3
"""emit_parses.py MESHTP WORKDIR PLAN_ARGS…: `meshtp plan PLAN_ARGS --json --emit F
--emit-file FILE` for F = megatron, torchtitan and deepspeed, each configuration read the way
the framework reads it (Megatron-LM's arguments by an argparse parser declaring them, the
TOML by tomllib, the JSON by json). The parallel degrees must multiply to the devices, the
batch sizes add up, and every value equal the layout in the same run's --json (its "best",
or --evaluate's own). Where the framework cannot run that layout, the first comment line must
say so, and the configuration is held to the layout its header line names. Prints one line per framework."""
import argparse
import json
import os
import re
import subprocess
import sys
import tomllib

meshtp, workdir, plan_args = sys.argv[1], sys.argv[2], sys.argv[3:]
EXTENSIONS = {"megatron": "args", "torchtitan": "toml", "deepspeed": "json"}
CANNOT = ("Megatron-LM cannot", "torchtitan cannot", "DeepSpeed cannot")
os.makedirs(workdir, exist_ok=True)


def fail(message):
    sys.exit(f"emit_parses: {message}")


def megatron_parser():
    # Megatron-LM core_v0.15.0's spelling (megatron/training/arguments.py) of what meshtp emits.
    p = argparse.ArgumentParser(prog="pretrain_gpt.py", allow_abbrev=False)
    for name in ("tensor-model-parallel-size", "pipeline-model-parallel-size",
                 "num-layers-per-virtual-pipeline-stage", "recompute-num-layers",
                 "micro-batch-size", "global-batch-size", "num-layers", "hidden-size",
                 "num-attention-heads", "seq-length", "max-position-embeddings",
                 "context-parallel-size", "decoder-first-pipeline-num-layers",
                 "decoder-last-pipeline-num-layers", "ffn-hidden-size", "num-query-groups",
                 "num-virtual-stages-per-pipeline-rank", "num-experts", "moe-router-topk",
                 "moe-ffn-hidden-size", "expert-model-parallel-size",
                 "expert-tensor-parallel-size", "moe-shared-expert-intermediate-size",
                 "rotary-base"):
        p.add_argument("--" + name, type=int)
    p.add_argument("--moe-layer-freq", type=int, default=1)
    p.add_argument("--moe-token-dispatcher-type", choices=["allgather", "alltoall", "flex"])
    p.add_argument("--moe-router-load-balancing-type", nargs="+", type=str)
    p.add_argument("--moe-aux-loss-coeff", nargs="+", type=float)
    p.add_argument("--moe-expert-capacity-factor", type=float)
    p.add_argument("--recompute-granularity", choices=["full", "selective"])
    p.add_argument("--attention-backend", choices=["flash", "fused", "unfused", "local", "auto"])
    p.add_argument("--recompute-method", choices=["uniform", "block"])
    p.add_argument("--cp-comm-type", nargs="+", type=str)
    p.add_argument("--hierarchical-context-parallel-sizes", nargs="+", type=int)
    p.add_argument("--normalization", choices=["LayerNorm", "RMSNorm"])
    p.add_argument("--position-embedding-type",
                   choices=["learned_absolute", "rope", "mrope", "relative", "none"])
    for name in ("sequence-parallel", "use-distributed-optimizer", "fp16", "bf16",
                 "group-query-attention", "swiglu", "untie-embeddings-and-output-weights",
                 "moe-grouped-gemm"):
        p.add_argument("--" + name, action="store_true")
    p.add_argument("--disable-bias-linear", action="store_false", dest="add_bias_linear")
    p.add_argument("--use-megatron-fsdp", action="store_true")
    p.add_argument("--no-gradient-accumulation-fusion", action="store_false",
                   dest="gradient_accumulation_fusion")
    p.add_argument("--data-parallel-sharding-strategy", default="no_shard",
                   choices=["no_shard", "optim", "optim_grads", "optim_grads_params"])
    p.add_argument("--ckpt-format", choices=["torch", "torch_dist", "zarr", "torch_dcp",
                                             "fsdp_dtensor"])
    return p


def megatron_checks(a):
    """Megatron-LM core_v0.15.0's own checks (megatron/training/arguments.py) on what meshtp
    emits for context parallelism, uneven stages and Megatron-FSDP."""
    if a.use_megatron_fsdp and a.ckpt_format != "fsdp_dtensor":
        fail("megatron: Megatron FSDP only supports fsdp_dtensor checkpoint format")
    cp = a.context_parallel_size or 1
    if cp > 1 and a.seq_length % (2 * cp):
        fail("megatron: seq-length should be a multiple of 2 * context-parallel-size")
    if a.cp_comm_type and a.cp_comm_type[0] == "a2a+p2p":
        sizes = a.hierarchical_context_parallel_sizes or []
        if not sizes or cp != __import__("math").prod(sizes):
            fail("megatron: a2a+p2p needs --hierarchical-context-parallel-sizes of product cp")
    first, last = a.decoder_first_pipeline_num_layers, a.decoder_last_pipeline_num_layers
    pp = a.pipeline_model_parallel_size
    if first is not None or last is not None:
        if a.num_layers_per_virtual_pipeline_stage is not None:
            fail("megatron: uneven stages need --num-virtual-stages-per-pipeline-rank, not "
                 "--num-layers-per-virtual-pipeline-stage")
        middle = pp - (first is not None) - (last is not None)
        rest = a.num_layers - (first or 0) - (last or 0)
        if middle < 1 or rest % middle:
            fail(f"megatron: {rest} layers do not split over the {middle} middle stages")
    if a.group_query_attention and a.num_attention_heads % a.num_query_groups:
        fail("megatron: num-attention-heads must be divisible by num-query-groups")
    # Mixture of experts (core_v0.15.0): arguments.py validate_args, transformer_config.py,
    # moe/moe_layer.py and parallel_state.py's expert rank generator.
    ep = a.expert_model_parallel_size or 1
    if ep > 1 and (a.num_experts is None or a.num_experts % ep):
        fail("megatron: Number of experts should be a multiple of expert model parallel_size.")
    if ep > 1 and a.fp16:
        fail("megatron: Expert parallelism is not supported with fp16 training.")
    if a.moe_grouped_gemm and not a.bf16:
        fail("megatron: Currently GroupedGEMM for MoE only supports bf16 dtype.")
    if a.num_experts is not None:
        tp = a.tensor_model_parallel_size
        etp = a.expert_tensor_parallel_size or tp
        if tp > 1 and not a.sequence_parallel:
            fail("megatron: MoE and tensor parallelism without sequence parallelism")
        if a.add_bias_linear and etp != 1:
            fail("megatron: Bias in Moe is only supported when ETP==1")
        world = a.world_size
        if world % (etp * ep * a.pipeline_model_parallel_size):
            fail(f"megatron: world_size ({world}) is not divisible by "
                 "expert_tensor_model_pipeline_parallel size")


def comment_lines(framework, text):
    if framework == "deepspeed":
        return json.loads(text)["_meshtp"]["comment"]
    return [line[2:] for line in text.splitlines() if line.startswith("# ")]


def data_parallel(lines):
    found = [int(m.group(1)) for c in lines if (m := re.match(r"data parallel (\d+) = ", c))]
    if len(found) != 1:
        fail(f"not one 'data parallel N = …' comment in {lines}")
    return found[0]


def read(framework, text):
    """The layout a configuration names: dp, tp, pp, microbatches m, virtual stages v, …"""
    lines = comment_lines(framework, text)
    if framework == "megatron":
        # The file is bash: sourced by bash, its array is the argument list, and the
        # environment Megatron-LM's validate_args asserts is set: CUDA_DEVICE_MAX_CONNECTIONS 1
        # for tensor parallelism > 1, and anything but 1 (here: unset) with Megatron-FSDP.
        shown = subprocess.run(
            ["bash", "-c", 'set -eu; unset CUDA_DEVICE_MAX_CONNECTIONS; source "$1"; '
             'printf "%s\\0" "${CUDA_DEVICE_MAX_CONNECTIONS-unset}" "${MEGATRON_ARGS[@]}"',
             "bash", f"{workdir}/emit.args"], capture_output=True, text=True)
        if shown.returncode != 0:
            fail(f"megatron: bash could not source the file: {shown.stderr.strip()}")
        connections, *argv = shown.stdout.split("\0")[:-1]
        a = megatron_parser().parse_args(argv)
        wanted = "unset" if a.use_megatron_fsdp else "1"
        if connections != wanted:
            fail(f"megatron: CUDA_DEVICE_MAX_CONNECTIONS={connections!r}, Megatron-LM needs "
                 f"{wanted}")
        dp, pp = data_parallel(lines), a.pipeline_model_parallel_size
        a.world_size = dp * a.tensor_model_parallel_size * pp * (a.context_parallel_size or 1)
        megatron_checks(a)
        if a.global_batch_size % (a.micro_batch_size * dp):
            fail(f"megatron: global batch {a.global_batch_size} is not micro × dp × m")
        per_stage = a.num_layers_per_virtual_pipeline_stage
        if a.recompute_granularity == "full" and \
                (a.recompute_method, a.recompute_num_layers) != ("uniform", 1):
            fail("megatron: full recomputation needs --recompute-method uniform "
                 "--recompute-num-layers 1")
        return dict(dp=dp, tp=a.tensor_model_parallel_size, pp=pp,
                    cp=a.context_parallel_size or 1,
                    m=a.global_batch_size // (a.micro_batch_size * dp),
                    v=a.num_layers // (pp * per_stage) if per_stage
                    else a.num_virtual_stages_per_pipeline_rank or 1,
                    micro=a.micro_batch_size, batch=a.global_batch_size,
                    sp=a.sequence_parallel, recompute=a.recompute_granularity or "none",
                    zero={"optim_grads": 2, "optim_grads_params": 3}.get(
                        a.data_parallel_sharding_strategy if a.use_megatron_fsdp else "",
                        1 if a.use_distributed_optimizer else 0),
                    **({} if a.attention_backend is None else
                       dict(attention="fused" if a.attention_backend == "flash"
                            else a.attention_backend)),
                    **({} if a.num_experts is None else
                       dict(ep=a.expert_model_parallel_size,
                            etp=a.expert_tensor_parallel_size)))
    if framework == "torchtitan":
        t = tomllib.loads(text)
        par, tr = t["parallelism"], t["training"]
        dp = par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
        pp, tp = par["pipeline_parallel_degree"], par["tensor_parallel_degree"]
        v = 1
        if pp > 1:
            micro = par["pipeline_parallel_microbatch_size"]
            m = tr["local_batch_size"] // micro
            if tr["global_batch_size"] != tr["local_batch_size"] * dp:
                fail("torchtitan: a pipeline's local batch must be the data-parallel rank's")
            layers = int(re.search(r"a flavor of (\d+) layers", text).group(1))
            # Uneven stages: the first and last hold fewer; the stages are whole.
            layers += par["pipeline_parallel_first_stage_less_layers"] + \
                par["pipeline_parallel_last_stage_less_layers"]
            v = layers // (pp * par["pipeline_parallel_layers_per_stage"])
            if (par["pipeline_parallel_schedule"] == "Interleaved1F1B") != (v > 1):
                fail("torchtitan: Interleaved1F1B must go with more than one stage per rank")
        else:
            micro = tr["local_batch_size"]
            m = tr["global_batch_size"] // (micro * dp)
        # The ZeRO stages the data parallelism stands for: DDP none; FSDP resharding after
        # the forward ZeRO-3, not resharding any below (docs/emit.md).
        zero = {0, 1, 2, 3} if dp == 1 else {0}
        if par["data_parallel_shard_degree"] > 1:
            zero = {3} if par["fsdp_reshard_after_forward"] == "always" else {0, 1, 2}
        moe = {}
        if "expert_parallel_degree" in par:
            moe = dict(ep=par["expert_parallel_degree"])
            if par["expert_parallel_degree"] > 1:
                moe["etp"] = par["expert_tensor_parallel_degree"]
        return dict(dp=dp, tp=tp, pp=pp, m=m, v=v, micro=micro, batch=tr["global_batch_size"],
                    cp=par["context_parallel_degree"],
                    sp=tp > 1, recompute=t["activation_checkpoint"]["mode"], zero=zero, **moe)
    j = json.loads(text)
    mt = j["_meshtp"]
    tp = j.get("tensor_parallel", {}).get("autotp_size", 1)
    # deepspeed.initialize's check (runtime/config.py, _configure_train_batch_size): the
    # data-parallel world is the pipeline's mpu's (PipelineModule), or without an mpu
    # (AutoTP) every rank.
    world = mt["dp"] * mt["tp"] * mt["pp"] if tp > 1 else mt["dp"]
    if j["train_batch_size"] != j["train_micro_batch_size_per_gpu"] * \
            j["gradient_accumulation_steps"] * world:
        fail(f"deepspeed: train_batch_size ≠ micro × accumulation × {world} ranks, "
             "as deepspeed.initialize checks it")
    if tp != mt["tp"] or data_parallel(lines) != mt["dp"]:
        fail(f"deepspeed: autotp_size {tp} and the comment's data parallelism disagree with "
             f"_meshtp's tp {mt['tp']}, dp {mt['dp']}")
    return dict(dp=mt["dp"], tp=tp, pp=mt["pp"], m=j["gradient_accumulation_steps"],
                micro=j["train_micro_batch_size_per_gpu"],
                batch=j["train_micro_batch_size_per_gpu"] * j["gradient_accumulation_steps"]
                * mt["dp"],
                zero=j["zero_optimization"]["stage"])


def expected(plan, batch):
    tp = plan["mesh"][0] * plan["mesh"][1]
    dp, m = plan["dp"], plan["microbatches"]
    return dict(dp=dp, tp=tp, pp=plan["pp"], m=m, v=plan["virtual_stages"],
                cp=plan.get("cp", 1), ep=plan.get("ep", 1),
                etp=plan.get("etp", 0) or tp,
                micro=batch // (dp * m), batch=batch,
                sp=tp > 1 and (plan["sequence_parallel"] or plan["strategy"] == "tp1d"),
                recompute=plan["recompute"], zero=plan["zero"] if dp > 1 else 0,
                attention=plan.get("attention", "unfused"))


# EMIT_FRAMEWORKS=megatron,torchtitan: only those (a layout DeepSpeed's config cannot hold,
# with no fallback that fits).
chosen = os.environ.get("EMIT_FRAMEWORKS", ",".join(EXTENSIONS)).split(",")
for framework, extension in EXTENSIONS.items():
    if framework not in chosen:
        continue
    target = f"{workdir}/emit.{extension}"
    if os.path.exists(target):
        os.remove(target)
    # --runtime RUNTIME among the arguments is the framework's own (plan::runtime_of):
    # DeepSpeed's pipeline engine is priced as --runtime deepspeed, the others as megatron.
    args = list(plan_args)
    if "--runtime" in args:
        args[args.index("--runtime") + 1] = "deepspeed" if framework == "deepspeed" else "megatron"
    run = subprocess.run([meshtp, "plan", *args, "--json", "--emit", framework,
                          "--emit-file", target], capture_output=True, text=True)
    if run.returncode != 0 and framework == "torchtitan" and "only through FSDP" in run.stderr \
            and len(run.stderr.strip().splitlines()) == 1 and not os.path.exists(target):
        # torchtitan trains a 2-byte model in fp32 under TP or PP without FSDP: refused.
        print(f"torchtitan: refused, nothing written: {run.stderr.strip()}")
        continue
    if run.returncode != 0:
        fail(f"{framework}: meshtp plan exited {run.returncode}: {run.stderr.strip()}")
    answer = json.loads(run.stdout)
    plan = (answer["best"] if "best" in answer else answer)["plan"]
    text = open(target).read()
    got = read(framework, text)
    devices = plan["dp"] * plan["pp"] * plan.get("cp", 1) * plan["mesh"][0] * plan["mesh"][1]
    degrees = f"dp {got['dp']} × tp {got['tp']} × pp {got['pp']}" + \
        (f" × cp {got['cp']}" if got.get("cp", 1) > 1 else "")
    if got["dp"] * got["tp"] * got["pp"] * got.get("cp", 1) != devices:
        fail(f"{framework}: {degrees} is not the {devices} devices")
    lines = comment_lines(framework, text)
    if lines[0].startswith(CANNOT):
        # The fallback: held to the layout its own header line names (layout::Plan's text).
        named = next(l for l in lines if " configuration (" in l)
        layout = named.split("): ", 1)[1]
        dp, d1, d2 = map(int, re.match(r"dp=(\d+) mesh=(\d+)x(\d+) ", layout).groups())
        pp, zero = (int(m.group(1)) if (m := re.search(rf" {key}=(\d+)", layout)) else default
                    for key, default in (("pp", 1), ("zero", 0)))
        fallback = dict(dp=dp, tp=d1 * d2, pp=pp, zero=zero if dp > 1 else 0)
        for key, value in fallback.items():
            if got[key] != value and not (isinstance(got[key], set) and value in got[key]):
                fail(f"{framework}: {key} = {got[key]!r}, the fallback's header says {value!r}")
        print(f"{framework}: {degrees} = {devices} devices, not the planner's layout: "
              f"{lines[0].split('): ', 1)[-1]}")
        continue
    want = expected(plan, got["batch"])
    if "candidates" in answer:  # 2D: the model's recomputation, not the row's plan's
        got.pop("recompute", None)
    for key, value in got.items():
        if want[key] != value and not (isinstance(value, set) and want[key] in value):
            fail(f"{framework}: {key} = {value!r}, the plan JSON says {want[key]!r}")
    print(f"{framework}: {degrees} = {devices} devices, {got['m']} microbatches of "
          f"{got['micro']}, as the plan JSON says")
