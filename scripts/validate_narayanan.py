#!/usr/bin/env python3
"""A fit on one published run, checked on other runs of the same cluster: Narayanan et al. 2021
("Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC21),
Table 1, the weak-scaling runs of Megatron-LM on Selene (DGX A100 nodes, 8 GPUs each).

The fit set is one row (FIT_ROW, 39.1B on 512 GPUs): a Megatron-LM log of it is synthesised
from the row (its arguments, and the iteration time the row's TFLOP/s per GPU implies; the
log says so in its header) and `meshtp calibrate --from-step-log LOG --base dgx-a100-64x8`
fits one constant of the preset's sourced ranges to it. The check set is every other row:
each is priced with `meshtp plan --3d --evaluate --runtime megatron` on the preset of its node
count, with the preset's constants (base) and with the fitted constant put in (fitted). The
fit set and the check set never share a row, and Korthikanti et al. 2023 Table 5 (the check
set of scripts/validate.py) is not used here at all.

The measured step of a row: Table 1's model FLOPs per iteration, Eq. 3 of the paper,
F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) (which counts full activation recomputation's
extra forward), over the GPUs times the achieved TFLOP/s per GPU. Table 1 gives t, p, the
GPUs and the batch B; not the microbatch size or the schedule. Taken here: microbatches of
one sequence (m = B/d), the non-interleaved 1F1B schedule, full recomputation (Eq. 3),
fp16, no sequence parallelism and no distributed optimizer (neither existed in that version).

Writes OUT/narayanan.json, OUT/narayanan.md and the synthesised log OUT/narayanan-fit.log;
prints the table. `--write-fit-log PATH` writes only the log (the copy in
tests/plan/data/step-logs is made so). A comparison: no pass criterion; if the fit makes the
check set worse, the table says so.
"""
import argparse
import json
import os
import subprocess
import sys

import validate_cli

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SOURCE = "Narayanan et al. 2021, Table 1"
SEQ, VOCAB = 2048, 51200  # Table 1's caption: every model, vocabulary 51,200, sequence 2048
# Table 1's rows: (billions of parameters as printed, heads, hidden, layers, t, p, GPUs,
# batch, achieved TFLOP/s per GPU).
ROWS = [
    ("1.7", 24, 2304, 24, 1, 1, 32, 512, 137),
    ("3.6", 32, 3072, 30, 2, 1, 64, 512, 138),
    ("7.5", 32, 4096, 36, 4, 1, 128, 512, 142),
    ("18.4", 48, 6144, 40, 8, 1, 256, 1024, 135),
    ("39.1", 64, 8192, 48, 8, 2, 512, 1536, 138),
    ("76.1", 80, 10240, 60, 8, 4, 1024, 1792, 140),
    ("145.6", 96, 12288, 80, 8, 8, 1536, 2304, 148),
    ("310.1", 128, 16384, 96, 8, 16, 1920, 2160, 155),
    ("529.6", 128, 20480, 105, 8, 35, 2520, 2520, 163),
    ("1008.0", 160, 25600, 128, 8, 64, 3072, 3072, 163),
]
FIT_ROW = "39.1"  # the fit set: one row, pipelined and data-parallel, mid-scale


def eq3_flops(batch, layers, hidden):
    """Narayanan et al. 2021 Eq. 3: model FLOPs of one iteration with full recomputation."""
    return 96 * batch * SEQ * layers * hidden ** 2 * (
        1 + SEQ / (6 * hidden) + VOCAB / (16 * layers * hidden))


def measured_step(row):
    _, _, h, l, _, _, gpus, batch, tflops = row
    return eq3_flops(batch, l, h) / (gpus * tflops * 1e12)


def layout(row):
    _, _, _, _, t, p, gpus, batch, _ = row
    dp = gpus // (t * p)
    return dp, batch // dp  # microbatches of one sequence


