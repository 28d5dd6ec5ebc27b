#!/usr/bin/env python3
"""check_fused_attention.py PERCENT: reads `meshtp simulate --json` of one layout run with
--attention fused. The run must be the fused one (its plan says "attention": "fused"), its
simulated compute equal the planner's (the op charges what core/gemm_model.hpp
flash_attention_seconds and the elementwise "attention io" price) to 1e-9, and its total be
within PERCENT of the prediction. Prints one line."""
import json
import sys

percent = float(sys.argv[1])
runs = json.load(sys.stdin)["runs"]
if len(runs) != 1:
    sys.exit(f"check_fused_attention: {len(runs)} runs, expected one")
r = runs[0]
if r["spec"]["plan"].get("attention") != "fused":
    sys.exit(f"check_fused_attention: the simulation ran {r['spec']['plan'].get('attention')!r}, "
             "not the fused core")
p, s = r["predicted"], r["simulated"]
if abs(s["compute_s"] - p["compute_s"]) > 1e-9 * p["compute_s"]:
    sys.exit(f"check_fused_attention: simulated compute {s['compute_s']} s, predicted "
             f"{p['compute_s']} s")
error = 100 * (p["total_s"] - s["total_s"]) / s["total_s"]
if abs(error) > percent:
    sys.exit(f"check_fused_attention: predicted {p['total_s']} s against simulated "
             f"{s['total_s']} s: {error:+.1f}%, more than {percent}%")
print(f"fused attention: compute {s['compute_s'] * 1e3:.4f} ms simulated and predicted, total "
      f"{s['total_s'] * 1e3:.4f} ms simulated, {p['total_s'] * 1e3:.4f} ms predicted "
      f"({error:+.1f}%)")
