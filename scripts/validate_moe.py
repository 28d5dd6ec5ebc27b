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

Every row is priced at the layout its source states; none is invented.

Attention and recomputation as the runs ran: the Megatron-MoE-ModelZoo configurations
(model_configs/benchmarking/*.yaml at e865051) pass --use-flash-attn and no recomputation flag,
so every row is priced with the fused core (--attention fused: no s×s probabilities kept, at
the presets' attention_tflops) and --recompute none. Before the fused core existed these rows
were priced with the unfused core under selective recomputation, which stood for the fused
kernel's memory but charged the unfused core's time twice (docs/moe.md has both).

Liu et al. 2025's rows: the paper's appendix §6.4, Table 3 (GBS 256, each method at its best
layout: CP, TP, EP, PP, ETP) and Table 4 (GBS 1024, the same layouts on 64 or 128 to 1,024
GPUs), read from a Markdown conversion of the paper's text (the arXiv page's tables could not be
read here; gkarfakis19/Rapid-LLM's validation_scripts/moe_ep_validation.py at 6238f354
transcribes the same MCore rows). "MCore" is expert parallelism inside data parallelism with
the experts tensor-parallel over the attention's TP (ETP = TP, the table's blank); "MCore w/
Folding" gives the experts their own ETP (1 in every row); "TP+EP+DP" has no pipeline.
Sequence 4096, micro batch 1, bf16, token dropping at capacity factor 1 (§4.1: balanced, as
the planner routes). The tables give no virtual pipeline size: the rows are priced without
interleaving (as a Megatron-LM run without --num-layers-per-virtual-pipeline-stage runs), and
with one layer a virtual stage (the ModelZoo's VP 7 for both models) as a what-if. Rows of more
than 128 GPUs use dgx-h100-16x8's constants with more nodes (written to OUT/topologies/). The
abstract's "up to 49.3%" and 39.0% are Table 3's folded rows.
"""
import json
import os
import subprocess
import sys

import validate_cli

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEAK_TFLOPS = 989.4

ZOO = "Megatron-MoE-ModelZoo"
LIU3 = "Liu et al. 2025, Table 3 (GBS 256), {what}"
LIU4 = "Liu et al. 2025, Table 4 (GBS 1024, strong scaling), {what}"
LIU5 = "Liu et al. 2025, Table 5 (context scaling), {what}"


def liu(model, gpus, tp, pp, ep, gbs, mfu, source, etp=None, cp=1, seq=4096):
    """A row of Liu et al.'s Tables 3-5: ETP = TP without folding; no virtual stages stated."""
    nodes = gpus // 8
    return {"source": source, "model": model, "gpus": gpus,
            "topology": {64: "dgx-h100-8x8", 128: "dgx-h100-16x8"}.get(gpus, nodes),
            "layout": {"tp": tp, "cp": cp, "pp": pp, "vp": 1, "ep": ep,
                       "etp": tp if etp is None else etp, "mbs": 1, "gbs": gbs, "seq": seq},
            "vp_whatif": 7 if pp > 1 else None,
            "published_tflops": None, "published_mfu": mfu}


# Each row: the source, the model preset, GPUs, topology (a preset, or a node count: the
# dgx-h100 constants on that many nodes), the layout (None: not stated by the source), the
# published number (TFLOP/s per GPU or MFU; None: not published).
RUNS = [
    {"source": "Megatron-Core MoE README (468 TFLOP/s with MCore v0.9; the layout is its "
               "reference mapping table, MCore v0.8)",
     "model": "mixtral-8x7b", "gpus": 64, "topology": "dgx-h100-8x8",
     "layout": {"tp": 1, "cp": 1, "pp": 4, "vp": 8, "ep": 8, "etp": 1, "mbs": 1, "gbs": 256,
                "seq": 4096},
     "published_tflops": 468, "published_mfu": None},
    {"source": f"{ZOO} (linked from Megatron-Core's MoE README), "
               "best_practice/mixtral/run_mixtral_8x22B.sh at e865051: dropless with forced "
               "balancing ~465 TFLOP/s (445 dropless as routed); layout from its "
               "runtime_configs/benchmarking/runtime.conf and Mixtral-8x22B.yaml (ETP 1)",
     "model": "mixtral-8x22b", "gpus": 128, "topology": "dgx-h100-16x8",
     "layout": {"tp": 2, "cp": 1, "pp": 8, "vp": 7, "ep": 8, "etp": 1, "mbs": 1, "gbs": 256,
                "seq": 4096},
     "published_tflops": 465, "published_mfu": None},
    {"source": "Megatron-Core MoE README reference mapping (MCore v0.8; no throughput published)",
     "model": "mixtral-8x22b", "gpus": 128, "topology": "dgx-h100-16x8",
     "layout": {"tp": 4, "cp": 1, "pp": 8, "vp": 7, "ep": 2, "etp": 4, "mbs": 1, "gbs": 256,
                "seq": 4096},
     "published_tflops": None, "published_mfu": None},
    {"source": f"{ZOO} runtime.conf at b06a6d8 (2025-05-26) and "
               "Qwen2-57B-A14B.yaml (ETP 1); no throughput published for it",
     "model": "qwen2-57b-a14b", "gpus": 64, "topology": "dgx-h100-8x8",
     "layout": {"tp": 2, "cp": 1, "pp": 4, "vp": 7, "ep": 4, "etp": 1, "mbs": 1, "gbs": 256,
                "seq": 4096},
     "published_tflops": None, "published_mfu": None},
    liu("mixtral-8x22b", 128, 2, 8, 4, 256, 0.463, LIU3.format(what="MCore")),
    liu("mixtral-8x22b", 128, 2, 8, 8, 256, 0.493, LIU3.format(what="MCore w/ Folding"), etp=1),
    liu("mixtral-8x22b", 128, 4, 1, 8, 256, 0.366, LIU3.format(what="TP+EP+DP")),
    liu("qwen2-57b-a14b", 64, 2, 4, 4, 256, 0.353, LIU3.format(what="MCore")),
    liu("qwen2-57b-a14b", 64, 2, 4, 4, 256, 0.390, LIU3.format(what="MCore w/ Folding"), etp=1),
    liu("qwen2-57b-a14b", 64, 4, 1, 4, 256, 0.231, LIU3.format(what="TP+EP+DP")),
] + [liu("mixtral-8x22b", g, 2, 8, 4, 1024, mfu, LIU4.format(what="MCore"))
     for g, mfu in ((128, 0.494), (256, 0.480), (512, 0.455), (1024, 0.423))] + \
    [liu("mixtral-8x22b", g, 2, 8, 8, 1024, mfu, LIU4.format(what="MCore w/ Folding"), etp=1)
     for g, mfu in ((128, 0.522), (256, 0.507), (512, 0.489), (1024, 0.449))] + \
    [liu("qwen2-57b-a14b", g, 2, 4, 4, 1024, mfu, LIU4.format(what="MCore"))
     for g, mfu in ((64, 0.362), (128, 0.360), (256, 0.348), (512, 0.325), (1024, 0.298))] + \
    [liu("qwen2-57b-a14b", g, 2, 4, 4, 1024, mfu, LIU4.format(what="MCore w/ Folding"), etp=1)
     for g, mfu in ((64, 0.399), (128, 0.397), (256, 0.381), (512, 0.366), (1024, 0.334))] + \
    [liu("mixtral-8x22b", g, tp, 8, ep, gbs, mfu, LIU5.format(what=what), etp=etp, cp=cp, seq=seq)
     for what, etp, rows in (
         ("MCore", None, ((128, 16384, 4, 2, 4, 1024, 0.453), (256, 32768, 8, 2, 4, 512, 0.432),
                          (512, 65536, 16, 2, 4, 256, 0.426),
                          (1024, 131072, 16, 4, 8, 128, 0.382))),
         ("MCore w/ Folding", 1, ((128, 16384, 4, 2, 8, 1024, 0.476),
                                  (256, 32768, 8, 2, 8, 512, 0.451),
                                  (512, 65536, 8, 4, 8, 256, 0.445),
                                  (1024, 131072, 8, 8, 8, 128, 0.429))))
     for g, seq, cp, tp, ep, gbs, mfu in rows]


def model_flops(model, batch, seq, attention=1.0):
    """Model FLOPs of a step; `attention` scales the 12·b·s²·h attention products (0.5: the
    causal half, as Megatron-Core's num_floating_point_operations counts them from core_v0.12.0:
    "Only half of the attention matrix is non-zero"; core_v0.11.0 counts them whole)."""
    h, a, g = model["hidden"], model["heads"], model.get("kv_heads", model["heads"])
    d = h // a
    fe = model.get("moe_ffn_hidden") or model["ffn_hidden"]
    per = 3 if model["activation"] == "swiglu" else 2
    experts = model["num_experts"]
    weights = h * (h + 2 * g * d) + h * h + \
        (model["top_k"] + model.get("shared_experts", 0)) * per * h * fe + h * experts
    # Every preset here is MoE in every layer (moe_every 1).
    assert model.get("moe_every", 1) == 1
    return model["layers"] * (6 * batch * seq * weights + attention * 12 * batch * seq * seq * h) + \
        6 * batch * seq * h * model["vocab"]


def run(cmd):
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


WRITTEN = set()  # the topology files this run has written


def topology_path(out, topology):
    """A preset name as is; a node count: dgx-h100-16x8 with that many nodes, written to OUT
    once a run."""
    if isinstance(topology, str):
        return topology
    name = f"dgx-h100-{topology}x8"
    path = os.path.join(out, "topologies", name + ".json")
    if path not in WRITTEN:
        WRITTEN.add(path)
        t = validate_cli.preset_on_nodes(
            "dgx-h100-16x8", topology, name,
            f"{topology * 8} H100 as {topology} DGX H100 nodes: dgx-h100-16x8's constants (its "
            "description names their sources) on more nodes")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(t, f, indent=2)
    return path


def evaluate(args, r, model, vp):
    """meshtp's price of row r's layout with vp virtual stages: TFLOP/s per GPU and its parts."""
    lay = r["layout"]
    dp = r["gpus"] // (lay["tp"] * lay["cp"] * lay["pp"])
    m = lay["gbs"] // (dp * lay["mbs"])
    cmd = [args.meshtp, "plan", "--3d", "--evaluate", "--runtime", "megatron",
           "--topology", topology_path(args.out, r["topology"]), "--model", r["model"],
           "--seq", str(lay["seq"]), "--batch", str(lay["gbs"]), "--dp", str(dp),
           "--pp", str(lay["pp"]), "--mesh", f"{lay['tp']}x1", "--cp", str(lay["cp"]),
           "--ep", str(lay["ep"]),
           "--etp", str(lay["etp"]), "--microbatches", str(m), "--zero", "1",
           "--attention", "fused", "--recompute", "none"]
    if lay["tp"] > 1:
        cmd.append("--sequence-parallel")  # Megatron-LM requires it with MoE and tp > 1
    if vp > 1:
        cmd += ["--schedule", f"interleaved:{vp}"]
    j = run(cmd + ["--json"])
    step = j["t_step_s"]
    tflops = model_flops(model, lay["gbs"], lay["seq"]) / (step * r["gpus"]) / 1e12
    causal = model_flops(model, lay["gbs"], lay["seq"], 0.5) / (step * r["gpus"]) / 1e12
    return {"meshtp_tflops": tflops, "meshtp_mfu": tflops / PEAK_TFLOPS,
            "meshtp_mfu_causal": causal / PEAK_TFLOPS, "step_s": step,
            "memory_gib": j["memory_gib"], "fits": j["fits"],
            "moe_a2a_share": j.get("t_moe_a2a_s", 0) * m / step,
            "moe_compute_share": j.get("t_moe_compute_s", 0) * m / step,
            "bubble_share": j["parts"]["bubble_s"] / step,
            "command": " ".join(["meshtp"] + cmd[1:])}


def error(r, priced):
    """meshtp against the published number (TFLOP/s or MFU, the same ratio); None if none."""
    if r["published_tflops"]:
        return priced["meshtp_tflops"] / r["published_tflops"] - 1
    if r["published_mfu"]:
        return priced["meshtp_mfu"] / r["published_mfu"] - 1
    return None


def main():
    args = validate_cli.parse_args(__doc__)
    rows = []
    for r in RUNS:
        model = json.load(open(os.path.join(ROOT, "models", r["model"] + ".json")))
        row = dict(r)
        row.update(evaluate(args, r, model, r["layout"]["vp"]))
        row["error"] = error(r, row)
        if r["published_mfu"]:  # the paper's MFU read in Megatron-Core ≥ v0.12's causal count
            row["error_causal"] = row["meshtp_mfu_causal"] / r["published_mfu"] - 1
        if r.get("vp_whatif"):
            row["whatif"] = evaluate(args, r, model, r["vp_whatif"])
            row["whatif"]["error"] = error(r, row["whatif"])
        rows.append(row)
    pct = lambda e: "–" if e is None else f"{100 * e:+.0f}%"
    lines = ["| model | GPUs | seq | GBS | layout (TP CP PP VP EP ETP) | published | meshtp | "
             "error | error, causal count | step s | a2a share | experts' compute share | "
             "GiB (fits 80) | what-if: VP 7 (error, GiB) | source |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        published = (f"{r['published_tflops']} TFLOP/s" if r["published_tflops"]
                     else f"{100 * r['published_mfu']:.1f}% MFU" if r["published_mfu"]
                     else "unknown")
        lay = r["layout"]
        w = r.get("whatif")
        whatif = (f"{pct(w['error'])}, {w['memory_gib']:.1f}{'' if w['fits'] else ' (no)'}"
                  if w else "–")
        lines.append(
            f"| {r['model']} | {r['gpus']} | {lay['seq']} | {lay['gbs']} | {lay['tp']} {lay['cp']} "
            f"{lay['pp']} {lay['vp']} {lay['ep']} {lay['etp']} | {published} | {r['meshtp_tflops']:.0f} TFLOP/s "
            f"({100 * r['meshtp_mfu']:.1f}% MFU) | {pct(r['error'])} | "
            f"{pct(r.get('error_causal'))} | {r['step_s']:.2f} | "
            f"{100 * r['moe_a2a_share']:.0f}% | {100 * r['moe_compute_share']:.0f}% | "
            f"{r['memory_gib']:.1f} ({'yes' if r['fits'] else 'no'}) | {whatif} | "
            f"{r['source']} |")
    checked = [r["error"] for r in rows if r.get("error") is not None]
    causal = [r["error_causal"] for r in rows if "error_causal" in r]
    summary_causal = (f"; read in the causal count (the {len(causal)} MFU rows): mean |error| "
                      f"{100 * sum(map(abs, causal)) / len(causal):.1f}%, "
                      f"{sum(abs(e) <= 0.15 for e in causal)} within 15%")
    summary = (f"{len(checked)} rows with a published number: mean |error| "
               f"{100 * sum(map(abs, checked)) / len(checked):.1f}%, "
               f"from {100 * min(checked):+.1f}% to {100 * max(checked):+.1f}%, "
               f"{sum(abs(e) <= 0.15 for e in checked)} within 15%") + summary_causal
    text = "\n".join(lines) + "\n\n" + summary + "\n"
    commands = [r["command"] for r in rows if "command" in r] + \
        [r["whatif"]["command"] for r in rows if "whatif" in r]
    with open(os.path.join(args.out, "moe.md"), "w") as f:
        f.write(text + "\n" + "\n".join(commands) + "\n")
    with open(os.path.join(args.out, "moe.json"), "w") as f:
        json.dump({"runs": rows}, f, indent=2)
    print(text, end="")


if __name__ == "__main__":
    main()
