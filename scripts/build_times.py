#!/usr/bin/env python3
"""Where a build's time went, from Ninja's log (BUILD_DIR/.ninja_log, or a log file given
itself): task time by folder and kind (compile, link, archive, precompiled header), and the
slowest steps.

Task time is each step's own wall time; with -j N steps overlap, so the total is about N times
the build's wall time. Used by scripts/bench-build.sh; docs/building.md quotes its output.
"""
import argparse
import collections
import json
import os
import sys


def steps(log_path):
    """{output: seconds} of the newest run of each output in a .ninja_log (format v5)."""
    last = {}
    try:
        f = open(log_path)
    except OSError as e:
        sys.exit(f"error: cannot read Ninja's log '{log_path}': {e.strerror} (a build directory "
                 "made with -G Ninja, as scripts/install.sh makes them)")
    with f:
        for line in f:
            if line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 5:
                sys.exit(f"error: {log_path}: not a .ninja_log line: {line!r}")
            start, end, _mtime, output, _hash = fields
            try:
                last[output] = (int(end) - int(start)) / 1000
            except ValueError:
                sys.exit(f"error: {log_path}: not a .ninja_log line: {line!r}")
    return last


def group_of(output):
    if output.endswith(".gch"):
        return "precompiled headers"
    if output.endswith(".o"):
        top = output.split("/")[0]
        if top == "src":
            return "compile src/" + output.split("/")[1]
        return "compile " + (top if top in ("tests", "bench") else "other")
    if output.endswith(".a"):
        return "archive"
    return "link and other"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build_dir", help="a Ninja build directory, or its .ninja_log")
    ap.add_argument("--top", type=int, default=15, help="how many of the slowest steps to list")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of text")
    args = ap.parse_args()
    log = args.build_dir
    if os.path.isdir(log):
        log = os.path.join(log, ".ninja_log")
    times = steps(log)
    groups = collections.defaultdict(lambda: [0, 0.0])
    for output, seconds in times.items():
        g = groups[group_of(output)]
        g[0] += 1
        g[1] += seconds
    total = sum(times.values())
    slowest = sorted(times.items(), key=lambda kv: -kv[1])[: args.top]
    if args.json:
        print(json.dumps({"build_dir": args.build_dir, "steps": len(times), "task_s": total,
                          "groups": {k: {"steps": n, "task_s": s} for k, (n, s) in groups.items()},
                          "slowest": [{"output": o, "s": s} for o, s in slowest]}))
        return
    print(f"{args.build_dir}: {len(times)} steps, {total:.0f} s of task time")
    for name, (n, s) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name:28s} {n:4d} steps {s:8.1f} s  {100 * s / total:5.1f}%")
    print("slowest steps:")
    for output, s in slowest:
        print(f"  {s:7.1f} s  {output}")


if __name__ == "__main__":
    main()
