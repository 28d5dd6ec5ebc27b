#!/usr/bin/env python3
"""check_same_step.py RUNS: RUNS holds the JSON outputs of `meshtp simulate --json`, one after
the other; every run must report exactly the same simulated step time (float equality: the
runs differ only in how the simulator is run, never in what it simulates)."""
import json
import sys

text = open(sys.argv[1]).read()
decoder, pos, steps = json.JSONDecoder(), 0, []
while pos < len(text):
    if text[pos].isspace():
        pos += 1
        continue
    run, pos = decoder.raw_decode(text, pos)
    steps.append(run["runs"][0]["simulated"]["total_s"])
if len(steps) < 2:
    sys.exit(f"error: {len(steps)} run(s) in {sys.argv[1]}, expected at least 2")
if any(s != steps[0] for s in steps):
    sys.exit("error: the simulated step differs: " + ", ".join(repr(s) for s in steps) + " s")
print(f"same simulated step: {steps[0]!r} s in {len(steps)} runs")
