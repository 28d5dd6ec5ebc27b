#!/usr/bin/env python3
"""check_fold.py LIMIT FULL.json FOLDED.json: the same `meshtp simulate --what pipeline --json`
run without and with --fold-layers simulates step times within LIMIT percent of each other
(layer folding, core/simulation.hpp), and both ran the same layout. Prints the planner's price
beside them (reported, not checked)."""
import json
import sys

limit = float(sys.argv[1])
runs = []
for path in sys.argv[2:4]:
    with open(path) as f:
        j = json.load(f)
    if len(j["runs"]) != 1:
        sys.exit(f"error: {path}: expected one simulated layout, got {len(j['runs'])}")
    runs.append(j["runs"][0])
full, folded = runs
if full["plan"] != folded["plan"]:
    sys.exit("error: the two runs simulated different layouts")
if not folded["spec"]["fold_layers"] or full["spec"]["fold_layers"]:
    sys.exit("error: the first run must be unfolded and the second folded")
t_full, t_folded = full["simulated"]["total_s"], folded["simulated"]["total_s"]
plan = full["predicted"]["total_s"]
diff = 100 * (t_folded - t_full) / t_full
print(f"{full['layout']}: simulated {t_full * 1e3:.3f} ms, folded {t_folded * 1e3:.3f} ms "
      f"({diff:+.2f}%), planned {plan * 1e3:.3f} ms ({100 * (plan - t_full) / t_full:+.1f}%)")
if abs(diff) > limit:
    sys.exit(f"error: folding the layers moved the simulated step {diff:+.2f}% (limit {limit}%)")
print(f"layer folding: within {limit:g}% of the full simulation")
