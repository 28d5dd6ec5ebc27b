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
             (nvlink-network-N), one model for every N (ATP M2's sizes with 256 heads, written
             to OUT/atp-fig12.json).  default: N = 8, 16, 32;  --full: to 256 (from 128 on, the
             planner's 8 best layouts)
  meshslice  MeshSlice §5 on the 256-chip TPUv4 slice, GPT-3 175B and MT-NLG 530B: each 2D
             algorithm on 32x8 and 16x16 with the planner's slice count, as the largest FC
             GeMM (mlp1 forward: `gemm2d`) and as one block forward + backward (`layer`);
             MeshSlice's gain over the others.  --full only (256 simulated devices)
  ksweep     MeshSlice Fig. 14: mlp1 on 32x8 at K = 1…32 slices.  --full only
The report (ranked groups, gains, overlap): scripts/reproduce_report.py.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time

from reproduce_report import case_name, plot, rank, summary, update_doc, write_markdown

ATP_TOPOLOGIES = [("IC1", "pcie-8xa100", 8), ("IC2", "dual-nvlink-8xa100", 8),
                  ("IC3", "nvswitch-8xa100", 8), ("IC4", "ib-2x8xa100", 16),
                  ("IC5", "nvlink-hdr-4x4", 16), ("IC6", "torus-4x4", 16)]


def simulate(meshtp, args, log, lock):
    # One layer of a model that as a whole does not fit (GPT-3 on 16 chips) is still simulated.
    cmd = [meshtp, "simulate", "--json", "--ignore-memory"] + args
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
                     "sim_exposed_s": r["simulated"]["exposed_comm_s"],
                     "sim_compute_s": r["simulated"]["compute_s"], "wall_s": r["wall_s"]})
        set_prediction(runs[-1], r["predicted"])
    out = dict(case)
    out["runs"] = runs
    out["wall_s"] = j.get("wall_s")
    # Simulated with the communication engines' T_launch per collective (comm/smpi_device.hpp);
    # cases recorded before it lack the key and the report marks them.
    out["sim_launch"] = True
    return rank(out)


def set_prediction(run, predicted):
    run["plan_s"] = predicted.get("total_s") if predicted["available"] else None
    run["plan_exposed_s"] = predicted.get("exposed_comm_s")
    run["error"] = ((run["plan_s"] - run["sim_s"]) / run["sim_s"]
                    if run["plan_s"] is not None and run["sim_s"] > 0 else None)


def atp_cases(full):
    models = ["atp-m1", "atp-m2", "atp-m3", "atp-m4"] if full else ["atp-m1", "atp-m2"]
    out = []
    for m in models:
        for ic, topo, n in ATP_TOPOLOGIES:
            case = {"suite": "atp", "interconnect": ic, "topology": topo, "model": m, "devices": n}
            out.append((case, ["--topology", topo, "--model", m, "--devices", str(n),
                               "--what", "layer", "--strategies", "atp,megatron", "--top", "100"]))
    return out


# Fig. 12's model: the runtime's attention core holds a/(d1·d2) whole heads, so every mesh of
# N ≤ 256 devices needs a multiple of 256 heads, which no ATP model has (M1–M4: 16–96). One
# model for every N keeps the trend clean: ATP M2's sizes (h = 4096, b = 4, s = 2048) with 256
# heads of 16. Fig. 12 is in units of Δ = 2·L·b·s·h/GroupBW, so the head count (which only
# splits the attention core) does not move the best mesh.
FIG12_MODEL = {"name": "atp-fig12", "layers": 1, "hidden": 4096, "heads": 256, "vocab": 0,
               "batch": 4, "seq": 2048, "precision": "fp16", "recompute": "none",
               "description": "ATP M2's sizes with 256 heads (Fig. 12 on up to 256 devices; "
                              "written by scripts/reproduce_papers.py)"}


def fig12_model_file(out_dir):
    path = os.path.join(out_dir, "atp-fig12.json")
    if not os.path.exists(path):
        os.makedirs(out_dir, exist_ok=True)
        with open(path + ".tmp", "w") as f:
            json.dump(FIG12_MODEL, f, indent=1)
        os.replace(path + ".tmp", path)
    return path


def fig12_cases(full, out_dir):
    sizes = [8, 16, 32, 64, 128, 256] if full else [8, 16, 32]
    model = fig12_model_file(out_dir)
    out = []
    for n in sizes:
        topo = f"nvlink-network-{n}"
        case = {"suite": "fig12", "topology": topo, "model": FIG12_MODEL["name"], "devices": n}
        # From 128 devices on, the planner's 8 best layouts only (of 24–27: the others are
        # priced at 1.9x the best or more; a 128–256-rank layer takes minutes to simulate).
        top = "100" if n <= 64 else "8"
        out.append((case, ["--topology", topo, "--model", model, "--devices", str(n),
                           "--what", "layer", "--strategies", "atp,megatron", "--top", top]))
    return out


