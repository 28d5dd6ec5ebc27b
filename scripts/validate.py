#!/usr/bin/env python3
"""Price Korthikanti et al. 2023 Table 5's eight Megatron-LM runs with `meshtp plan --3d
--evaluate --runtime megatron` and set them beside the measured seconds per step.

Writes OUT/validation.json and OUT/validation.md, and when matplotlib is installed
OUT/validation.png and OUT/index.html: the report page of `meshtp plan --report`
(scripts/report.py) for these runs, predicted beside measured. With --check, exits 1 unless
every run is within --max-error (10%) and the mean |error| is at most --max-mean-error
(4%): the acceptance criterion of docs/validation.md. Also the activations per GPU of the
same layouts under every Table 2 form (recomputation none, selective, full; with and without
sequence parallelism) beside the paper's count; --check also exits 1 unless each is within
--max-memory-error (10%). Nothing here is fitted: the constants are the presets'
(topologies/dgx-a100-*.json), each naming its source.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import plotting  # beside this file (scripts/)
import report

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models")
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
# Korthikanti et al. 2023 Table 2's forms of a layer's activations (bytes per s·b·h, t
# tensor-parallel ranks, a heads, r = a·s/h), each a recomputation and sequence parallelism.
MEMORY_FORMS = [
    ("none", False, lambda t, r: 10 + 24 / t + 5 * r / t),
    ("selective", False, lambda t, r: 10 + 24 / t),
    ("none+sp", True, lambda t, r: 34 / t + 5 * r / t),
    ("selective+sp", True, lambda t, r: 34 / t),
    ("full", False, lambda t, r: 2),
]


def evaluate(meshtp, model, layout, devices, topology, extra, variant):
    cmd = [meshtp, "plan", "--3d", "--evaluate", "--runtime", "megatron", "--topology",
           topology, "--model", model, "--devices", str(devices), "--dp", "1", "--mesh",
           "8x1", *extra, *layout, *variant, "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out), " ".join(cmd[1:-1])


def layers_in_flight(layers, pp, schedule):
    """Layers' worth of activations pipeline rank 0 keeps (Korthikanti et al. 2023 §4.2.3):
    L with 1F1B (p microbatches of L/p layers), L·(1 + (p − 1)/(p·v)) interleaved."""
    v = int(schedule.split(":")[1]) if schedule.startswith("interleaved:") else 1
    return layers * (1 + (pp - 1) / (pp * v)) if v > 1 else layers


def memory_rows(meshtp):
    """Activations per GPU of the Table 5 layouts under `--runtime megatron`, every Table 2
    form, beside the paper's count (its layers only: no embedding or head)."""
    rows = []
    for model, label, layout, devices, topology, extra, _, _ in RUNS:
        with open(os.path.join(MODELS, model + ".json")) as f:
            spec = json.load(f)
        batch = int(extra[extra.index("--batch") + 1]) if "--batch" in extra else spec["batch"]
        pp = int(layout[layout.index("--pp") + 1])
        m = int(layout[layout.index("--microbatches") + 1])
        schedule = layout[layout.index("--schedule") + 1] if "--schedule" in layout else "1f1b"
        s, h, a, t = spec["seq"], spec["hidden"], spec["heads"], 8
        sbh = s * (batch // m) * h
        worth = layers_in_flight(spec["layers"], pp, schedule)
        for form, sp, per_sbh in MEMORY_FORMS:
            recompute = form.split("+")[0]
            flags = ["--recompute", recompute] + (["--sequence-parallel"] if sp else [])
            j, cmd = evaluate(meshtp, model, layout, devices, topology, extra, flags)
            paper = sbh * per_sbh(t, a * s / h) * worth / 2**30
            got = j["memory"]["activations_gib"]
            rows.append({"model": label, "form": form, "paper_gib": paper,
                         "activations_gib": got, "error": got / paper - 1,
                         "buffers_gib": j["memory"]["buffers_gib"],
                         "command": "meshtp " + cmd})
    return rows


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
    ap.add_argument("--max-memory-error", type=float, default=0.10)
    a = ap.parse_args()
    prepare(a.meshtp, a.out)
    rows = []
    for model, label, layout, devices, topology, extra, full_s, seqsel_s in RUNS:
        for (variant, flags), measured in zip(VARIANTS, (full_s, seqsel_s)):
            j, cmd = evaluate(a.meshtp, model, layout, devices, topology, extra, flags)
            rows.append({"model": label, "variant": variant, "measured_s": measured,
                         "predicted_s": j["t_step_s"], "low_s": j["t_step_s_low"],
                         "high_s": j["t_step_s_high"],
                         "inside": j["t_step_s_low"] <= measured <= j["t_step_s_high"],
                         "error": j["t_step_s"] / measured - 1, "parts": j["parts"],
                         "memory_gib": j["memory_gib"], "memory": j["memory"],
                         "fits": j["fits"], "command": "meshtp " + cmd})
    mean = sum(abs(r["error"]) for r in rows) / len(rows)
    worst = max(abs(r["error"]) for r in rows)
    inside = sum(1 for r in rows if r["inside"])
    memory = memory_rows(a.meshtp)
    memory_worst = max(abs(r["error"]) for r in memory)
    summary = {"source": "Korthikanti et al. 2023, Table 5", "mean_abs_error": mean,
               "max_abs_error": worst, "coverage": {"inside": inside, "runs": len(rows)},
               "runs": rows,
               "memory": {"source": "Korthikanti et al. 2023, Table 2 and §4.2.3",
                          "max_abs_error": memory_worst, "rows": memory}}
    write_atomic(os.path.join(a.out, "validation.json"), json.dumps(summary, indent=2) + "\n")
    md = ["| model | variant | measured | predicted | error | band | inside |",
          "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        md.append(f"| {r['model']} | {r['variant']} | {r['measured_s']:.2f} s | "
                  f"{r['predicted_s']:.2f} s | {100 * r['error']:+.1f}% | "
                  f"{r['low_s']:.2f}–{r['high_s']:.2f} s | {'yes' if r['inside'] else 'no'} |")
    md.append(f"\nMean |error| {100 * mean:.2f}%, max {100 * worst:.1f}% "
              "(Korthikanti et al. 2023 Table 5).\n")
    md.append(f"Coverage: {inside} of {len(rows)} measured runs inside their band (the step "
              "priced at the ends of the topology's sourced ranges, docs/validation.md).\n")
    md += ["| model | recompute | Korthikanti Table 2 | meshtp activations | error | "
           "meshtp buffers |", "| --- | --- | --- | --- | --- | --- |"]
    for r in memory:
        md.append(f"| {r['model']} | {r['form']} | {r['paper_gib']:.2f} GiB | "
                  f"{r['activations_gib']:.2f} GiB | {100 * r['error']:+.1f}% | "
                  f"{r['buffers_gib']:.2f} GiB |")
    md.append(f"\nActivations per GPU (`--runtime megatron`, pipeline rank 0) against "
              f"Korthikanti et al. 2023 Table 2 × §4.2.3's layers in flight: max |error| "
              f"{100 * memory_worst:.1f}%.\n")
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
    if a.check and memory_worst > a.max_memory_error:
        sys.exit(f"error: Table 2 activations: max |error| {100 * memory_worst:.1f}% (limit "
                 f"{100 * a.max_memory_error:.0f}%)")
    if a.check and (worst > a.max_error or mean > a.max_mean_error):
        sys.exit(f"error: Table 5: max |error| {100 * worst:.1f}% (limit "
                 f"{100 * a.max_error:.0f}%), mean {100 * mean:.2f}% (limit "
                 f"{100 * a.max_mean_error:.0f}%)")


if __name__ == "__main__":
    main()