def fit_log(row):
    """A Megatron-LM log of `row`, synthesised (megatron/training/arguments.py's block and
    training.py's "elapsed time per iteration (ms)" lines)."""
    name, a, h, l, t, p, gpus, batch, tflops = row
    dp, _ = layout(row)
    ms = measured_step(row) * 1e3
    args = {
        "bf16": "False", "fp16": "True", "global_batch_size": batch, "hidden_size": h,
        "micro_batch_size": 1, "num_attention_heads": a, "num_layers": l,
        "num_layers_per_virtual_pipeline_stage": "None", "padded_vocab_size": VOCAB,
        "pipeline_model_parallel_size": p, "recompute_granularity": "full",
        "sequence_parallel": "False", "seq_length": SEQ, "tensor_model_parallel_size": t,
        "use_distributed_optimizer": "False", "world_size": gpus,
    }
    lines = [
        f"Synthesised Megatron-LM log, not a measured one: {SOURCE}, row {name}B ({gpus} A100s",
        f"on Selene, t {t}, p {p}, batch {batch}, {tflops} TFLOP/s per GPU). The iteration time is",
        f"the row's Eq. 3 FLOPs / ({gpus} GPUs x {tflops} TFLOP/s) = {ms:.1f} ms; the microbatch",
        "size (1), the schedule (1F1B) and full recomputation are this project's reading of the",
        "paper (Table 1 gives neither); written by scripts/validate_narayanan.py.",
        f"using world size: {gpus}, data-parallel size: {dp}, tensor-model-parallel size: {t}, "
        f"pipeline-model-parallel size: {p}",
        "------------------------ arguments ------------------------",
    ]
    for k in sorted(args):
        lines.append(f"  {k} {'.' * max(2, 48 - len(k))} {args[k]}")
    lines.append("-------------------- end of arguments ---------------------")
    for it in range(1, 5):
        lines.append(f" iteration {10 * it:8d}/     100 | consumed samples: {10 * it * batch:12d} | "
                     f"elapsed time per iteration (ms): {ms:.1f} | global batch size: {batch:5d} |")
    return "\n".join(lines) + "\n"


def topology_json(nodes):
    """dgx-a100-8x8 with `nodes` nodes: the same constants, the node level's count changed."""
    return validate_cli.preset_on_nodes(
        "dgx-a100-8x8", nodes, f"dgx-a100-{nodes}x8",
        f"{nodes * 8} A100-80GB as {nodes} DGX A100 nodes: dgx-a100-8x8's constants (its "
        f"description names their sources), the node count of a {SOURCE} row")


