#!/usr/bin/env python3
"""Price published mixture-of-experts training runs on H100 with `meshtp plan --3d --evaluate
--runtime megatron` on the dgx-h100 presets, and set the model TFLOP/s per GPU (and MFU) beside
the published ones. A comparison: nothing is fitted to these rows and there is no pass
criterion (docs/moe.md says how far off they are, and what is missing).

Writes OUT/moe.json and OUT/moe.md; prints the table.

TFLOP/s per GPU = model FLOPs of a step / (predicted step seconds × GPUs), the FLOPs in this
project's count (layout/model_shape.hpp): per MoE layer 6·b·s·(the attention's linears + k
experts + shared experts + the router h·E) + 12·b·s²·h, plus the head's 6·b·s·h·V. Megatron-LM
counts the same terms but the router (megatron/training/training.py,
num_floating_point_operations: the MLP × moe_router_topk). MFU = TFLOP/s / 989.4 (the H100 SXM5
datasheet's dense bf16 peak, the dgx-h100 presets' device.gemm.peak_tflops).

Rows whose layout the source does not state are not priced: the published number is shown,
the prediction is "not priced" (no layout is invented for them). The planner's own best layout
for the same model and GPUs is listed beside them for reference only, not as a comparison.

Attention: Megatron-Core runs Transformer Engine's fused attention, which keeps no s×s
probabilities; the planner's model of that memory is selective recomputation (the attention
core's probabilities dropped and recomputed in the backward, as the fused kernel's backward
does), so every row is priced with --recompute selective.
"""
import json
import os
import subprocess
import sys

import validate_cli

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEAK_TFLOPS = 989.4

# Each row: the source, the model preset, GPUs, topology, the layout (None: not stated by the
# source), the published number (TFLOP/s per GPU or MFU; None: not published) and a note.
RUNS = [
    {"source": "Megatron-Core MoE README (468 TFLOP/s with MCore v0.9; the layout is its "
               "reference mapping table, MCore v0.8)",
     "model": "mixtral-8x7b", "gpus": 64, "topology": "dgx-h100-8x8",
     "layout": {"tp": 1, "pp": 4, "vp": 8, "ep": 8, "etp": 1, "mbs": 1, "gbs": 256,
                "seq": 4096},
     "published_tflops": 468, "published_mfu": None},
    {"source": "Megatron-MoE-ModelZoo (linked from Megatron-Core's MoE README), "
               "best_practice/mixtral/run_mixtral_8x22B.sh at e865051: dropless with forced "
               "balancing ~465 TFLOP/s (445 dropless as routed); layout from its "
               "runtime_configs/benchmarking/runtime.conf and Mixtral-8x22B.yaml (ETP 1)",
     "model": "mixtral-8x22b", "gpus": 128, "topology": "dgx-h100-16x8",
     "layout": {"tp": 2, "pp": 8, "vp": 7, "ep": 8, "etp": 1, "mbs": 1, "gbs": 256,
                "seq": 4096},
     "published_tflops": 465, "published_mfu": None},
    {"source": "Megatron-Core MoE README reference mapping (MCore v0.8; no throughput published)",
     "model": "mixtral-8x22b", "gpus": 128, "topology": "dgx-h100-16x8",
     "layout": {"tp": 4, "pp": 8, "vp": 7, "ep": 2, "etp": 4, "mbs": 1, "gbs": 256,
                "seq": 4096},
     "published_tflops": None, "published_mfu": None},
    {"source": "Megatron-MoE-ModelZoo runtime.conf at b06a6d8 (2025-05-26) and "
               "Qwen2-57B-A14B.yaml (ETP 1); no throughput published for it",
     "model": "qwen2-57b-a14b", "gpus": 64, "topology": "dgx-h100-8x8",
     "layout": {"tp": 2, "pp": 4, "vp": 7, "ep": 4, "etp": 1, "mbs": 1, "gbs": 256,
                "seq": 4096},
     "published_tflops": None, "published_mfu": None},
    {"source": "Liu et al. 2025 (MoE Parallel Folding), abstract: up to 49.3% MFU; layout and "
               "GPU count of that run not found",
     "model": "mixtral-8x22b", "gpus": 128, "topology": "dgx-h100-16x8", "layout": None,
     "published_tflops": None, "published_mfu": 0.493},
    {"source": "Liu et al. 2025 (MoE Parallel Folding), abstract: up to 39.0% MFU; layout and "
               "GPU count of that run not found",
     "model": "qwen2-57b-a14b", "gpus": 64, "topology": "dgx-h100-8x8", "layout": None,
     "published_tflops": None, "published_mfu": 0.390},
]


def model_flops(model, batch, seq):
    h, a, g = model["hidden"], model["heads"], model.get("kv_heads", model["heads"])
    d = h // a
    fe = model.get("moe_ffn_hidden") or model["ffn_hidden"]
    per = 3 if model["activation"] == "swiglu" else 2
    experts = model["num_experts"]
    weights = h * (h + 2 * g * d) + h * h + \
        (model["top_k"] + model.get("shared_experts", 0)) * per * h * fe + h * experts
    # Every preset here is MoE in every layer (moe_every 1).
    assert model.get("moe_every", 1) == 1
    return model["layers"] * (6 * batch * seq * weights + 12 * batch * seq * seq * h) + \
        6 * batch * seq * h * model["vocab"]


