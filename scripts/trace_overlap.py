#!/usr/bin/env python3
"""Overlap summary of a meshtp Chrome trace (meshtp bench layer --trace FILE).

Per rank: time in compute (GeMM) spans; time of non-blocking collectives from start to
completion and how much of it ran under a GeMM (hidden); time of blocking collectives and of
waits (exposed). Usage: scripts/trace_overlap.py TRACE.json
"""
import json
import sys
from collections import defaultdict


def merge(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def covered(interval, merged):
    a, b = interval
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in merged)


def main(path):
    data = json.load(open(path))
    events = data["traceEvents"] if isinstance(data, dict) else data
    per_rank = defaultdict(lambda: defaultdict(list))
    for e in events:
        if e.get("ph") != "X":
            continue
        per_rank[e["pid"]][e["cat"]].append((e["name"], e["ts"], e["ts"] + e["dur"]))
    print(f"{'rank':>4} {'compute ms':>11} {'async comm ms':>14} {'under GeMM':>11} "
          f"{'blocking ms':>12} {'wait ms':>8}")
    for rank in sorted(per_rank):
        spans = per_rank[rank]
        compute = merge([(a, b) for _, a, b in spans["compute"]])
        asynchronous = [(a, b) for n, a, b in spans["comm"] if n.startswith("i")]
        blocking = [(a, b) for n, a, b in spans["comm"] if not n.startswith("i") and n != "barrier"]
        async_total = sum(b - a for a, b in asynchronous)
        hidden = sum(covered(s, compute) for s in asynchronous)
        print(f"{rank:>4} {sum(b - a for a, b in compute) / 1e3:>11.2f} {async_total / 1e3:>14.2f} "
              f"{100 * hidden / max(async_total, 1e-9):>10.1f}% "
              f"{sum(b - a for a, b in blocking) / 1e3:>12.2f} "
              f"{sum(b - a for _, a, b in spans['wait']) / 1e3:>8.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
