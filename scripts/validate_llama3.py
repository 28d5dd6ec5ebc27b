#!/usr/bin/env python3
"""Price the Llama 3 paper's three 405B runs ("The Llama 3 Herd of Models", Table 4) as they
ran, with `meshtp plan --3d --evaluate --runtime megatron` on the dgx-h100 presets, and set
the model TFLOP/s per GPU beside the published ones. A comparison: nothing is fitted to these
rows and there is no pass criterion (docs/long_context.md says how far off they are, and why).

Writes OUT/llama3.json and OUT/llama3.md; prints the table.

How the runs ran, from the paper (§3.3.2 unless noted), and what each becomes here:
- Layout: Table 4's TP, CP, PP, DP; 16M tokens per batch, "Batch size/DP" sequences per
  data-parallel rank (32, 16, 16) as microbatches of one sequence. The third row prints DP 4,
  but its 16,384 GPUs and 16M tokens both need DP 8 (8·16·16·8 GPUs, 8·16 sequences of
  131,072): DP 8.
- Pipeline: one Transformer layer fewer on the first and on the last stage (7 + 14·8 + 7 =
  126: --first/last-stage-layers 7), and the interleaved schedule with V stages per pipeline
  rank. The paper does not print V, but "the first model chunk on the first stage has only the
  embedding, and the last model chunk on the last stage has only output projection and loss"
  once that one layer is gone: a chunk holds one layer, so V = 8 (8 one-layer chunks of a
  middle stage). --schedule interleaved:8.
- Attention: the fused core (--attention fused). The paper does not name its kernel, but an
  unfused core could not have run the 131,072-token row: the scores of a rank's 8,192 queries
  against the 131,072 gathered keys are 16 heads per TP rank × 8,192 × 131,072 × 2 bytes =
  34 GB a layer, kept for the backward, on an 80 GB GPU holding 8 layers of up to 16
  microbatches; Transformer Engine's all-gather CP, which cites this section, runs only
  flash or fused (cuDNN) attention kernels.
- Context parallelism: all-gather based (--cp-comm all_gather): K and V gathered, then the
  local queries' core; "the all-gather communication latency is exposed in the critical
  path". The sequence in 2·CP chunks, rank i holding chunks i and 2·CP−1−i.
- Recomputation: "we could pre-train Llama 3 on sequences of 8K tokens without activation
  checkpointing": none at 8,192. The paper says nothing for 131,072; selective there (priced
  the same as none with the fused core, whose output it keeps).
- Data parallelism: FSDP sharding the optimizer state and gradients, the weights not
  resharded after the forward (ZeRO-2's memory): --zero 2, which the megatron runtime prices
  as Megatron-FSDP's optim_grads (each microbatch's reduce-scatters hidden under its backward
  but the last layer's; docs/pipeline.md).
- TFLOP/s: BF16 MFU after Chowdhery et al. (PaLM, Appendix B): 6N + 12·L·H·Q·T per token, the
  attention products whole, not halved by the causal mask. 430/400/380 TFLOP/s are 43/40/38%
  of the H100's 989. This project's count is the same (layout/model_shape.hpp): per layer
  6·b·s·Σ in·out of the four linears + 12·b·s²·h, plus the head's 6·b·s·h·V. The `causal`
  column halves the attention products (the work the fused core does).

Beside the row as it ran, a sweep of the schedule (1F1B, interleaved V = 2, 4, 8) with the
rest unchanged, and the layout as this project priced it before (the unfused core, ring CP,
selective recomputation, 1F1B).
"""
import json
import os
import subprocess
import sys

import validate_cli

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# (GPUs, topology, tp, cp, pp, dp, seq, batch in sequences (16M tokens), published TFLOP/s,
# recomputation as the paper ran it).
RUNS = [
    (8192, "dgx-h100-1024x8", 8, 1, 16, 64, 8192, 2048, 430, "none"),
    (16384, "dgx-h100-2048x8", 8, 1, 16, 128, 8192, 2048, 400, "none"),
    (16384, "dgx-h100-2048x8", 8, 16, 16, 8, 131072, 128, 380, "selective"),
]
V = 8  # one layer per model chunk (the paper's first chunk holds only the embedding)


def model_flops(model, batch, seq, causal=False):
    h, f, a, g = model["hidden"], model["ffn_hidden"], model["heads"], model["kv_heads"]
    d = h // a
    mlp1 = 2 * f if model["activation"] == "swiglu" else f
    weights = h * (h + 2 * g * d) + h * h + h * mlp1 + f * h
    attention = (6 if causal else 12) * batch * seq * seq * h
    return model["layers"] * (6 * batch * seq * weights + attention) + \
        6 * batch * seq * h * model["vocab"]


