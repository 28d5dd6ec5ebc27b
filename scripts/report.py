#!/usr/bin/env python3
"""The page of `meshtp plan|simulate … --report DIR` (and of scripts/validate.py): one
self-contained HTML file with its plots embedded as PNG data: URIs, drawn by matplotlib from
the JSON the command prints with --json. Nothing is computed here that the planner or the
simulator did not compute: the plots and the table only arrange their numbers.

  report.py REPORT_JSON OUT_HTML   the page of REPORT_JSON (what `--report DIR` writes as
                                   DIR/report.json) at OUT_HTML
  report.py --check                exit 0 when matplotlib can be imported, else say what to
                                   install and exit 1 (meshtp asks before it starts work)

REPORT_JSON is {"report": KIND, "command": "meshtp …", "topology", "devices",
"device_memory_gib", "model", "result": …} where KIND is what "result" holds:
  plan       `meshtp plan --json`: {"candidates": […], "best"}
  plan-3d    `meshtp plan --3d --json`: {"layouts": […], "searched", "priced", "best"}
  evaluate   `meshtp plan --3d --evaluate --json`: one layout
  simulate   `meshtp simulate --json`: {"runs": [{"layout", "predicted", "simulated"?, …}]}
  validate   scripts/validate.py's validation.json: {"runs": [{"predicted_s", "measured_s"…}]}

The plots: each ranked layout's step time stacked by part (compute, exposed communication,
pipeline bubble, optimizer, …: the parts the planner prices, or the simulation measures);
memory per device stacked by kind against the device's capacity; and, where the layouts were
also simulated (or measured), predicted beside simulated. Each image is an <img class="plot">
with an id; tests/cli/report_page_test.py loads the page in headless Chromium and checks
that every one of them decodes.
"""
import base64
import html
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plotting  # noqa: E402  (beside this file)

# Step-time parts: (key, legend, color); the order they stack in, from the left.
STEP_PARTS = [
    ("compute", "compute", "tab:blue"),
    # The 2D table's compute split in two, which add up to the CLI's `compute s` column.
    ("gemm", "compute: GeMMs", "tab:blue"),
    ("elementwise", "compute: elementwise ops", "lightsteelblue"),
    ("tp_comm", "exposed tensor-parallel communication", "tab:orange"),
    ("p2p", "pipeline transfers (exposed)", "tab:red"),
    ("dp", "data-parallel communication (exposed)", "gold"),
    ("bubble", "pipeline bubble", "silver"),
    ("optimizer", "optimizer", "tab:green"),
]
MEMORY_PARTS = [
    ("params_gib", "parameters", "tab:blue"),
    ("grads_gib", "gradients", "tab:cyan"),
    ("optimizer_gib", "optimizer state", "tab:green"),
    ("activations_gib", "activations", "tab:orange"),
    ("buffers_gib", "communication buffers", "tab:purple"),
]
MAX_ROWS = 20  # bars per plot: a ranked list's head is what people compare


def row(label, parts, total_s, fits=True, note="", memory=None, memory_gib=None,
        predicted_s=None, reference_s=None, band=None):
    """One layout of the page: `parts` maps STEP_PARTS keys to seconds (they add up to
    `total_s`, the bar), `memory` MEMORY_PARTS keys to GiB (or only `memory_gib`, the total);
    `predicted_s` is the planner's time (default `total_s`) and `reference_s` the simulated
    or measured time it is set beside, if any; `band` its (low, high) over the topology's
    sourced ranges, if priced (docs/validation.md "Bands")."""
    if memory_gib is None and memory:
        memory_gib = sum(memory.values())
    return {"label": label, "parts": parts, "total_s": total_s, "fits": fits, "note": note,
            "memory": memory, "memory_gib": memory_gib,
            "predicted_s": total_s if predicted_s is None else predicted_s,
            "reference_s": reference_s, "band": band}


