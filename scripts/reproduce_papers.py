#!/usr/bin/env python3
"""The papers' experiments on simulated clusters: `meshtp simulate` on each case, collected
into OUT/results.json, OUT/results.md and PNG plots (scripts/reproduce-papers.sh runs this;
docs/simulation.md discusses the results).

Cases (--full adds the slow ones; each list says which are in):
  atp        ATP §5 interconnects IC1–IC6 x models: every ATP/Megatron mesh and chunk count
             simulated (one layer, forward + backward), the simulated best against the
             planner's best, the planner's step-time error per candidate.
             default: M1, M2 on IC1–IC6;  --full: M1–M4
  fig12      ATP Fig. 12 trend: the best (d1, d2) on an NVLink-switch network of N devices
             (nvlink-network-N), with the smallest ATP model whose heads N divides (M1 to
             N = 16, M2 at 32, M3 at 64). default: N = 8, 16, 32;  --full: to 64
  meshslice  MeshSlice §5: GPT-3 175B's FC GeMMs (mlp1: tokens x 4h, contraction h) on the
             256-chip TPUv4 slice, each 2D algorithm on 32x8 and 16x16 with the planner's
             knob; MeshSlice's gain over the others.  --full only (256 simulated devices)
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import threading
import time

ATP_TOPOLOGIES = [("IC1", "pcie-8xa100", 8), ("IC2", "dual-nvlink-8xa100", 8),
                  ("IC3", "nvswitch-8xa100", 8), ("IC4", "ib-2x8xa100", 16),
                  ("IC5", "nvlink-hdr-4x4", 16), ("IC6", "torus-4x4", 16)]


def simulate(meshtp, args, log, lock):
    cmd = [meshtp, "simulate", "--json"] + args
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    with lock:
        log.write("$ " + " ".join(cmd) + f"\n# {wall:.1f} s, exit {p.returncode}\n")
        if p.returncode != 0:
            log.write(p.stderr + "\n")
        log.flush()
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"
    line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line), None


def summarize(case, j):
    """Per case: each run's simulated and predicted time, the bests, the errors."""
    runs = []
    for r in j["runs"]:
        runs.append({"layout": r["layout"], "sim_s": r["simulated"]["total_s"],
                     "sim_exposed_s": r["simulated"]["exposed_comm_s"], "wall_s": r["wall_s"]})
        set_prediction(runs[-1], r["predicted"])
    out = dict(case)
    out["runs"] = runs
    out["wall_s"] = j.get("wall_s")
    return rank(out)


def set_prediction(run, predicted):
    run["plan_s"] = predicted.get("total_s") if predicted["available"] else None
    run["plan_exposed_s"] = predicted.get("exposed_comm_s")
    run["error"] = ((run["plan_s"] - run["sim_s"]) / run["sim_s"]
                    if run["plan_s"] is not None and run["sim_s"] > 0 else None)


def rank(out):
    """The simulated best, the planner's best, and the errors of one case's runs."""
    runs = out["runs"]
    priced = [r for r in runs if r["plan_s"] is not None]
    best = min(runs, key=lambda r: r["sim_s"])
    out["simulated_best"] = best["layout"]
    out["planner_best"] = min(priced, key=lambda r: r["plan_s"])["layout"] if priced else None
    out["agree"] = out["simulated_best"] == out["planner_best"]
    out["planner_best_slowdown"] = (next(r["sim_s"] for r in runs
                                         if r["layout"] == out["planner_best"]) / best["sim_s"] - 1
                                    if priced else None)
    errs = [abs(r["error"]) for r in runs if r["error"] is not None]
    out["error_median"] = statistics.median(errs) if errs else None
    out["error_worst"] = max(errs) if errs else None
    return out


def atp_cases(full):
    models = ["atp-m1", "atp-m2", "atp-m3", "atp-m4"] if full else ["atp-m1", "atp-m2"]
    out = []
    for m in models:
        for ic, topo, n in ATP_TOPOLOGIES:
            case = {"suite": "atp", "interconnect": ic, "topology": topo, "model": m, "devices": n}
            out.append((case, ["--topology", topo, "--model", m, "--devices", str(n),
                               "--what", "layer", "--strategies", "atp,megatron", "--top", "100"]))
    return out


# Heads per ATP model (Table 2). The runtime's attention core holds a/(d1·d2) whole heads, so
# N devices need a model with a multiple of N heads; Fig. 12's comparison is in units of
# Δ = 2·L·b·s·h/GroupBW, so which model runs at each N does not change the best mesh.
ATP_HEADS = [("atp-m1", 16), ("atp-m2", 32), ("atp-m3", 64), ("atp-m4", 96)]


def fig12_cases(full):
    sizes = [8, 16, 32, 64] if full else [8, 16, 32]  # 128: no ATP model has 128 heads
    out = []
    for n in sizes:
        topo = f"nvlink-network-{n}"
        model = next(m for m, heads in ATP_HEADS if heads % n == 0)
        case = {"suite": "fig12", "topology": topo, "model": model, "devices": n}
        out.append((case, ["--topology", topo, "--model", model, "--devices", str(n),
                           "--what", "layer", "--strategies", "atp,megatron", "--top", "100"]))
    return out