def set_pointer(doc, pointer, value):
    parts = pointer.strip("/").split("/")
    node = doc
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    old = node[int(last)] if isinstance(node, list) else node[last]
    value = int(round(value)) if isinstance(old, int) else value
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def evaluate(meshtp, row, topology_path, tmp):
    name, a, h, l, t, p, gpus, batch, _ = row
    model = {"name": f"narayanan-{name}b", "description": f"{SOURCE}, row {name}B",
             "layers": l, "hidden": h, "heads": a, "vocab": VOCAB, "batch": batch, "seq": SEQ,
             "precision": "fp16", "recompute": "full"}
    model_path = os.path.join(tmp, f"model-{name}.json")
    with open(model_path, "w") as f:
        json.dump(model, f)
    dp, m = layout(row)
    cmd = [meshtp, "plan", "--3d", "--evaluate", "--runtime", "megatron", "--topology",
           topology_path, "--model", model_path, "--devices", str(gpus), "--dp", str(dp),
           "--pp", str(p), "--mesh", f"{t}x1", "--microbatches", str(m), "--recompute", "full",
           "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed: {run.stderr.strip()}")
    out = json.loads(run.stdout)
    row_json = out[0] if isinstance(out, list) else out
    return row_json["t_step_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--meshtp", default=os.path.join(ROOT, "build", "src", "cli", "meshtp"))
    ap.add_argument("--write-fit-log", metavar="PATH")
    args = ap.parse_args()
    fit_row = next(r for r in ROWS if r[0] == FIT_ROW)
    if args.write_fit_log:
        with open(args.write_fit_log, "w") as f:
            f.write(fit_log(fit_row))
        return
    if not args.out:
        ap.error("OUT is required")
    if not os.access(args.meshtp, os.X_OK):
        sys.exit(f"error: no meshtp binary at '{args.meshtp}' (build first, or --meshtp PATH)")
    os.makedirs(args.out, exist_ok=True)
    tmp = os.path.join(args.out, "narayanan")
    os.makedirs(tmp, exist_ok=True)
    log_path = os.path.join(args.out, "narayanan-fit.log")
    with open(log_path, "w") as f:
        f.write(fit_log(fit_row))
    topologies = {}
    for row in ROWS:
        nodes = row[6] // 8
        path = os.path.join(tmp, f"dgx-a100-{nodes}x8.json")
        with open(path, "w") as f:
            json.dump(topology_json(nodes), f, indent=1)
        topologies[row[0]] = path
    fitted_path = os.path.join(tmp, "fitted.json")
    cmd = [args.meshtp, "calibrate", "--from-step-log", log_path, "--base",
           topologies[FIT_ROW], "--out", fitted_path, "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed: {run.stderr.strip()}")
    fit = json.loads(run.stdout)
    rows = []
    for row in ROWS:
        base_s = evaluate(args.meshtp, row, topologies[row[0]], tmp)
        t = topology_json(row[6] // 8)
        set_pointer(t, fit["constant"], fit["fitted"])
        if not fit["inside"]:
            t["ranges"] = [r for r in t["ranges"] if r["constant"] != fit["constant"]]
        path = os.path.join(tmp, f"fitted-{row[0]}.json")
        with open(path, "w") as f:
            json.dump(t, f, indent=1)
        fitted_s = evaluate(args.meshtp, row, path, tmp)
        measured = measured_step(row)
        dp, m = layout(row)
        rows.append({"row": f"{row[0]}B", "gpus": row[6], "t": row[4], "p": row[5], "d": dp,
                     "m": m, "batch": row[7], "tflops_per_gpu": row[8], "measured_s": measured,
                     "base_s": base_s, "fitted_s": fitted_s,
                     "base_error": base_s / measured - 1, "fitted_error": fitted_s / measured - 1,
                     "set": "fit" if row[0] == FIT_ROW else "check"})
    check = [r for r in rows if r["set"] == "check"]
    mean = lambda key: sum(abs(r[key]) for r in check) / len(check)
    worst = lambda key: max(abs(r[key]) for r in check)
    summary = {"fit_set": [f"{SOURCE}, row {FIT_ROW}B"],
               "check_set": [f"{SOURCE}, row {r['row']}" for r in check],
               "constant": fit["constant"], "given": fit["given"], "fitted": fit["fitted"],
               "source_low": fit["source_low"], "source_high": fit["source_high"],
               "inside": fit["inside"], "fit_residual": fit["residual"],
               "check_mean_abs_error_base": mean("base_error"),
               "check_mean_abs_error_fitted": mean("fitted_error"),
               "check_max_abs_error_base": worst("base_error"),
               "check_max_abs_error_fitted": worst("fitted_error"),
               "calibrate": " ".join(["meshtp"] + cmd[1:-1])}
    with open(os.path.join(args.out, "narayanan.json"), "w") as f:
        json.dump({"summary": summary, "rows": rows}, f, indent=1)
    md = [f"Fit set: {SOURCE}, row {FIT_ROW}B (synthesised Megatron-LM log). Check set: the "
          f"other {len(check)} rows. `{summary['calibrate']}` fitted {fit['constant']} = "
          f"{fit['fitted']:.4g} (given {fit['given']:.4g}; source range {fit['source_low']:.4g}"
          f" … {fit['source_high']:.4g}: {'inside' if fit['inside'] else 'OUTSIDE'}), "
          f"residual {100 * fit['residual']:+.2f}%.", "",
          "| row | set | GPUs | t | p | d | m | measured s | base s | error | fitted s | error |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        md.append(f"| {r['row']} | {r['set']} | {r['gpus']} | {r['t']} | {r['p']} | {r['d']} | "
                  f"{r['m']} | {r['measured_s']:.2f} | {r['base_s']:.2f} | "
                  f"{100 * r['base_error']:+.1f}% | {r['fitted_s']:.2f} | "
                  f"{100 * r['fitted_error']:+.1f}% |")
    md += ["", f"Check set, mean |error|: base {100 * summary['check_mean_abs_error_base']:.1f}%, "
           f"fitted {100 * summary['check_mean_abs_error_fitted']:.1f}%; max |error|: base "
           f"{100 * summary['check_max_abs_error_base']:.1f}%, fitted "
           f"{100 * summary['check_max_abs_error_fitted']:.1f}%."]
    for label, part in (("without a pipeline (p = 1)", [r for r in check if r["p"] == 1]),
                        ("pipelined (p > 1)", [r for r in check if r["p"] > 1])):
        md.append(f"Check rows {label}: mean |error| base "
                  f"{100 * sum(abs(r['base_error']) for r in part) / len(part):.1f}%, fitted "
                  f"{100 * sum(abs(r['fitted_error']) for r in part) / len(part):.1f}% "
                  f"({len(part)} rows).")
    text = "\n".join(md) + "\n"
    with open(os.path.join(args.out, "narayanan.md"), "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
