"""What the validate_*.py scripts share: their command line (OUT, --meshtp) and the binary's
check, written once."""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(doc, out_subdir=None):
    """OUT and --meshtp (default: this checkout's build); refuses a missing binary and makes
    OUT (or OUT/out_subdir) before returning the arguments."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--meshtp", default=os.path.join(ROOT, "build", "src", "cli", "meshtp"))
    args = ap.parse_args()
    if not os.access(args.meshtp, os.X_OK):
        sys.exit(f"error: no meshtp binary at '{args.meshtp}' (build first, or --meshtp PATH)")
    os.makedirs(os.path.join(args.out, out_subdir) if out_subdir else args.out, exist_ok=True)
    return args


def preset_on_nodes(preset, nodes, name, description):
    """The topology file `preset` (topologies/PRESET.json) with `nodes` at its node level
    (levels[0]) and every other constant as given: a published run's machine that no preset
    has. `name` and `description` say what it is."""
    import json
    with open(os.path.join(ROOT, "topologies", preset + ".json")) as f:
        t = json.load(f)
    t["name"] = name
    t["levels"][0]["members"] = nodes
    t["description"] = description
    return t
