#!/usr/bin/env python3
"""bf16 mixed precision against fp32: run `meshtp train` twice on the same model, layout, data
and seed — once per precision — and compare the loss curves step by step.

  scripts/bf16_curve.py OUT [--model small] [--steps 200] [--ranks 2] [--mesh 2x1] [--check]

Writes OUT/fp32.jsonl and OUT/bf16.jsonl (train --metrics), the two logs, and
OUT/bf16-curve.md / .json (the relative difference of each step's loss, max and mean over
step ranges, and the validation losses) and OUT/bf16-curve.png (both curves and their
difference) when matplotlib is there. docs/precision.md quotes a run of it. --check exits 1
when a step's loss differs by more than TOLERANCE relative (the tests' bound, justified there).
"""
import argparse
import json
import os
import re
import subprocess
import sys

from validate import write_atomic  # beside this file (scripts/)

TOLERANCE = 2e-2  # tests/train/train_equivalence_test.cpp kBf16VsFp32


def train(args, precision):
    """Runs train; returns (per-step losses, validation loss)."""
    metrics = os.path.join(args.out, f"{precision}.jsonl")
    cmd = ["mpirun", "-np", str(args.ranks), args.meshtp, "train", "--model", args.model,
           "--mesh", args.mesh, "--steps", str(args.steps), "--precision", precision,
           "--eval-every", "0", "--metrics", metrics]
    print("$ " + " ".join(cmd), flush=True)
    run = subprocess.run(cmd, capture_output=True, text=True)
    write_atomic(os.path.join(args.out, f"{precision}.log"), run.stdout + run.stderr)
    if run.returncode != 0:
        sys.exit(f"error: train --precision {precision} failed (exit {run.returncode}):\n"
                 + (run.stdout + run.stderr)[-2000:])
    with open(metrics) as f:
        losses = [json.loads(line)["loss"] for line in f if line.strip()]
    val = re.search(r"validation loss ([0-9.]+)", run.stdout)
    return losses, float(val.group(1)) if val else None


def ranges(steps):
    """Step ranges (1-based, inclusive) to summarise: the first 10, then growing spans."""
    edges = [0, 10, 50, 100] + list(range(200, steps + 100, 100))
    edges = sorted({min(e, steps) for e in edges})
    return [(a + 1, b) for a, b in zip(edges, edges[1:]) if b > a]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--meshtp", default=os.environ.get("MESHTP", "build/src/cli/meshtp"))
    ap.add_argument("--model", default="small")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--mesh", default="2x1")
    ap.add_argument("--check", action="store_true",
                    help=f"exit 1 when a step's loss differs from fp32's by more than {TOLERANCE}")
    args = ap.parse_args()
    if args.steps < 1 or args.ranks < 1:
        sys.exit(f"error: --steps {args.steps} and --ranks {args.ranks} must be at least 1")
    os.makedirs(args.out, exist_ok=True)
    fp32, val32 = train(args, "fp32")
    bf16, val16 = train(args, "bf16")
    if len(fp32) != len(bf16) or not fp32:
        sys.exit(f"error: {len(fp32)} fp32 steps against {len(bf16)} bf16 steps")
    rel = [(b - a) / a for a, b in zip(fp32, bf16)]
    rows = []
    for first, last in ranges(len(rel)):
        part = rel[first - 1:last]
        rows.append({"steps": [first, last], "max_abs": max(abs(r) for r in part),
                     "mean_abs": sum(abs(r) for r in part) / len(part),
                     "mean_signed": sum(part) / len(part)})
    result = {"model": args.model, "mesh": args.mesh, "ranks": args.ranks, "steps": len(rel),
              "max_abs": max(abs(r) for r in rel), "tolerance": TOLERANCE, "ranges": rows, "validation_loss": {"fp32": val32, "bf16": val16},
              "loss": {"fp32": fp32, "bf16": bf16}}
    write_atomic(os.path.join(args.out, "bf16-curve.json"), json.dumps(result, indent=1) + "\n")
    lines = [f"# bf16 against fp32: `{args.model}`, {len(rel)} steps, {args.ranks} ranks, "
             f"mesh {args.mesh}", "",
             "| steps | max \\|bf16 − fp32\\| / fp32 | mean | mean signed (bf16 above) |",
             "| --- | --- | --- | --- |"]
    lines += [f"| {r['steps'][0]}–{r['steps'][1]} | {r['max_abs']:.1e} | {r['mean_abs']:.1e} | "
              f"{r['mean_signed']:+.1e} |" for r in rows]
    if val32 is not None and val16 is not None:
        lines += ["", f"Validation loss: fp32 {val32:.4f}, bf16 {val16:.4f} "
                      f"({(val16 - val32) / val32:+.2%})."]
    worst = max(abs(r) for r in rel)
    verdict = (f"{'met' if worst <= TOLERANCE else 'MISSED'}: the largest difference of a "
               f"step's loss is {worst:.1e}, the bound {TOLERANCE:.0e}")
    lines += ["", verdict]
    write_atomic(os.path.join(args.out, "bf16-curve.md"), "\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(args, fp32, bf16, rel)
    if args.check and worst > TOLERANCE:
        sys.exit(1)


def plot(args, fp32, bf16, rel):
    """OUT/bf16-curve.png: both loss curves, and their relative difference in percent."""
    try:
        from plotting import pyplot, save
        plt = pyplot()
    except ImportError as e:
        print(f"no plot: {e}", file=sys.stderr)
        return
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    steps = range(1, len(rel) + 1)
    top.plot(steps, fp32, label="fp32")
    top.plot(steps, bf16, label="bf16", alpha=0.8)
    top.set_ylabel("loss")
    top.legend()
    bottom.plot(steps, [100 * r for r in rel])
    bottom.set_ylabel("(bf16 − fp32) / fp32, %")
    bottom.set_xlabel("step")
    save(fig, os.path.join(args.out, "bf16-curve.png"))


if __name__ == "__main__":
    main()