def price(cmd):
    return json.loads(subprocess.run(cmd + ["--json"], check=True, capture_output=True,
                                     text=True).stdout)


def main():
    args = validate_cli.parse_args(__doc__)
    model = json.load(open(os.path.join(ROOT, "models", "llama3-405b.json")))
    rows = []
    for gpus, topology, tp, cp, pp, dp, seq, batch, published, recompute in RUNS:
        m = batch // dp  # microbatches of one sequence
        flops = model_flops(model, batch, seq)
        base = [args.meshtp, "plan", "--3d", "--evaluate", "--runtime", "megatron",
                "--topology", topology, "--model", "llama3-405b", "--seq", str(seq),
                "--batch", str(batch), "--dp", str(dp), "--pp", str(pp), "--mesh", f"{tp}x1",
                "--cp", str(cp), "--sequence-parallel", "--first-stage-layers", "7",
                "--last-stage-layers", "7", "--zero", "2", "--microbatches", str(m)]
        as_ran = base + ["--recompute", recompute, "--attention", "fused"]
        if cp > 1:
            as_ran += ["--cp-comm", "all_gather"]
        before_cmd = base + ["--recompute", "selective"]  # unfused, ring, 1F1B
        tflops = lambda j: flops / (j["t_step_s"] * gpus) / 1e12  # noqa: E731
        sweep = {}
        for schedule in ["1f1b"] + [f"interleaved:{v}" for v in (2, 4, 8)]:
            j = price(as_ran + ["--schedule", schedule])
            sweep[schedule] = {"tflops": tflops(j), "step_s": j["t_step_s"],
                               "memory_gib": j["memory_gib"]}
        cmd = as_ran + ["--schedule", f"interleaved:{V}"]
        j = price(cmd)
        before = price(before_cmd)
        step = j["t_step_s"]
        parts = j["parts"]
        rows.append({"gpus": gpus, "tp": tp, "cp": cp, "pp": pp, "dp": dp, "seq": seq,
                     "published_tflops": published,
                     "published_step_s": flops / (published * 1e12 * gpus),
                     "meshtp_tflops": tflops(j),
                     "causal_tflops": model_flops(model, batch, seq, causal=True) /
                     (step * gpus) / 1e12,
                     "error": tflops(j) / published - 1, "step_s": step,
                     "bubble_share": parts["bubble_s"] / step, "parts": parts,
                     "memory_gib": j["memory_gib"], "fits": j["fits"],
                     "schedule": f"interleaved:{V}", "sweep": sweep,
                     "before": {"tflops": tflops(before), "step_s": before["t_step_s"],
                                "error": tflops(before) / published - 1,
                                "memory_gib": before["memory_gib"],
                                "command": " ".join(["meshtp"] + before_cmd[1:])},
                     "command": " ".join(["meshtp"] + cmd[1:])})
    lines = ["| GPUs | TP CP PP DP | seq | published TFLOP/s (step s) | meshtp | error | "
             "causal count | step s | bubble | GiB (fits 80) | before (unfused, ring, 1F1B) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = r["before"]
        lines.append(
            f"| {r['gpus']:,} | {r['tp']} {r['cp']} {r['pp']} {r['dp']} | {r['seq']:,} | "
            f"{r['published_tflops']} ({r['published_step_s']:.2f}) | {r['meshtp_tflops']:.0f} | "
            f"{100 * r['error']:+.0f}% | {r['causal_tflops']:.0f} | {r['step_s']:.2f} | "
            f"{100 * r['bubble_share']:.0f}% | {r['memory_gib']:.1f} "
            f"({'yes' if r['fits'] else 'no'}) | {b['tflops']:.0f} ({100 * b['error']:+.0f}%) |")
    lines += ["", "| GPUs | seq | " + " | ".join(rows[0]["sweep"]) + " |",
              "|---|---|" + "---|" * len(rows[0]["sweep"])]
    for r in rows:
        lines.append(f"| {r['gpus']:,} | {r['seq']:,} | " + " | ".join(
            f"{s['tflops']:.0f} ({100 * (s['tflops'] / r['published_tflops'] - 1):+.0f}%, "
            f"{s['memory_gib']:.0f} GiB)" for s in r["sweep"].values()) + " |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "llama3.md"), "w") as f:
        f.write(text + "\n" + "\n".join(r["command"] for r in rows) + "\n")
    with open(os.path.join(args.out, "llama3.json"), "w") as f:
        json.dump({"runs": rows}, f, indent=2)
    print(text, end="")


if __name__ == "__main__":
    main()
