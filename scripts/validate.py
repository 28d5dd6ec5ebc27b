#!/usr/bin/env python3
"""Price Korthikanti et al. 2023 Table 5's eight Megatron-LM runs with `meshtp plan --3d
--evaluate --runtime megatron` and set them beside the measured seconds per step.

Writes OUT/validation.json and OUT/validation.md, and when matplotlib is installed
OUT/validation.png and OUT/index.html: the report page of `meshtp plan --report`
(scripts/report.py) for these runs, predicted beside measured. With --check, exits 1 unless
every run is within --max-error (10%) and the mean |error| is at most --max-mean-error
(4%): the acceptance criterion of docs/validation.md. Nothing here is fitted: the constants
are the presets' (topologies/dgx-a100-*.json), each naming its source.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import plotting  # beside this file (scripts/)
import report

# (model, layout flags, devices, topology, measured full s, measured seqsel s): Table 5.
RUNS = [
    ("korthikanti-22b", "22B", ["--pp", "1", "--microbatches", "1"], 8, "dgx-a100-1x8",
     [], 1.42, 1.10),
    ("gpt3-175b", "175B", ["--pp", "8", "--microbatches", "64", "--schedule", "interleaved:3"],
     64, "dgx-a100-8x8", ["--batch", "64"], 18.13, 13.75),
    ("mt-nlg-530b", "530B", ["--pp", "35", "--microbatches", "280", "--schedule",
                             "interleaved:3"], 280, "dgx-a100-35x8", ["--batch", "280"],
     49.05, 37.83),
    ("korthikanti-1t", "1T", ["--pp", "64", "--microbatches", "512"], 512, "dgx-a100-64x8",
     ["--batch", "512"], 94.42, 71.49),
]
VARIANTS = [("full", ["--recompute", "full"]),
            ("seqsel", ["--recompute", "selective", "--sequence-parallel"])]


def evaluate(meshtp, model, layout, devices, topology, extra, variant):
    cmd = [meshtp, "plan", "--3d", "--evaluate", "--runtime", "megatron", "--topology",
           topology, "--model", model, "--devices", str(devices), "--dp", "1", "--mesh",
           "8x1", *extra, *layout, *variant, "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out), " ".join(cmd[1:-1])


def prepare(meshtp, out):
    """Exits with a message unless `meshtp` runs; makes the output directory."""
    if not os.access(meshtp, os.X_OK):
        sys.exit(f"error: no meshtp binary at '{meshtp}' (build first, or --meshtp PATH)")
    os.makedirs(out, exist_ok=True)


def write_atomic(path, text):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".validate.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="output directory")
    ap.add_argument("--meshtp", default=os.environ.get("MESHTP", "build/src/cli/meshtp"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--max-error", type=float, default=0.10)
    ap.add_argument("--max-mean-error", type=float, default=0.04)
    a = ap.parse_args()
    prepare(a.meshtp, a.out)
    rows = []
    for model, label, layout, devices, topology, extra, full_s, seqsel_s in RUNS:
        for (variant, flags), measured in zip(VARIANTS, (full_s, seqsel_s)):
            j, cmd = evaluate(a.meshtp, model, layout, devices, topology, extra, flags)
            rows.append({"model": label, "variant": variant, "measured_s": measured,
                         "predicted_s": j["t_step_s"],
                         "error": j["t_step_s"] / measured - 1, "parts": j["parts"],
                         "memory_gib": j["memory_gib"], "memory": j["memory"],
                         "fits": j["fits"], "command": "meshtp " + cmd})
    mean = sum(abs(r["error"]) for r in rows) / len(rows)
    worst = max(abs(r["error"]) for r in rows)
    summary = {"source": "Korthikanti et al. 2023, Table 5", "mean_abs_error": mean,
               "max_abs_error": worst, "runs": rows}
    write_atomic(os.path.join(a.out, "validation.json"), json.dumps(summary, indent=2) + "\n")
    md = ["| model | variant | measured | predicted | error |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        md.append(f"| {r['model']} | {r['variant']} | {r['measured_s']:.2f} s | "
                  f"{r['predicted_s']:.2f} s | {100 * r['error']:+.1f}% |")
    md.append(f"\nMean |error| {100 * mean:.2f}%, max {100 * worst:.1f}% "
              "(Korthikanti et al. 2023 Table 5).\n")
    write_atomic(os.path.join(a.out, "validation.md"), "\n".join(md) + "\n")
    print("\n".join(md))
    try:
        plt = plotting.pyplot()
    except ImportError as e:
        print(f"no plots: {e}")
        plt = None
    if plt:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        plotting.side_by_side(ax, [f"{r['model']} {r['variant']}" for r in rows],
                              [("measured", [r["measured_s"] for r in rows]),
                               ("meshtp", [r["predicted_s"] for r in rows])], log=True)
        ax.set_ylabel("seconds per step")
        plotting.save(fig, os.path.join(a.out, "validation.png"), dpi=120)
        # The devices' memory, for the memory plot's line: one value when every run's
        # topology has the same device (Table 5's are all A100-80GB DGX nodes).
        gib = {json.loads(subprocess.run([a.meshtp, "topo", "show", t, "--json"], check=True,
                                         capture_output=True, text=True).stdout)
               ["device"]["memory_gib"] for t in {r[4] for r in RUNS}}
        page = {"report": "validate", "command": "scripts/validate.sh OUT", "result": summary}
        if len(gib) == 1:
            page["device_memory_gib"] = gib.pop()
        report.write_page(page, os.path.join(a.out, "index.html"))
    if a.check and (worst > a.max_error or mean > a.max_mean_error):
        sys.exit(f"error: Table 5: max |error| {100 * worst:.1f}% (limit "
                 f"{100 * a.max_error:.0f}%), mean {100 * mean:.2f}% (limit "
                 f"{100 * a.max_mean_error:.0f}%)")


if __name__ == "__main__":
    main()