def plan_rows(result):
    """`meshtp plan --json`: the valid candidates in the table's order, each step every layer's
    forward and backward (t_step_s, the CLI's `step s`). Its compute (t_compute_s, the CLI's
    `compute s`) is split into the GeMMs and the elementwise ops; the exposed communication is
    what the step adds to compute (t_step_s − t_compute_s), as `bench plan` counts it."""
    out = []
    for c in result["candidates"]:
        if not c.get("valid"):
            continue
        knobs = f" {c['knobs']}" if c.get("knobs") else ""
        gemm = c["t_compute_s"] - c["t_elementwise_s"]
        exposed = max(0.0, c["t_step_s"] - c["t_compute_s"])
        out.append(row(f"{c['strategy']} {c['mesh'][0]}x{c['mesh'][1]}{knobs}",
                       {"gemm": gemm, "elementwise": c["t_elementwise_s"],
                        "tp_comm": exposed},
                       c["t_step_s"], c["feasible"], c.get("reason") or "", c["memory"]))
    return out


def layout_label(p):
    """A 3D layout as `meshtp plan --3d` names it, shortened: dp, pp, mesh, strategy, …"""
    v = f" v={p['virtual_stages']}" if p.get("virtual_stages", 1) > 1 else ""
    sp = " sp" if p.get("sequence_parallel") else ""
    return (f"dp={p['dp']} pp={p['pp']} {p['mesh'][0]}x{p['mesh'][1]} {p['strategy']}{sp} "
            f"m={p['microbatches']}{v} zero={p['zero']} rc={p['recompute']}")


def layout_row(c, reference_s=None, label=None):
    """One priced 3D layout (`plan --3d`'s layouts, `--evaluate`'s object): its parts as the
    search prices them."""
    t = c["parts"]
    return row(label or layout_label(c["plan"]),
               {"compute": t["compute_s"], "tp_comm": t["tp_comm_s"], "p2p": t["p2p_s"],
                "dp": t["dp_s"], "bubble": t["bubble_s"], "optimizer": t["optimizer_s"]},
               c["t_step_s"], c.get("feasible", True),
               "" if c.get("feasible", True) else "does not fit", c.get("memory"),
               c.get("memory_gib"), reference_s=reference_s,
               band=(c["t_step_s_low"], c["t_step_s_high"]) if "t_step_s_low" in c else None)


def simulate_rows(result):
    """`meshtp simulate --json`: per run the simulated parts (compute charged, communication
    the devices waited on, optimizer) with the planner's total beside them; with
    --predict-only the planner's parts alone."""
    out = []
    for r in result["runs"]:
        p, s, mem = r.get("predicted") or {}, r.get("simulated"), r.get("memory") or {}
        fits = mem.get("fits", True)
        common = {"fits": fits, "note": "" if fits else "does not fit",
                  "memory_gib": mem.get("gib")}
        if s is not None:
            out.append(row(r["layout"], {"compute": s.get("compute_s", 0),
                                         "tp_comm": s.get("exposed_comm_s", 0),
                                         "optimizer": s.get("optimizer_s", 0)},
                           s["total_s"], predicted_s=p.get("total_s"),
                           reference_s=s["total_s"], **common))
        elif p.get("available"):
            out.append(row(r["layout"], {"compute": p["compute_s"],
                                         "tp_comm": p["exposed_comm_s"]},
                           p["total_s"], **common))
    return out


def validate_rows(result):
    return [layout_row({**r, "t_step_s": r["predicted_s"], "feasible": r.get("fits", True),
                        **({"t_step_s_low": r["low_s"], "t_step_s_high": r["high_s"]}
                           if "low_s" in r else {})},
                       r["measured_s"],
                       f"{r['model']} {r['variant']}") for r in result["runs"]]