def meshslice_cases(full):
    if not full:
        return []
    out = []
    algos = ["meshslice", "collective", "wang", "summa", "cannon"]
    for mesh in ["32x8", "16x16"]:
        for algo in algos:
            case = {"suite": "meshslice", "topology": "tpuv4-torus-16x16", "model": "gpt3-175b",
                    "devices": 256, "mesh": mesh, "algorithm": algo}
            out.append((case, ["--topology", "tpuv4-torus-16x16", "--model", "gpt3-175b",
                               "--devices", "256", "--what", "gemm2d", "--mesh", mesh,
                               "--strategy", algo]))
    return out


def run_cases(meshtp, cases, jobs, log, on_result):
    """Simulate each case (`jobs` at a time: simulated time does not depend on the machine's
    load, so cases may share the cores); on_result(results so far) after each one."""
    results = [None] * len(cases)
    lock = threading.Lock()

    def one(i):
        case, args = cases[i]
        name = " ".join(str(case[k]) for k in ("interconnect", "topology", "model", "mesh",
                                                "algorithm") if k in case)
        print(f"{case['suite']}: {name} ...", flush=True)
        j, err = simulate(meshtp, args, log, lock)
        with lock:
            results[i] = summarize(case, j) if j else dict(case, failed=err)
            on_result([r for r in results if r is not None])

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for f in [pool.submit(one, i) for i in range(len(cases))]:
            f.result()
    return results


def fmt_ms(s):
    return "-" if s is None else f"{s * 1e3:.2f}"


def fmt_pct(x):
    return "-" if x is None else f"{100 * x:+.1f}%"


