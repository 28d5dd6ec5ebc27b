#!/usr/bin/env python3
"""check_trace.py TRACE RANKS: TRACE is the Chrome trace `meshtp simulate --trace` wrote; it
must parse as JSON (no byte of it lost: the simulated build delivers messages of 64 KiB or more
without their contents, and every rank's events are larger than that here), and every one of
the RANKS ranks must have named its process and recorded compute and communication spans."""
import collections
import json
import sys

path, ranks = sys.argv[1], int(sys.argv[2])
with open(path, "rb") as f:
    raw = f.read()
nul = raw.find(b"\0")
if nul >= 0:
    sys.exit(f"error: {path} holds NUL bytes from offset {nul}: a rank's events were lost")
events = json.loads(raw)["traceEvents"]
kinds = collections.defaultdict(set)
for e in events:
    kinds[e["pid"]].add(e.get("cat", e["name"]))
missing = [r for r in range(ranks) if not {"process_name", "compute", "comm"} <= kinds.get(r, set())]
if missing:
    sys.exit(f"error: ranks {missing} lack their process name, compute or comm spans")
print(f"trace complete: {len(events)} events from {ranks} ranks, {len(raw)} bytes")
