"""results.md and the PNG plots of scripts/reproduce_papers.py, from its results list (the
cases of OUT/results.json). Everything here is derived from the recorded runs: a --reprice or
a merged run rewrites it.

Derived views:
  ranked cases  a case with several layouts (atp, fig12) ranks them itself; the single-layout
                MeshSlice cases are ranked in groups: per (model, gemm2d|layer) every
                algorithm x mesh, per model the K sweep's slice counts (MeshSlice Fig. 13/14:
                does the cost model pick the simulated best?)
  gains         per (model, what) each algorithm at its best mesh, MeshSlice's speed-up over
                it: t_algo / t_meshslice - 1 (MeshSlice §5.1's "faster by")
  overlap       exposed communication as a share of the un-overlapped one: chunked ATP against
                chunks=1 on the same mesh, MeshSlice against Collective (all-gather, then
                GeMM: MeshSlice Fig. 10's baseline) on the same mesh and its K sweep against
                K=1; with comm/compute of the un-overlapped run beside it
"""
import math
import os
import re
import statistics

import plotting  # beside this file (scripts/)


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


def case_name(c, keys=("interconnect", "topology", "model", "what", "mesh", "algorithm")):
    name = " ".join(str(c[k]) for k in keys if k in c)
    return name + (f" K={c['slices']}" if "slices" in c else "")


def ok(results, suite):
    return [r for r in results if r["suite"] == suite and "failed" not in r]


def groups(results):
    """The MeshSlice suites' single-layout cases as ranked groups (see the module comment)."""
    out = []
    keyed = {}
    for r in ok(results, "meshslice"):
        keyed.setdefault((r["model"], r.get("what", "gemm2d")), []).append(r)
    for r in ok(results, "ksweep"):
        keyed.setdefault((r["model"], "K sweep 32x8"), []).append(r)
    for (model, what), rows in keyed.items():
        runs = [x for r in rows for x in r["runs"]]
        if len(runs) > 1:
            out.append(rank({"suite": rows[0]["suite"], "group": f"{model} {what}",
                             "model": model, "what": what, "runs": runs,
                             "sim_launch": all(r.get("sim_launch") for r in rows)}))
    return out


def ranked(results):
    direct = sorted((r for r in results if r["suite"] in ("atp", "fig12") and "failed" not in r
                     and r.get("planner_best") and len(r["runs"]) > 1),
                    key=lambda r: (r["suite"], r.get("interconnect", ""), r["model"],
                                   r["devices"]))
    return direct + [g for g in groups(results) if g.get("planner_best")]


def gains(results):
    """Per (model, what): each algorithm's best run, MeshSlice's speed-up over it."""
    rows = []
    by = {}
    for r in ok(results, "meshslice"):
        for x in r["runs"]:
            by.setdefault((r["model"], r.get("what", "gemm2d")), {}).setdefault(
                r["algorithm"], []).append(x)
    for (model, what), algos in by.items():
        best = {a: min(xs, key=lambda x: x["sim_s"]) for a, xs in algos.items()}
        ms = best.get("meshslice")
        for a, x in best.items():
            rows.append({"model": model, "what": what, "algorithm": a, "layout": x["layout"],
                         "sim_s": x["sim_s"], "plan_s": x["plan_s"],
                         "gain": x["sim_s"] / ms["sim_s"] - 1 if ms else None,
                         "plan_gain": (x["plan_s"] / ms["plan_s"] - 1
                                       if ms and ms["plan_s"] and x["plan_s"] else None)})
    return rows


def mesh_of(layout):
    m = re.search(r"(\d+)x(\d+)", layout)
    return (int(m.group(1)), int(m.group(2))) if m else None


def chunks_of(layout):
    m = re.search(r"chunks=(\d+)", layout)
    return int(m.group(1)) if m else None