# MeshSlice §5 (Fig. 9, Fig. 10): the 256-chip TPUv4 slice, batch = chips / 2 (the models' own
# batch of 128). Each 2D algorithm on the two meshes the paper compares (Cannon needs a square
# one), with the planner's slice count; twice: `gemm2d` is the largest FC GeMM (mlp1: b·s × 4h,
# contraction h) forward, the FC-layer comparison; `layer` is one whole block forward +
# backward with every linear that algorithm, the end-to-end comparison.
MESHSLICE_MODELS = ["gpt3-175b", "mt-nlg-530b"]
MESHSLICE_ALGOS = ["meshslice", "collective", "wang", "summa", "cannon"]
MESHSLICE_TOPOLOGY = "tpuv4-torus-16x16"


def meshslice_case(model, mesh, algo, what, slices=None, suite="meshslice"):
    case = {"suite": suite, "topology": MESHSLICE_TOPOLOGY, "model": model, "devices": 256,
            "mesh": mesh, "algorithm": algo, "what": what}
    args = ["--topology", MESHSLICE_TOPOLOGY, "--model", model, "--devices", "256",
            "--what", what, "--mesh", mesh, "--strategy", algo]
    if slices is not None:
        case["slices"] = slices
        args += ["--slices", str(slices)]
    return case, args


def meshslice_cases(full):
    if not full:
        return []
    out = []
    for what in ["gemm2d", "layer"]:
        for model in MESHSLICE_MODELS:
            for mesh in ["32x8", "16x16"]:
                for algo in MESHSLICE_ALGOS:
                    if algo != "cannon" or mesh == "16x16":
                        out.append(meshslice_case(model, mesh, algo, what))
    return out


# MeshSlice Fig. 14: the slice count K of MeshSlice's mlp1 GeMM on the 32x8 mesh.
KSWEEP_SLICES = [1, 2, 4, 8, 16, 32]


def ksweep_cases(full):
    if not full:
        return []
    return [meshslice_case(model, "32x8", "meshslice", "gemm2d", k, suite="ksweep")
            for model in MESHSLICE_MODELS for k in KSWEEP_SLICES]


SUITES = ("atp", "fig12", "meshslice", "ksweep")


def all_cases(full, out_dir):
    return (atp_cases(full) + fig12_cases(full, out_dir) + meshslice_cases(full) +
            ksweep_cases(full))


def run_cases(meshtp, cases, jobs, log, on_result):
    """Simulate each case (`jobs` at a time: simulated time does not depend on the machine's
    load, so cases may share the cores); on_result(results so far) after each one."""
    results = [None] * len(cases)
    lock = threading.Lock()

    def one(i):
        case, args = cases[i]
        print(f"{case['suite']}: {case_name(case)} ...", flush=True)
        j, err = simulate(meshtp, args, log, lock)
        with lock:
            results[i] = summarize(case, j) if j else dict(case, failed=err)
            on_result([r for r in results if r is not None])

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for f in [pool.submit(one, i) for i in range(len(cases))]:
            f.result()
    return results


def write_results(out_dir, full, results, wall):
    tmp = os.path.join(out_dir, "results.json.tmp")
    with open(tmp, "w") as f:
        json.dump({"full": full, "wall_s": wall, "summary": summary(results), "cases": results},
                  f, indent=1)
    os.replace(tmp, os.path.join(out_dir, "results.json"))
    tmp = os.path.join(out_dir, "results.md.tmp")
    write_markdown(tmp, results, wall)
    os.replace(tmp, os.path.join(out_dir, "results.md"))
    # The recorded run (docs/results) also refreshes the tables docs/simulation.md quotes.
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.realpath(out_dir) == os.path.realpath(os.path.join(root, "docs", "results")):
        update_doc(os.path.join(root, "docs", "simulation.md"), results)


CASE_KEYS = ("suite", "interconnect", "topology", "model", "devices", "mesh", "algorithm", "what",
             "slices")


def case_key(case):
    """A case's identity (a recorded result or a case to run)."""
    return json.dumps({k: case[k] for k in CASE_KEYS if k in case}, sort_keys=True)


