#!/usr/bin/env python3
"""Price the Llama 3 paper's three 405B runs ("The Llama 3 Herd of Models", Table 4) with
`meshtp plan --3d --evaluate --runtime megatron` on the dgx-h100 presets, and set the model
TFLOP/s per GPU beside the published ones. A comparison: nothing is fitted to these rows and
there is no pass criterion (docs/long_context.md says how far off they are, and why).

Writes OUT/llama3.json and OUT/llama3.md; prints the table.

TFLOP/s per GPU = model FLOPs of a step / (predicted step seconds × GPUs), the FLOPs in this
project's count (layout/model_shape.hpp): per layer 6·b·s·Σ in·out of the four linears +
12·b·s²·h (the attention products whole, not halved by the causal mask), plus the head's
6·b·s·h·V. The paper does not say how it counts; with the causal half (6·b·s²·h) the
131,072-token row's count is 0.71 of ours (the `causal` column).

Beside the 1F1B price, the same layouts with the interleaved schedule over V = 2, 4, 8
virtual stages (`--schedule interleaved:V`), a sweep rather than a choice: the paper
interleaved its uneven stages (§3.3.2) without saying V. Megatron-LM cannot run that (7-layer
stages are not divisible by V); the planner prices each rank's largest chunk, ⌈layers/V⌉
layers, so its memory is an upper bound.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# (GPUs, topology, tp, cp, pp, dp, seq, batch in sequences (16M tokens), published TFLOP/s).
RUNS = [
    (8192, "dgx-h100-1024x8", 8, 1, 16, 64, 8192, 2048, 430),
    (16384, "dgx-h100-2048x8", 8, 1, 16, 128, 8192, 2048, 400),
    (16384, "dgx-h100-2048x8", 8, 16, 16, 8, 131072, 128, 380),
]


def model_flops(model, batch, seq, causal=False):
    h, f, a, g = model["hidden"], model["ffn_hidden"], model["heads"], model["kv_heads"]
    d = h // a
    mlp1 = 2 * f if model["activation"] == "swiglu" else f
    weights = h * (h + 2 * g * d) + h * h + h * mlp1 + f * h
    attention = (6 if causal else 12) * batch * seq * seq * h
    return model["layers"] * (6 * batch * seq * weights + attention) + \
        6 * batch * seq * h * model["vocab"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--meshtp", default=os.path.join(ROOT, "build", "src", "cli", "meshtp"))
    args = ap.parse_args()
    if not os.access(args.meshtp, os.X_OK):
        sys.exit(f"error: no meshtp binary at '{args.meshtp}' (build first, or --meshtp PATH)")
    os.makedirs(args.out, exist_ok=True)
    model = json.load(open(os.path.join(ROOT, "models", "llama3-405b.json")))
    rows = []
    for gpus, topology, tp, cp, pp, dp, seq, batch, published in RUNS:
        m = batch // dp  # microbatches of one sequence
        cmd = [args.meshtp, "plan", "--3d", "--evaluate", "--runtime", "megatron",
               "--topology", topology, "--model", "llama3-405b", "--seq", str(seq),
               "--batch", str(batch), "--dp", str(dp), "--pp", str(pp), "--mesh", f"{tp}x1",
               "--cp", str(cp), "--sequence-parallel", "--recompute", "selective",
               "--first-stage-layers", "7", "--last-stage-layers", "7", "--zero", "1",
               "--microbatches", str(m), "--json"]
        j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        interleaved = {}
        for v in (2, 4, 8):
            jv = json.loads(subprocess.run(cmd[:-1] + ["--schedule", f"interleaved:{v}",
                                                       "--json"],
                                           check=True, capture_output=True, text=True).stdout)
            interleaved[v] = {"tflops": model_flops(model, batch, seq) /
                              (jv["t_step_s"] * gpus) / 1e12,
                              "step_s": jv["t_step_s"], "memory_gib": jv["memory_gib"]}
        step = j["t_step_s"]
        tflops = model_flops(model, batch, seq) / (step * gpus) / 1e12
        causal = model_flops(model, batch, seq, causal=True) / (step * gpus) / 1e12
        parts = j["parts"]
        rows.append({"gpus": gpus, "tp": tp, "cp": cp, "pp": pp, "dp": dp, "seq": seq,
                     "published_tflops": published, "meshtp_tflops": tflops,
                     "causal_tflops": causal, "error": tflops / published - 1,
                     "step_s": step, "bubble_share": parts["bubble_s"] / step,
                     "memory_gib": j["memory_gib"], "fits": j["fits"],
                     "interleaved": interleaved,
                     "command": " ".join(["meshtp"] + cmd[1:-1])})
    lines = ["| GPUs | TP CP PP DP | seq | published TFLOP/s | meshtp | error | causal count | "
             "step s | bubble | GiB (fits 80) | interleaved V=2, 4, 8 (GiB) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['gpus']:,} | {r['tp']} {r['cp']} {r['pp']} {r['dp']} | {r['seq']:,} | "
            f"{r['published_tflops']} | {r['meshtp_tflops']:.0f} | {100 * r['error']:+.0f}% | "
            f"{r['causal_tflops']:.0f} | {r['step_s']:.2f} | {100 * r['bubble_share']:.0f}% | "
            f"{r['memory_gib']:.1f} ({'yes' if r['fits'] else 'no'}) | " +
            ", ".join(f"{i['tflops']:.0f} ({100 * (i['tflops'] / r['published_tflops'] - 1):+.0f}%, "
                      f"{i['memory_gib']:.0f})" for i in r["interleaved"].values()) + " |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "llama3.md"), "w") as f:
        f.write(text + "\n" + "\n".join(r["command"] for r in rows) + "\n")
    with open(os.path.join(args.out, "llama3.json"), "w") as f:
        json.dump({"runs": rows}, f, indent=2)
    print(text, end="")


if __name__ == "__main__":
    main()
