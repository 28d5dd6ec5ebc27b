#!/usr/bin/env python3
"""check_ring.py FILE P LINK_GBPS HOP_LATENCY_S: a lone collective of the simulated build against
the ring formula (within 5%).

FILE holds `meshtp bench collectives --json` lines measured on P simulated devices, each on its
own full-duplex link of LINK_GBPS GB/s to a non-blocking switch (tests/sim/flat16.xml): a ring
step sends n/P bytes from every device to the next at once, each message crossing two links
(HOP_LATENCY_S in total) and no two messages sharing a link direction, so a step takes
alpha + (n/P)/B and

    all_reduce      = 2(P-1) steps   (ring reduce-scatter, then ring all-gather)
    all_gather      =  (P-1) steps
    reduce_scatter  =  (P-1) steps
"""
import json
import sys

path, p, gbps, alpha = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
steps = {"all_reduce": 2 * (p - 1), "all_gather": p - 1, "reduce_scatter": p - 1}
bw = gbps * 1e9
checked = 0
worst = 0.0
with open(path) as f:
    for line in f:
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        c = r["collective"]
        if c not in steps or r["group_size"] != p:
            continue
        n = r["bytes"]
        expected = steps[c] * (alpha + n / p / bw)
        err = abs(r["median_s"] - expected) / expected
        worst = max(worst, err)
        print(f"{c:15s} P={p} {n:>10d} B: simulated {r['median_s'] * 1e3:.4f} ms, "
              f"ring formula {expected * 1e3:.4f} ms, error {100 * err:.2f}%")
        checked += 1
if checked == 0:
    sys.exit("no all_reduce/all_gather/reduce_scatter measurement found in " + path)
if worst > 0.05:
    sys.exit(f"error: simulated time is {100 * worst:.2f}% off the ring formula (limit 5%)")
print(f"ring formula: {checked} measurements within {100 * worst:.2f}% (limit 5%)")
