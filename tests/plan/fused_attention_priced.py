#!/usr/bin/env python3
"""fused_attention_priced.py MESHTP PLAN_ARGS…: `meshtp plan --3d --evaluate PLAN_ARGS --json`
with --attention unfused and fused. The fused plan must say so ("attention": "fused"), be
priced below the unfused one (its core's products over the tiles it visits, no s×s softmax),
and at a long sequence need a small fraction of its memory (L per row and head instead of the
s×s probabilities). Prints one line with both."""
import json
import subprocess
import sys

meshtp, plan_args = sys.argv[1], sys.argv[2:]


def evaluate(attention):
    cmd = [meshtp, "plan", "--3d", "--evaluate", *plan_args, "--attention", attention, "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"fused_attention_priced: {' '.join(cmd)} failed: {run.stderr.strip()}")
    return json.loads(run.stdout)


unfused, fused = evaluate("unfused"), evaluate("fused")
if unfused["plan"].get("attention", "unfused") != "unfused" or fused["plan"].get("attention") != "fused":
    sys.exit(f"fused_attention_priced: plans say {unfused['plan'].get('attention')} and "
             f"{fused['plan'].get('attention')}")
if not fused["t_step_s"] < unfused["t_step_s"]:
    sys.exit(f"fused_attention_priced: fused step {fused['t_step_s']} s is not below unfused "
             f"{unfused['t_step_s']} s")
if not fused["memory_gib"] < 0.1 * unfused["memory_gib"]:
    sys.exit(f"fused_attention_priced: fused {fused['memory_gib']} GiB is not under a tenth of "
             f"unfused {unfused['memory_gib']} GiB")
print(f"unfused: step {unfused['t_step_s']:.4g} s, {unfused['memory_gib']:.3g} GiB; "
      f"fused: step {fused['t_step_s']:.4g} s, {fused['memory_gib']:.3g} GiB")