def run(cmd):
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main():
    args = validate_cli.parse_args(__doc__)
    rows = []
    for r in RUNS:
        model = json.load(open(os.path.join(ROOT, "models", r["model"] + ".json")))
        row = dict(r)
        lay = r["layout"]
        if lay is None:
            # For reference only: the planner's own best layout (not the source's).
            cmd = [args.meshtp, "plan", "--3d", "--runtime", "megatron", "--topology",
                   r["topology"], "--model", r["model"], "--strategies", "tp1d", "--top", "1",
                   "--json"]
            best = run(cmd)["best"]
            flops = model_flops(model, model["batch"], model["seq"])
            row["search_best"] = {
                "plan": {k: best["plan"].get(k) for k in ("dp", "pp", "virtual_stages", "mesh",
                                                         "ep", "etp", "microbatches", "zero",
                                                         "recompute")},
                "tflops": flops / (best["t_step_s"] * r["gpus"]) / 1e12,
                "memory_gib": best["memory_gib"],
                "command": " ".join(["meshtp"] + cmd[1:-1])}
            row["search_best"]["mfu"] = row["search_best"]["tflops"] / PEAK_TFLOPS
            rows.append(row)
            continue
        dp = r["gpus"] // (lay["tp"] * lay["pp"])
        m = lay["gbs"] // (dp * lay["mbs"])
        cmd = [args.meshtp, "plan", "--3d", "--evaluate", "--runtime", "megatron",
               "--topology", r["topology"], "--model", r["model"], "--seq", str(lay["seq"]),
               "--batch", str(lay["gbs"]), "--dp", str(dp), "--pp", str(lay["pp"]),
               "--mesh", f"{lay['tp']}x1", "--ep", str(lay["ep"]), "--etp", str(lay["etp"]),
               "--microbatches", str(m), "--zero", "1", "--recompute", "selective"]
        if lay["tp"] > 1:
            cmd.append("--sequence-parallel")  # Megatron-LM requires it with MoE and tp > 1
        if lay["vp"] > 1:
            cmd += ["--schedule", f"interleaved:{lay['vp']}"]
        j = run(cmd + ["--json"])
        step = j["t_step_s"]
        tflops = model_flops(model, lay["gbs"], lay["seq"]) / (step * r["gpus"]) / 1e12
        parts = j["parts"]
        row.update({"meshtp_tflops": tflops, "meshtp_mfu": tflops / PEAK_TFLOPS,
                    "step_s": step, "memory_gib": j["memory_gib"], "fits": j["fits"],
                    "moe_a2a_share": j.get("t_moe_a2a_s", 0) * m / step,
                    "moe_compute_share": j.get("t_moe_compute_s", 0) * m / step,
                    "bubble_share": parts["bubble_s"] / step,
                    "command": " ".join(["meshtp"] + cmd[1:])})
        if r["published_tflops"]:
            row["error"] = tflops / r["published_tflops"] - 1
        rows.append(row)
    lines = ["| model | GPUs | layout (TP PP VP EP ETP) | published | meshtp | error | step s | "
             "a2a share | experts' compute share | GiB (fits 80) | source |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        published = (f"{r['published_tflops']} TFLOP/s" if r["published_tflops"]
                     else f"{100 * r['published_mfu']:.1f}% MFU" if r["published_mfu"]
                     else "unknown")
        if r["layout"] is None:
            b = r["search_best"]
            p = b["plan"]
            lines.append(
                f"| {r['model']} | {r['gpus']} | not stated | {published} | not priced "
                f"(meshtp's own best, for reference: dp {p['dp']} pp {p['pp']} "
                f"tp {p['mesh'][0]} ep {p.get('ep', 1)} etp {p.get('etp', 0)}, "
                f"{b['tflops']:.0f} TFLOP/s = {100 * b['mfu']:.1f}% MFU, {b['memory_gib']:.1f} GiB) "
                f"| – | – | – | – | – | {r['source']} |")
            continue
        lay = r["layout"]
        error = f"{100 * r['error']:+.0f}%" if "error" in r else "–"
        lines.append(
            f"| {r['model']} | {r['gpus']} | {lay['tp']} {lay['pp']} {lay['vp']} {lay['ep']} "
            f"{lay['etp']} | {published} | {r['meshtp_tflops']:.0f} TFLOP/s "
            f"({100 * r['meshtp_mfu']:.1f}% MFU) | {error} | {r['step_s']:.2f} | "
            f"{100 * r['moe_a2a_share']:.0f}% | {100 * r['moe_compute_share']:.0f}% | "
            f"{r['memory_gib']:.1f} ({'yes' if r['fits'] else 'no'}) | {r['source']} |")
    text = "\n".join(lines) + "\n"
    commands = [r["command"] for r in rows if "command" in r] + \
        [r["search_best"]["command"] for r in rows if "search_best" in r]
    with open(os.path.join(args.out, "moe.md"), "w") as f:
        f.write(text + "\n" + "\n".join(commands) + "\n")
    with open(os.path.join(args.out, "moe.json"), "w") as f:
        json.dump({"runs": rows}, f, indent=2)
    print(text, end="")


if __name__ == "__main__":
    main()
