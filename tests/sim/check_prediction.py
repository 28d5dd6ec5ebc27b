#!/usr/bin/env python3
"""check_prediction.py LIMIT < JSON: every layout that `meshtp simulate --json` ran is priced
by the planner within LIMIT percent of its simulated time (error = (plan − sim) / sim)."""
import json
import sys

limit = float(sys.argv[1])
text = sys.stdin.read()
print(text, end="")
runs = json.loads(text)["runs"]
if not runs:
    sys.exit("error: no simulated layout in the output")
for run in runs:
    sim, plan = run["simulated"]["total_s"], run["predicted"]["total_s"]
    err = 100 * (plan - sim) / sim
    print(f"{run['layout']}: simulated {sim * 1e3:.3f} ms, planned {plan * 1e3:.3f} ms, {err:+.1f}%")
    if abs(err) > limit:
        sys.exit(f"error: {run['layout']} is priced {err:+.1f}% off its simulated time "
                 f"(limit {limit}%)")
print(f"planner: {len(runs)} layout(s) within {limit}% of the simulation")
