#!/usr/bin/env python3
"""check_precision.py FP16_JSON FP32_JSON: the same simulated layout of an fp16 and an fp32
model (`meshtp simulate --json`). The simulator runs the model's precision: the fp16 run's
point-to-point and collective traffic takes at most 0.6 of the fp32 run's time (2 bytes an
element instead of 4, plus the same per-message latency), its compute the same, and the
planner prices each run within 1% of its simulation."""
import json
import sys


def load(path):
    run = json.load(open(path))["runs"][0]
    sim = run["simulated"]
    comm = sum(c["seconds"] for c in sim["collectives"])
    err = 100 * (run["predicted"]["total_s"] - sim["total_s"]) / sim["total_s"]
    print(f"{path}: {run['layout']} element_bytes={run['spec']['element_bytes']}: simulated "
          f"{sim['total_s'] * 1e3:.3f} ms (communication {comm * 1e3:.3f}, compute "
          f"{sim['compute_s'] * 1e3:.3f}), planned {run['predicted']['total_s'] * 1e3:.3f} ms "
          f"({err:+.2f}%)")
    if abs(err) > 1:
        sys.exit(f"error: {path}: the planner is {err:+.2f}% off the simulation (limit 1%)")
    return run["spec"]["element_bytes"], comm, sim["compute_s"]


half, full = load(sys.argv[1]), load(sys.argv[2])
if (half[0], full[0]) != (2, 4):
    sys.exit(f"error: element_bytes {half[0]} and {full[0]}, expected 2 and 4")
ratio = half[1] / full[1]
print(f"fp16/fp32 communication time {ratio:.3f}, compute {half[2] / full[2]:.3f}")
if not ratio <= 0.6:
    sys.exit(f"error: fp16 communication takes {ratio:.3f} of fp32's: the precision is not on the wire")
if abs(half[2] / full[2] - 1) > 1e-9:
    sys.exit("error: the compute differs between the precisions")
print("ok: the simulation moves the model's precision")