def overlap(results):
    """Exposed communication of an overlapping layout / that of its un-overlapped twin."""
    rows = []
    for r in ok(results, "atp") + ok(results, "fig12"):
        base = {}
        for x in r["runs"]:
            if chunks_of(x["layout"]) == 1:
                base[(x["layout"].split()[0], mesh_of(x["layout"]))] = x
        most = {}  # per (strategy, mesh): the chunked layout that exposes the least
        for x in r["runs"]:
            key = (x["layout"].split()[0], mesh_of(x["layout"]))
            if chunks_of(x["layout"]) > 1 and (key not in most or
                                               x["sim_exposed_s"] < most[key]["sim_exposed_s"]):
                most[key] = x
        for key, x in most.items():
            if key in base and base[key]["sim_exposed_s"] > 0:
                rows.append(overlap_row(f"{r.get('interconnect', r['topology'])} {r['model']}",
                                        x, base[key]))
    for r in ok(results, "meshslice"):
        if r["algorithm"] != "meshslice":
            continue
        twin = [c for c in ok(results, "meshslice") if c["algorithm"] == "collective"
                and c["model"] == r["model"] and c.get("what") == r.get("what")
                and c["mesh"] == r["mesh"]]
        if twin and twin[0]["runs"][0]["sim_exposed_s"] > 0:
            rows.append(overlap_row(f"{r['model']} {r.get('what', 'gemm2d')}", r["runs"][0],
                                    twin[0]["runs"][0]))
    ks = ok(results, "ksweep")
    for r in ks:
        one = [c for c in ks if c["model"] == r["model"] and c.get("slices") == 1]
        if r.get("slices", 1) > 1 and one and one[0]["runs"][0]["sim_exposed_s"] > 0:
            rows.append(overlap_row(f"{r['model']} gemm2d K={r['slices']}", r["runs"][0],
                                    one[0]["runs"][0]))
    return rows


OVERLAP_ROWS = 20


def overlap_row(case, x, base):
    compute = base["sim_s"] - base["sim_exposed_s"]
    return {"case": case, "layout": x["layout"], "baseline": base["layout"],
            "exposed_s": x["sim_exposed_s"], "unoverlapped_s": base["sim_exposed_s"],
            "share": x["sim_exposed_s"] / base["sim_exposed_s"],
            "comm_over_compute": base["sim_exposed_s"] / compute if compute > 0 else None}


def fmt_ms(s):
    return "-" if s is None else f"{s * 1e3:.2f}"


def fmt_pct(x):
    return "-" if x is None else f"{100 * x:+.1f}%"