def view(report):
    """The page's rows and words for each kind of report (see the module comment)."""
    kind, res = report["report"], report["result"]
    where = (f"{report.get('model', '?')} on {report.get('topology', '?')} "
             f"({report.get('devices', '?')} devices, {report.get('device_memory_gib', 0):g} "
             "GiB each)")
    none = ["None of them fits in device memory (hatched)."] if res.get("best", 0) is None else []
    if kind == "plan":
        rows = plan_rows(res)
        return rows, f"meshtp plan: {where}", [
            f"{len(rows)} candidates ranked by predicted step time (every layer of the model, "
            "forward and backward, as the CLI's step s; no optimizer)."] + none, None
    if kind == "plan-3d":
        rows = [layout_row(c) for c in res["layouts"]]
        return rows, f"meshtp plan --3d: {where}", [
            f"The {len(rows)} fastest of {res.get('searched', '?')} layouts searched "
            f"({res.get('priced', '?')} priced in full), by predicted time per training step."
        ] + none, None
    if kind == "evaluate":
        return [layout_row(res)], f"meshtp plan --3d --evaluate: {where}", [
            "One layout, priced as the search prices it."], None
    if kind == "simulate":
        rows = simulate_rows(res)
        sim = any("simulated" in r for r in res["runs"])
        lines = [f"{len(rows)} layouts, {res.get('what', 'layer')} "
                 + ("simulated (SimGrid) beside the planner's prediction."
                    if sim else "priced by the planner only (--predict-only).")]
        if "agree" in res:
            lines.append(f"Simulated best: {res['simulated_best']}; planner's best: "
                         f"{res['predicted_best']} — "
                         f"{'they agree' if res['agree'] else 'they differ'}.")
        for s in res.get("skipped", []):
            lines.append(f"Skipped: {s}")
        return rows, f"meshtp simulate: {where}", lines, "simulated" if sim else None
    if kind == "validate":
        return validate_rows(res), "meshtp validated against published runs", [
            f"{res['source']}: mean |error| {100 * res['mean_abs_error']:.2f}%, max "
            f"{100 * res['max_abs_error']:.1f}%."], "measured"
    raise ValueError(f"unknown report kind '{kind}' (plan, plan-3d, evaluate, simulate, "
                     "validate)")


def unit(rows):
    """Seconds, or milliseconds when every step is under a second."""
    big = max((r["total_s"] for r in rows), default=0)
    return (1.0, "s") if big >= 1 else (1e3, "ms")


def step_plot(plt, rows, scale, unit_name, what):
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.32 * len(rows)))
    parts = [(legend, [r["parts"].get(key, 0) * scale for r in rows], color)
             for key, legend, color in STEP_PARTS]
    hatched = [i for i, r in enumerate(rows) if not r["fits"]]
    plotting.stacked(ax, [f"{i + 1}. {r['label']}" for i, r in enumerate(rows)], parts, hatched)
    ax.set_xlabel(f"{what} ({unit_name})")
    if hatched:
        ax.set_title("hatched: does not fit in device memory", fontsize=8, loc="left")
    return plotting.png(fig)


def memory_plot(plt, rows, device_gib):
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.32 * len(rows)))
    labels = [f"{i + 1}. {r['label']}" for i, r in enumerate(rows)]
    if all(r["memory"] for r in rows):
        parts = [(legend, [r["memory"].get(key, 0) for r in rows], color)
                 for key, legend, color in MEMORY_PARTS]
    else:
        parts = [("per device", [r["memory_gib"] or 0 for r in rows], "tab:blue")]
    hatched = [i for i, r in enumerate(rows) if not r["fits"]]
    plotting.stacked(ax, labels, parts, hatched)
    if device_gib:
        ax.axvline(device_gib, color="black", linestyle="--", linewidth=1,
                   label=f"the device: {device_gib:g} GiB")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_xlabel("memory per device (GiB)")
    return plotting.png(fig)


def reference_plot(plt, rows, scale, unit_name, reference):
    both = [r for r in rows if r["reference_s"] is not None and r["predicted_s"] is not None]
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(both) + 2), 4.5))
    times = [t for r in both for t in (r["predicted_s"], r["reference_s"])]
    plotting.side_by_side(ax, [r["label"] for r in both], [
        ("meshtp's prediction", [r["predicted_s"] * scale for r in both]),
        (reference, [r["reference_s"] * scale for r in both])],
        log=max(times) > 20 * min(times))
    ax.set_ylabel(f"time per step ({unit_name})")
    return plotting.png(fig)


def fmt_t(seconds, scale):
    return "-" if seconds is None else f"{seconds * scale:.4g}"


