#!/usr/bin/env python3
"""Published runs of DeepSpeed's pipeline engine (Megatron-DeepSpeed), priced as Megatron-LM
runs a pipeline (`--runtime megatron`, what the planner had before) and as DeepSpeed's
PipelineEngine runs it (`--runtime deepspeed`, docs/pipeline.md "The runtime").

Rows (none of them is used by any other validation script, and nothing is fitted to them):
  - BLOOM-176B (Le Scao et al. 2022, arXiv 2211.05100, §3.4): 384 A100 80GB on Jean Zay
    (48 nodes of 8), tensor 4, pipeline 12, data 8; 70 layers on 12 stages, the embedding and
    the tied head counted as one layer each (--pp-partition-method 'type:transformer|embedding'
    in BigScience's train/tr11-176B-ml/tr11-176B-ml.slurm): 5 + 10 x 6 + 5 layers; micro batch
    2 of the global batch 2048 (the same script), bf16 with DeepSpeed's BF16_Optimizer (its
    own ZeRO-1 equivalent: --zero 1), full activation checkpointing. Measured: §3.4's 156
    TFLOP/s per GPU "in our fastest configuration", turned into seconds per step with
    Narayanan et al. 2021 Eq. 3 (the FLOP count Megatron-DeepSpeed's throughput report uses,
    with full recomputation's extra forward). The nodes' inter-node links: four 100 Gb/s
    Omni-Path links per node (§3.4: 50 GB/s per node, per direction) instead of the DGX
    preset's eight HDR HCAs; inside a node the DGX A100 preset's constants are kept (an
    assumption: §3.4 says four NVLink connections per GPU, not the NVSwitch bus bandwidth).
  - MT-NLG 530B (Smith et al. 2022, arXiv 2201.11990, §2.4): 280, 350 and 420 DGX A100 nodes,
    tensor 8 x pipeline 35 (3 layers a stage), data 8, 10, 12; global batch 1920 of micro
    batch 1; the measured seconds per iteration 60.1, 50.2, 44.4 (126, 121, 113 TFLOP/s per
    GPU). ZeRO-1 (DeepSpeed's only data-parallel sharding beside a pipeline; its all-gather is
    under 0.5% of these steps either way), full recomputation.

Writes OUT/deepspeed.json and OUT/deepspeed.md and prints the table: a comparison, no pass
criterion (docs/validation.md "DeepSpeed's pipeline engine" says where the error stays).
"""
import json
import os
import subprocess
import sys