def fmt_abs(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def error_stats(results, suites):
    errs = [abs(x["error"]) for r in results if r["suite"] in suites and "failed" not in r
            for x in r["runs"] if x["error"] is not None]
    return (len(errs), statistics.median(errs), max(errs)) if errs else (0, None, None)


def summary(results):
    """The headline numbers (also in results.json: docs/simulation.md quotes them)."""
    rk = ranked(results)
    out = {"ranked_cases": len(rk), "agree": sum(r["agree"] for r in rk),
           "within_2pct": sum(r["planner_best_slowdown"] <= 0.02 for r in rk)}
    for name, suites in (("all", ("atp", "fig12", "meshslice", "ksweep")),
                         ("atp", ("atp",)), ("fig12", ("fig12",)),
                         ("meshslice", ("meshslice", "ksweep"))):
        n, med, worst = error_stats(results, suites)
        out[f"errors_{name}"] = {"layouts": n, "median": med, "worst": worst}
    return out


def table(lines, header, rows):
    lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    lines.append("")


def sections(results):
    """results.md's sections: [(name, title, lines)]; docs/simulation.md embeds some by name."""
    out = []
    s = summary(results)
    lines = []
    if s["ranked_cases"]:
        n = s["ranked_cases"]
        lines += [f"The planner's best is the simulated best in **{s['agree']} of {n}** ranked "
                  f"cases ({100 * s['agree'] / n:.0f}%); its pick simulates within 2% of the "
                  f"simulated best in {s['within_2pct']} ({100 * s['within_2pct'] / n:.0f}%).", ""]
    rows = [(k[7:], e["layouts"], fmt_abs(e["median"]), fmt_abs(e["worst"]))
            for k, e in s.items() if k.startswith("errors_") and e["layouts"]]
    table(lines, ["suites", "layouts", "abs error median", "abs error worst"], rows)
    out.append(("summary", "Summary", lines))
    lines = []
    rk = ranked(results)
    table(lines, ["case", "simulated best", "planner's best", "agree", "planner's pick vs best",
                  "abs error median", "abs error worst"],
          [((r.get("group") or case_name(r)) + ("" if r.get("sim_launch") else " †"),
            r["simulated_best"], r["planner_best"],
            "yes" if r["agree"] else "no", fmt_pct(r["planner_best_slowdown"]),
            fmt_abs(r["error_median"]), fmt_abs(r["error_worst"])) for r in rk])
    old = sum(not r.get("sim_launch") for r in rk)
    if old:
        lines += [f"† ({old} of {len(rk)}): simulated before the simulator charged T_launch per "
                  "collective call (the planner charges it: these simulated times lack it, so "
                  "the planner's error there is high by up to T_launch × the calls).", ""]
    out.append(("ranked", "Ranked cases", lines))
    failed = [r for r in results if "failed" in r]
    if failed:
        lines = []
        table(lines, ["case", "error"], [(case_name(r), r["failed"]) for r in failed])
        out.append(("failed", "Failed cases", lines))
    g = gains(results)
    if g:
        lines = ["gain = t_algorithm / t_MeshSlice − 1 (simulated; `plan gain` the planner's).",
                 ""]
        table(lines, ["model", "what", "algorithm", "best layout", "sim ms", "plan ms",
                      "MeshSlice gain", "plan gain"],
              [(x["model"], x["what"], x["algorithm"], x["layout"], fmt_ms(x["sim_s"]),
                fmt_ms(x["plan_s"]), fmt_pct(x["gain"]), fmt_pct(x["plan_gain"])) for x in g])
        out.append(("gains", "MeshSlice: each algorithm at its best mesh (256 TPUv4 chips)",
                    lines))
    ov = overlap(results)
    if ov:
        lines = ["un-overlapped = the exposed communication of the same mesh's non-overlapping "
                 "layout (ATP chunks=1; Collective for MeshSlice; K=1 in the K sweep); "
                 "comm/compute is that layout's. ATP: per mesh its best chunk count, the "
                 f"{OVERLAP_ROWS} closest to comm/compute = 1.", ""]
        # ATP: the OVERLAP_ROWS layouts closest to comm = compute; MeshSlice: every one.
        ov.sort(key=lambda o: abs(math.log(o["comm_over_compute"]))
                if o["comm_over_compute"] else 1e9)
        atp = [o for o in ov if o["layout"].startswith(("atp", "megatron"))]
        ov = atp[:OVERLAP_ROWS] + [o for o in ov if o not in atp]
        table(lines, ["case", "layout", "against", "exposed ms", "un-overlapped ms", "share",
                      "comm/compute"],
              [(o["case"], o["layout"], o["baseline"], fmt_ms(o["exposed_s"]),
                fmt_ms(o["unoverlapped_s"]), f"{100 * o['share']:.0f}%",
                "-" if o["comm_over_compute"] is None else f"{o['comm_over_compute']:.2f}")
               for o in ov])
        out.append(("overlap", "Overlap: exposed communication / un-overlapped communication",
                    lines))
    lines = []
    table(lines, ["case", "layout", "sim ms", "plan ms", "error", "sim exposed ms",
                  "plan exposed ms", "wall s"],
          [(case_name(r, ("interconnect", "topology", "model", "what")) +
            ("" if r.get("sim_launch") else " †"), x["layout"],
            fmt_ms(x["sim_s"]), fmt_ms(x["plan_s"]), fmt_pct(x["error"]),
            fmt_ms(x["sim_exposed_s"]), fmt_ms(x["plan_exposed_s"]), f"{x['wall_s']:.1f}")
           for r in results if "failed" not in r for x in r["runs"]])
    out.append(("layouts", "Every layout", lines))
    return out


def write_markdown(path, results, wall):
    lines = ["# meshtp: the papers' cases on simulated clusters", "",
             f"Generated by `scripts/reproduce-papers.sh` ({wall:.0f} s of simulation). Times "
             "are simulated (SimGrid SMPI, compute charged at the topology's rates); `plan` is "
             "the planner's prediction for the same layout; error = (plan − sim) / sim.", ""]
    for _, title, body in sections(results):
        lines += [f"## {title}", ""] + body
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def update_doc(path, results):
    """Rewrites the blocks `<!-- results:NAME -->` … `<!-- /results:NAME -->` of the doc at
    `path` with results.md's section NAME (docs/simulation.md quotes the recorded run's tables
    this way, so a --reprice of docs/results refreshes them). False if the doc has none."""
    with open(path) as f:
        text = f.read()
    changed = False
    for name, _, body in sections(results):
        begin, end = f"<!-- results:{name} -->", f"<!-- /results:{name} -->"
        i, j = text.find(begin), text.find(end)
        if i < 0 or j < i:
            continue
        text = text[:i + len(begin)] + "\n" + "\n".join(body) + text[j:]
        changed = True
    if changed:
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    return changed


def plot(out_dir, results):
    try:
        plt = plotting.pyplot()
    except ImportError as e:
        print(f"no plots: {e}")
        return []
    made = []

    def save(fig, name):
        plotting.save(fig, os.path.join(out_dir, name), dpi=80)
        made.append(name)

    colors = {"atp": "tab:blue", "fig12": "tab:orange", "meshslice": "tab:green",
              "ksweep": "tab:red"}
    pts = [(x["plan_s"], x["sim_s"], r["suite"]) for r in results if "failed" not in r
           for x in r["runs"] if x["plan_s"] is not None]
    if pts:
        fig, ax = plt.subplots(figsize=(5, 5))
        for suite, color in colors.items():
            xs = [p[0] * 1e3 for p in pts if p[2] == suite]
            ys = [p[1] * 1e3 for p in pts if p[2] == suite]
            if xs:
                ax.scatter(xs, ys, s=10, label=suite, color=color)
        lo = min(min(p[0], p[1]) for p in pts) * 1e3
        hi = max(max(p[0], p[1]) for p in pts) * 1e3
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("planner's prediction (ms)")
        ax.set_ylabel("simulated (ms)")
        ax.set_title("per-layout time: planner vs simulation")
        ax.legend()
        save(fig, "planner_vs_simulated.png")
    atp = ok(results, "atp")
    if atp:
        fig, ax = plt.subplots(figsize=(10, 4))
        labels = [f"{r['interconnect']}\n{r['model'].replace('atp-', '')}" for r in atp]
        best = [min(x["sim_s"] for x in r["runs"]) * 1e3 for r in atp]
        picked = [next(x["sim_s"] for x in r["runs"] if x["layout"] == r["planner_best"]) * 1e3
                  for r in atp]
        plotting.side_by_side(ax, labels, [("simulated best", best),
                                           ("planner's pick (simulated)", picked)],
                              log=True, rotation=0)
        ax.set_ylabel("one layer fwd+bwd (ms, simulated)")
        ax.legend()
        save(fig, "atp_best_vs_pick.png")
    f12 = sorted(ok(results, "fig12"), key=lambda r: r["devices"])
    if f12:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        n = [r["devices"] for r in f12]
        ax.plot(n, [mesh_of(r["simulated_best"])[1] for r in f12], "o-", label="simulated best")
        ax.plot(n, [mesh_of(r["planner_best"])[1] for r in f12], "x--", label="planner's best")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("devices N (nvlink-network-N)")
        ax.set_ylabel("d2 of the best mesh (N/d2, d2)")
        ax.legend()
        save(fig, "fig12_best_d2.png")
    g = [x for x in gains(results) if x["gain"] is not None]
    if g:
        keys = sorted({(x["model"], x["what"]) for x in g})
        algos = [a for a in ("collective", "wang", "summa", "cannon")
                 if any(x["algorithm"] == a for x in g)]
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for i, a in enumerate(algos):
            vals = [next((100 * x["gain"] for x in g if (x["model"], x["what"]) == k
                          and x["algorithm"] == a), 0) for k in keys]
            ax.bar([j + 0.2 * i for j in range(len(keys))], vals, 0.2, label=a)
        ax.set_xticks([j + 0.3 for j in range(len(keys))])
        ax.set_xticklabels([f"{m}\n{w}" for m, w in keys], fontsize=7)
        ax.set_ylabel("MeshSlice's gain over (%)")
        ax.legend(fontsize=7)
        save(fig, "meshslice_gains.png")
    ks = ok(results, "ksweep")
    if ks:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for model in sorted({r["model"] for r in ks}):
            rows = sorted((r for r in ks if r["model"] == model), key=lambda r: r["slices"])
            k = [r["slices"] for r in rows]
            ax.plot(k, [r["runs"][0]["sim_s"] * 1e3 for r in rows], "o-", label=f"{model} sim")
            ax.plot(k, [(r["runs"][0]["plan_s"] or math.nan) * 1e3 for r in rows], "x--",
                    label=f"{model} plan")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("slices K (MeshSlice, 32x8)")
        ax.set_ylabel("mlp1 GeMM (ms)")
        ax.legend(fontsize=7)
        save(fig, "ksweep_32x8.png")
    return made