def table(rows, scale, unit_name, reference):
    keys = [(k, legend) for k, legend, _ in STEP_PARTS if any(r["parts"].get(k) for r in rows)]
    bar = "simulated" if reference == "simulated" else "step"
    banded = any(r.get("band") for r in rows)
    head = ["#", "layout", f"{bar} {unit_name}"] + ([f"band {unit_name}"] if banded else [])
    head += [f"{legend} {unit_name}" for _, legend in keys]
    head += ["memory GiB", "fits"]
    if reference:
        head += [f"predicted {unit_name}", f"{reference} {unit_name}", "error"]
    out = ["<table>", "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for i, r in enumerate(rows):
        cells = [str(i + 1), html.escape(r["label"]), fmt_t(r["total_s"], scale)]
        if banded:
            band = r.get("band")
            cells.append("-" if not band else
                         f"{fmt_t(band[0], scale)}–{fmt_t(band[1], scale)}")
        cells += [fmt_t(r["parts"].get(k, 0), scale) for k, _ in keys]
        cells += ["-" if r["memory_gib"] is None else f"{r['memory_gib']:.1f}",
                  "yes" if r["fits"] else html.escape(r["note"] or "no")]
        if reference:
            predicted, ref = r["predicted_s"], r["reference_s"]
            cells += [fmt_t(predicted, scale), fmt_t(ref, scale),
                      "-" if predicted is None or not ref
                      else f"{100 * (predicted / ref - 1):+.1f}%"]
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


STYLE = """body { font-family: sans-serif; max-width: 1150px; margin: 2em auto; padding: 0 1em;
  color: #222; }
code { background: #f3f3f3; padding: 1px 4px; }
figure { margin: 1.5em 0; }
figcaption { font-size: 90%; color: #555; }
img.plot { max-width: 100%; border: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 85%; }
th, td { padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: right; }
th:nth-child(2), td:nth-child(2) { text-align: left; }
td { white-space: nowrap; }"""


def page(report):
    """The page's HTML text for `report` (see the module comment)."""
    plt = plotting.pyplot()
    rows, title, lines, reference = view(report)
    if report["report"] == "validate":
        reference = "measured"
    shown = rows[:MAX_ROWS]
    scale, unit_name = unit(shown)
    what = {"plan": "step: every layer, forward + backward", "simulate": "time"}.get(
        report["report"], "time per training step")
    figures = []
    ranked = report["report"] in ("plan", "plan-3d", "simulate")
    if shown:
        figures.append(("plot-step", step_plot(plt, shown, scale, unit_name, what),
                        "Time by part" + (", in the planner's order" if ranked else "")
                        + (" (simulated)" if reference == "simulated" else "") + "."))
        device = report.get("device_memory_gib")
        if any(r["memory_gib"] is not None for r in shown):
            figures.append(("plot-memory", memory_plot(plt, shown, device),
                            "Memory per device" + (" against the device's capacity (dashed)."
                                                   if device else ".")))
        if reference and any(r["reference_s"] is not None and r["predicted_s"] is not None
                             for r in shown):
            figures.append(("plot-reference", reference_plot(plt, shown, scale, unit_name,
                                                             reference),
                            f"meshtp's prediction beside the {reference} time."))
    body = [f"<h1>{html.escape(title)}</h1>"]
    if report.get("command"):
        body.append(f"<p><code>{html.escape(report['command'])}</code></p>")
    body += [f"<p>{html.escape(line)}</p>" for line in lines]
    if len(rows) > len(shown):
        body.append(f"<p>The first {len(shown)} of {len(rows)} are shown; report.json beside "
                    "this page holds them all.</p>")
    if not rows:
        body.append("<p>Nothing to plot: no layout was priced.</p>")
    for fid, data, caption in figures:
        src = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        body.append(f'<figure><img class="plot" id="{fid}" alt="{html.escape(caption)}" '
                    f'src="{src}"><figcaption>{html.escape(caption)}</figcaption></figure>')
    if shown:
        body += [f"<h2>{'Ranked' if ranked else 'The numbers'}</h2>",
                 table(shown, scale, unit_name, reference)]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>\n{STYLE}\n</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def write_page(report, out_html):
    """The page of `report` at `out_html`, written whole (temporary file, then renamed)."""
    text = page(report)
    tmp = f"{out_html}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, out_html)


def main(argv):
    if argv == ["--check"]:
        try:
            plotting.check()
        except ImportError as e:
            sys.exit(f"error: {sys.executable}: {e}")
        return
    if len(argv) != 2:
        sys.exit("usage: report.py REPORT_JSON OUT_HTML | report.py --check")
    try:
        with open(argv[0], encoding="utf-8") as f:
            report = json.load(f)
        write_page(report, argv[1])
    except ImportError as e:
        sys.exit(f"error: {e}")
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"error: report.py {argv[0]}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main(sys.argv[1:])