def reprice(meshtp, out_dir):
    """Price the recorded simulations of OUT/results.json again with this build's planner
    (`meshtp simulate --predict-only`): simulated time does not depend on the planner."""
    with open(os.path.join(out_dir, "results.json")) as f:
        recorded = json.load(f)
    args_of = {case_key(c): a for c, a in all_cases(True, out_dir)}
    for r in recorded["cases"]:
        if "failed" in r:
            continue
        args = args_of.get(case_key(r))
        if args is None:
            print(f"not repriced (no longer a case of the suite): {case_name(case)}")
            continue
        # Every candidate (a case that simulated the planner's top K may rank differently now).
        if "--top" in args:
            args = args[:args.index("--top")] + ["--top", "1000"] + args[args.index("--top") + 2:]
        p = subprocess.run([meshtp, "simulate", "--json", "--predict-only"] + args,
                           capture_output=True, text=True, check=True)
        predicted = {x["layout"]: x["predicted"] for x in json.loads(p.stdout)["runs"]}
        for x in r["runs"]:
            set_prediction(x, predicted.get(x["layout"], {"available": False}))
        rank(r)
    write_results(out_dir, recorded["full"], recorded["cases"], recorded["wall_s"])
    plots = plot(out_dir, recorded["cases"])
    print(f"re-priced {out_dir}/results.md, results.json" + "".join(f", {p}" for p in plots))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--meshtp", default="build/src/cli/meshtp")
    ap.add_argument("--simulator", default=None,
                    help="the simulated meshtp (default: the one `meshtp simulate` was built "
                         "with); a copy lets a long run go on while the build changes")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--suites", default=",".join(SUITES))
    ap.add_argument("--jobs", type=int, default=1,
                    help="cases simulated at once (each is one smpirun process)")
    ap.add_argument("--reprice", action="store_true",
                    help="simulate nothing: price OUT/results.json's runs again with this planner")
    ap.add_argument("--merge", action="store_true",
                    help="keep OUT/results.json's cases that are not run now")
    ap.add_argument("--max-devices", type=int, default=None,
                    help="run only the cases of at most this many devices")
    ap.add_argument("--algorithms", default=None,
                    help="run only the meshslice / ksweep cases of these 2D GeMM algorithms "
                         "(like cannon,summa): after a change to one of them, with --merge")
    ap.add_argument("--what", choices=["gemm2d", "layer"], default=None,
                    help="run only the meshslice / ksweep cases that simulate this")
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
        if name not in SUITES:
            sys.exit(f"error: --suites: unknown suite '{name}' ({', '.join(SUITES)})")
    algorithms = a.algorithms.split(",") if a.algorithms else None
    for name in algorithms or []:
        if name not in MESHSLICE_ALGOS:
            sys.exit(f"error: --algorithms: unknown algorithm '{name}' "
                     f"({', '.join(MESHSLICE_ALGOS)})")
    cases = [c for c in all_cases(a.full, a.out) if c[0]["suite"] in suites and
             (a.max_devices is None or c[0]["devices"] <= a.max_devices) and
             (algorithms is None or c[0].get("algorithm") in algorithms) and
             (a.what is None or c[0].get("what") == a.what)]
    if a.simulator:
        cases = [(c, args + ["--simulator", a.simulator]) for c, args in cases]
    kept = []
    kept_wall = 0.0  # the simulation time already spent on the record this run adds to
    if a.merge and os.path.exists(os.path.join(a.out, "results.json")):
        running = {case_key(c) for c, _ in cases}
        with open(os.path.join(a.out, "results.json")) as f:
            recorded = json.load(f)
        kept = [r for r in recorded["cases"] if case_key(r) not in running]
        kept_wall = recorded.get("wall_s") or 0.0
    # Cheap cases first (a long run is useful early): ATP M1 on every interconnect, then by
    # size; one layout before a ranked many; a whole layer after a GeMM; Fig. 12 at ≥ 128
    # devices (27 layouts of 128–256 ranks) last.
    cases.sort(key=lambda c: (c[0]["suite"] != "atp" or c[0]["model"] != "atp-m1",
                              c[0]["suite"] == "fig12" and c[0]["devices"] >= 128,
                              c[0].get("what") == "layer", c[0]["devices"]))
    with open(os.path.join(a.out, "simulate.log"), "w") as log:
        # Results so far are rewritten after every case: a long run can be read while it runs.
        results = run_cases(a.meshtp, cases, a.jobs, log,
                            lambda done: write_results(a.out, a.full, kept + done,
                                                       kept_wall + time.time() - t0))
    wall = time.time() - t0
    results = kept + results
    write_results(a.out, a.full, results, kept_wall + wall)
    plots = plot(a.out, results)
    print(f"wrote {a.out}/results.md, results.json" +
          "".join(f", {p}" for p in plots) + f" ({wall:.0f} s)")
    failed = [r for r in results if "failed" in r]
    if failed:
        print(f"{len(failed)} case(s) failed: see {a.out}/simulate.log", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