import validate_cli

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def eq3_flops(batch, seq, layers, hidden, vocab):
    """Narayanan et al. 2021 Eq. 3: model FLOPs of one iteration with full recomputation."""
    return 96 * batch * seq * layers * hidden ** 2 * (
        1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


# (row, source, model preset, batch, nodes, inter-node GB/s per node or None (the preset's),
#  t, p, d, microbatches, first/last stage layers, measured seconds per step)
BLOOM_S = eq3_flops(2048, 2048, 70, 14336, 250880) / (384 * 156e12)
ROWS = [
    ("BLOOM-176B, 384 GPUs", "Le Scao et al. 2022 §3.4 (156 TFLOP/s per GPU)", "bloom-176b",
     2048, 48, 50, 4, 12, 8, 128, 5, BLOOM_S),
    ("MT-NLG 530B, 2240 GPUs", "Smith et al. 2022 §2.4 (60.1 s, 126 TFLOP/s)", "mt-nlg-530b",
     1920, 280, None, 8, 35, 8, 240, 0, 60.1),
    ("MT-NLG 530B, 2800 GPUs", "Smith et al. 2022 §2.4 (50.2 s, 121 TFLOP/s)", "mt-nlg-530b",
     1920, 350, None, 8, 35, 10, 192, 0, 50.2),
    ("MT-NLG 530B, 3360 GPUs", "Smith et al. 2022 §2.4 (44.4 s, 113 TFLOP/s)", "mt-nlg-530b",
     1920, 420, None, 8, 35, 12, 160, 0, 44.4),
]
RUNTIMES = ["megatron", "deepspeed"]


def topology_json(nodes, inter_gbps):
    """dgx-a100-8x8 with `nodes` nodes (and, where given, another inter-node bandwidth)."""
    if inter_gbps is None:
        return validate_cli.preset_on_nodes(
            "dgx-a100-8x8", nodes, f"dgx-a100-{nodes}x8",
            f"{nodes * 8} A100-80GB as {nodes} DGX A100 nodes: dgx-a100-8x8's constants")
    t = validate_cli.preset_on_nodes(
        "dgx-a100-8x8", nodes, f"jean-zay-a100-{nodes}x8",
        f"{nodes * 8} A100-80GB on Jean Zay (Le Scao et al. 2022 §3.4): four 100 Gb/s "
        f"Omni-Path links per node ({inter_gbps} GB/s), dgx-a100-8x8's constants otherwise")
    t["levels"][0]["group_gbps"] = inter_gbps
    # the preset's inter-node range is HDR InfiniBand's: not these links'
    t["ranges"] = [r for r in t["ranges"] if r["constant"] != "/levels/0/group_gbps"]
    return t


def command(meshtp, row, runtime, topology_path):
    _, _, model, batch, nodes, _, t, p, d, m, edge, _ = row
    cmd = [meshtp, "plan", "--3d", "--evaluate", "--runtime", runtime, "--topology",
           topology_path, "--model", model, "--batch", str(batch), "--devices", str(nodes * 8),
           "--dp", str(d), "--pp", str(p), "--mesh", f"{t}x1", "--microbatches", str(m),
           "--zero", "1", "--recompute", "full", "--json"]
    if edge:
        cmd += ["--first-stage-layers", str(edge), "--last-stage-layers", str(edge)]
    return cmd


def evaluate(cmd):
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed: {run.stderr.strip()}")
    out = json.loads(run.stdout)
    return out[0] if isinstance(out, list) else out


def main():
    args = validate_cli.parse_args(__doc__, "deepspeed")
    tmp = os.path.join(args.out, "deepspeed")
    rows = []
    for row in ROWS:
        name, source, _, _, nodes, inter, t, p, d, m, _, measured = row
        topo = topology_json(nodes, inter)
        path = os.path.join(tmp, topo["name"] + ".json")
        with open(path, "w") as f:
            json.dump(topo, f, indent=1)
        out = {"row": name, "source": source, "gpus": nodes * 8, "t": t, "p": p, "d": d, "m": m,
               "measured_s": measured}
        for runtime in RUNTIMES:
            cmd = command(args.meshtp, row, runtime, path)
            j = evaluate(cmd)
            out[runtime] = {"t_step_s": j["t_step_s"], "t_p2p_s": j.get("t_p2p_s"),
                            "t_dp_s": j.get("t_dp_s"),
                            "error": j["t_step_s"] / measured - 1,
                            # the binary as built, the topology as OUT/deepspeed/NAME.json
                            "command": " ".join(
                                ["meshtp"] + [c.replace(args.out.rstrip("/"), "OUT")
                                              for c in cmd[1:]])}
        rows.append(out)
    with open(os.path.join(args.out, "deepspeed.json"), "w") as f:
        json.dump(rows, f, indent=1)
    lines = ["| run | GPUs | t·p·d, m | measured s | megatron s (error) | deepspeed s (error) | "
             "deepspeed p2p s | deepspeed dp s |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        mg, ds = r["megatron"], r["deepspeed"]
        lines.append(f"| {r['row']} | {r['gpus']} | {r['t']}·{r['p']}·{r['d']}, {r['m']} | "
                     f"{r['measured_s']:.2f} | {mg['t_step_s']:.2f} ({100 * mg['error']:+.1f}%) | "
                     f"{ds['t_step_s']:.2f} ({100 * ds['error']:+.1f}%) | {ds['t_p2p_s']:.3f} | "
                     f"{ds['t_dp_s']:.3f} |")
    for name in RUNTIMES:
        errs = [abs(r[name]["error"]) for r in rows]
        lines.append(f"\n{name}: mean |error| {100 * sum(errs) / len(errs):.1f}%, "
                     f"max {100 * max(errs):.1f}%")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "deepspeed.md"), "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