def write_markdown(path, results, wall):
    lines = ["# meshtp: the papers' cases on simulated clusters", "",
             f"Generated by `scripts/reproduce-papers.sh` in {wall:.0f} s. Times are simulated "
             "(SimGrid SMPI, compute charged at the topology's rates); `plan` is the planner's "
             "prediction for the same layout; error = (plan − sim) / sim.", ""]
    priced = [r for r in results if "failed" not in r and r.get("planner_best")]
    ranked = [r for r in priced if len(r["runs"]) > 1]
    errs = [abs(x["error"]) for r in priced for x in r["runs"] if x["error"] is not None]
    if ranked:
        agree = sum(r["agree"] for r in ranked)
        near = sum(r["planner_best_slowdown"] <= 0.02 for r in ranked)
        lines += [f"**Summary.** The planner's best is the simulated best in {agree} of "
                  f"{len(ranked)} ranked cases ({100 * agree / len(ranked):.0f}%); its pick is "
                  f"within 2% of the simulated best in {near} ({100 * near / len(ranked):.0f}%).",
                  ""]
    if errs:
        lines += [f"Step-time error over all {len(errs)} simulated layouts: median "
                  f"{100 * statistics.median(errs):.1f}%, worst {100 * max(errs):.1f}%.", ""]
    for suite in ["atp", "fig12", "meshslice"]:
        rows = [r for r in results if r["suite"] == suite]
        if not rows:
            continue
        lines += [f"## {suite}", "",
                  "| case | simulated best | planner's best | agree | planner's pick vs best "
                  "| error median | error worst | wall s |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in rows:
            name = " ".join(str(r[k]) for k in ("interconnect", "topology", "model", "mesh",
                                                 "algorithm") if k in r)
            if "failed" in r:
                lines.append(f"| {name} | failed: {r['failed']} | | | | | | |")
                continue
            lines.append(f"| {name} | {r['simulated_best']} | {r['planner_best']} | "
                         f"{'yes' if r['agree'] else 'no'} | {fmt_pct(r['planner_best_slowdown'])} "
                         f"| {fmt_pct(r['error_median'])} | {fmt_pct(r['error_worst'])} | "
                         f"{r['wall_s']:.1f} |")
        lines.append("")
        lines += [f"### {suite}: every layout", "",
                  "| case | layout | sim ms | plan ms | error | sim exposed ms | plan exposed ms |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in rows:
            if "failed" in r:
                continue
            name = " ".join(str(r[k]) for k in ("interconnect", "model", "mesh") if k in r) or \
                r["topology"]
            for x in r["runs"]:
                lines.append(f"| {name} | {x['layout']} | {fmt_ms(x['sim_s'])} | "
                             f"{fmt_ms(x['plan_s'])} | {fmt_pct(x['error'])} | "
                             f"{fmt_ms(x['sim_exposed_s'])} | {fmt_ms(x['plan_exposed_s'])} |")
        lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def plot(out_dir, results):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("python3-matplotlib missing: no plots (scripts/install.sh installs it)")
        return []
    made = []
    pts = [(x["plan_s"], x["sim_s"], r["suite"]) for r in results if "failed" not in r
           for x in r["runs"] if x["plan_s"] is not None]
    if pts:
        fig, ax = plt.subplots(figsize=(5, 5))
        for suite, color in (("atp", "tab:blue"), ("fig12", "tab:orange"),
                             ("meshslice", "tab:green")):
            xs = [p[0] * 1e3 for p in pts if p[2] == suite]
            ys = [p[1] * 1e3 for p in pts if p[2] == suite]
            if xs:
                ax.scatter(xs, ys, s=12, label=suite, color=color)
        lo = min(min(p[0], p[1]) for p in pts) * 1e3
        hi = max(max(p[0], p[1]) for p in pts) * 1e3
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("planner's prediction (ms)")
        ax.set_ylabel("simulated (ms)")
        ax.set_title("per-layout time: planner vs simulation")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "planner_vs_simulated.png"), dpi=120)
        made.append("planner_vs_simulated.png")
    atp = [r for r in results if r["suite"] == "atp" and "failed" not in r]
    if atp:
        fig, ax = plt.subplots(figsize=(8, 4))
        labels = [f"{r['interconnect']}\n{r['model'].replace('atp-', '')}" for r in atp]
        best = [min(x["sim_s"] for x in r["runs"]) * 1e3 for r in atp]
        picked = [next(x["sim_s"] for x in r["runs"] if x["layout"] == r["planner_best"]) * 1e3
                  for r in atp]
        xs = range(len(atp))
        ax.bar([x - 0.2 for x in xs], best, 0.4, label="simulated best")
        ax.bar([x + 0.2 for x in xs], picked, 0.4, label="planner's pick (simulated)")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_ylabel("one layer fwd+bwd (ms, simulated)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "atp_best_vs_pick.png"), dpi=120)
        made.append("atp_best_vs_pick.png")
    return made


def write_results(out_dir, full, results, wall):
    tmp = os.path.join(out_dir, "results.json.tmp")
    with open(tmp, "w") as f:
        json.dump({"full": full, "wall_s": wall, "cases": results}, f, indent=1)
    os.replace(tmp, os.path.join(out_dir, "results.json"))
    tmp = os.path.join(out_dir, "results.md.tmp")
    write_markdown(tmp, results, wall)
    os.replace(tmp, os.path.join(out_dir, "results.md"))


def reprice(meshtp, out_dir):
    """Price the recorded simulations of OUT/results.json again with this build's planner
    (`meshtp simulate --predict-only`): simulated time does not depend on the planner."""
    with open(os.path.join(out_dir, "results.json")) as f:
        recorded = json.load(f)
    args_of = {json.dumps(c, sort_keys=True): a
               for c, a in atp_cases(True) + fig12_cases(True) + meshslice_cases(True)}
    keys = ("suite", "interconnect", "topology", "model", "devices", "mesh", "algorithm")
    for r in recorded["cases"]:
        if "failed" in r:
            continue
        case = {k: r[k] for k in keys if k in r}
        args = args_of[json.dumps(case, sort_keys=True)]
        p = subprocess.run([meshtp, "simulate", "--json", "--predict-only"] + args,
                           capture_output=True, text=True, check=True)
        predicted = {x["layout"]: x["predicted"] for x in json.loads(p.stdout)["runs"]}
        for x in r["runs"]:
            set_prediction(x, predicted[x["layout"]])
        rank(r)
    write_results(out_dir, recorded["full"], recorded["cases"], recorded["wall_s"])
    plots = plot(out_dir, recorded["cases"])
    print(f"re-priced {out_dir}/results.md, results.json" + "".join(f", {p}" for p in plots))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--meshtp", default="build/src/cli/meshtp")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--suites", default="atp,fig12,meshslice")
    ap.add_argument("--jobs", type=int, default=1,
                    help="cases simulated at once (each is one smpirun process)")
    ap.add_argument("--reprice", action="store_true",
                    help="simulate nothing: price OUT/results.json's runs again with this planner")
    a = ap.parse_args()
    if a.reprice:
        reprice(a.meshtp, a.out)
        return
    if a.jobs < 1:
        sys.exit(f"error: --jobs={a.jobs} must be at least 1")
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    suites = a.suites.split(",")
    for name in suites:
        if name not in ("atp", "fig12", "meshslice"):
            sys.exit(f"error: --suites: unknown suite '{name}' (atp, fig12, meshslice)")
    cases = []
    if "atp" in suites:
        cases += atp_cases(a.full)
    if "fig12" in suites:
        cases += fig12_cases(a.full)
    if "meshslice" in suites:
        cases += meshslice_cases(a.full)
    # The first model on every interconnect and the Fig. 12 trend first, the larger cases after.
    cases.sort(key=lambda c: 0 if c[0].get("model") == "atp-m1" else 1)
    with open(os.path.join(a.out, "simulate.log"), "w") as log:
        # Results so far are rewritten after every case: a long run can be read while it runs.
        results = run_cases(a.meshtp, cases, a.jobs, log,
                            lambda done: write_results(a.out, a.full, done, time.time() - t0))
    wall = time.time() - t0
    write_results(a.out, a.full, results, wall)
    plots = plot(a.out, results)
    print(f"wrote {a.out}/results.md, results.json" +
          "".join(f", {p}" for p in plots) + f" ({wall:.0f} s)")
    failed = [r for r in results if "failed" in r]
    if failed:
        print(f"{len(failed)} case(s) failed: see {a.out}/simulate.log", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
