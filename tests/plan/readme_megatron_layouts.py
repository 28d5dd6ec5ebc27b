#!/usr/bin/env python3
"""readme_megatron_layouts.py MESHTP README WORKDIR [DOC]: every `--3d` layout the README shows,
as Megatron-LM would be given it (issue 48, "Done when: Exports").

Each `meshtp plan --3d …` command of the README's ```sh blocks (continuation lines joined), and
the `--3d` calls of its ```python block (listed below as the CLI's same flags), is run again with
`--json --emit megatron --emit-file F` (any --emit, --emit-file or --top dropped). The layout F
configures (the planner's, or where Megatron-LM cannot run that one the fallback its header line
names) must have the degrees F gives, and priced by `plan --3d --evaluate --runtime megatron`
(Megatron-LM's runtime: every in-flight microbatch's activations kept) it must fit.

Where MEGATRON_LM_DIR names a Megatron-LM checkout (core_v0.15.0, the spelling meshtp emits),
F also goes through Megatron-LM's own parse_args and validate_args
(scripts/megatron_validate_args.py, run by /usr/bin/python3: Debian's torch) for its world
size; without it that step is said to be skipped. With DOC (docs/emit.md), the memory and step
time each layout is priced at must be the ones DOC's table quotes ("70.6 GiB, 24.91 s"), so
the page does not go stale. Prints one line per layout."""
import json
import os
import re
import shlex
import subprocess
import sys

meshtp, readme, workdir = sys.argv[1:4]
doc = open(sys.argv[4]).read() if len(sys.argv) > 4 else None
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.makedirs(workdir, exist_ok=True)

# The README's Python block, as the CLI's flags (each keyword is the flag of the same name).
PYTHON_CALLS = [
    # meshtp.evaluate("dgx-a100-8x8", "gpt3-175b", pp=8, mesh=[8, 1], microbatches=16,
    #                 recompute="full", sequence_parallel=True)
    ["--3d", "--evaluate", "--topology", "dgx-a100-8x8", "--model", "gpt3-175b", "--pp", "8",
     "--mesh", "8x1", "--microbatches", "16", "--recompute", "full", "--sequence-parallel"],
    # meshtp.plan_3d("dgx-a100-8x8", "gpt3-175b", top=1, emit="megatron")
    ["--3d", "--topology", "dgx-a100-8x8", "--model", "gpt3-175b"],
]
# What a priced layout keeps of the command: the model and the machine, not the search.
KEPT = {"--topology", "--model", "--seq", "--batch", "--devices", "--attention"}
DROPPED = {"--emit": 1, "--emit-file": 1, "--top": 1, "--json": 0}


def fail(message):
    sys.exit(f"readme_megatron_layouts: {message}")


def readme_commands(text):
    """The arguments after `meshtp plan` of each `plan --3d` line of the ```sh blocks."""
    out, block = [], None
    lines = text.split("\n")
    n = 0
    while n < len(lines):
        line = lines[n]
        if line.startswith("```"):
            block = None if block is not None else line[3:].strip()
        elif block == "sh":
            while line.rstrip().endswith("\\") and n + 1 < len(lines):
                n += 1
                line = line.rstrip()[:-1] + " " + lines[n].strip()
            words = shlex.split(line, comments=True)
            if len(words) > 2 and words[0].endswith("meshtp") and words[1] == "plan" \
                    and "--3d" in words:
                out.append(words[2:])
        n += 1
    return out


def layout_flags(text, megatron_args):
    """`plan --3d --evaluate` flags for a layout as layout::Plan prints it ("dp=4 mesh=2x1 tp1d
    ep=8 etp=1 pp=2 microbatches=64 interleaved virtual_stages=4 …"); the microbatches of a
    one-stage layout (not printed) from the file's batch sizes."""
    words = text.split()
    values = dict(w.split("=", 1) for w in words if "=" in w)
    flags = ["--dp", values["dp"], "--mesh", values["mesh"], "--strategy", words[2]]
    for key in ("cp", "ep", "etp", "pp", "zero", "recompute", "attention", "chunks",
                "progress_splits", "first_stage_layers", "last_stage_layers"):
        if key in values:
            flags += ["--" + key.replace("_", "-"), values[key]]
    if "cp" in values:
        flags += ["--cp-comm", words[words.index("cp=" + values["cp"]) + 1]]
    if "pp" in values:
        schedule = words[words.index("microbatches=" + values["microbatches"]) + 1]
        if "virtual_stages" in values:
            schedule += ":" + values["virtual_stages"]
        flags += ["--microbatches", values["microbatches"], "--schedule", schedule]
    else:
        arg = lambda name: int(megatron_args[megatron_args.index(name) + 1])
        flags += ["--microbatches", str(arg("--global-batch-size") //
                                        (arg("--micro-batch-size") * int(values["dp"])))]
    if "sequence_parallel" in words:
        flags.append("--sequence-parallel")
    return flags


def without(args, dropped):
    kept, n = [], 0
    while n < len(args):
        if args[n] in dropped:
            n += 1 + dropped[args[n]]
            continue
        kept.append(args[n])
        n += 1
    return kept


def kept_only(args):
    kept, n = [], 0
    while n < len(args):
        if args[n] in KEPT:
            kept += args[n:n + 2]
        n += 2 if args[n].startswith("--") and n + 1 < len(args) and \
            not args[n + 1].startswith("--") else 1
    return kept


commands = readme_commands(open(readme).read())
if not commands:
    fail(f"no `meshtp plan --3d` command in {readme}")
seen, layouts = set(), 0
validator = os.environ.get("MEGATRON_LM_DIR", "")
for args in commands + PYTHON_CALLS:
    args = without(args, DROPPED)
    if tuple(args) in seen:
        continue
    seen.add(tuple(args))
    layouts += 1
    target = f"{workdir}/layout{layouts}.sh"
    shown = " ".join(args)
    run = subprocess.run([meshtp, "plan", *args, "--json", "--emit", "megatron", "--emit-file",
                          target], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"plan {shown}: exit {run.returncode}: {run.stderr.strip()}")
    answer = json.loads(run.stdout)
    plan = (answer["best"] if "best" in answer else answer)["plan"]
    text = open(target).read()
    # The file's own arguments, as bash sources it.
    sourced = subprocess.run(["bash", "-c", 'set -eu; source "$1"; printf "%s\\n" '
                              '"${MEGATRON_ARGS[@]}"', "bash", target],
                             capture_output=True, text=True, check=True).stdout.split()
    plan_file = f"{workdir}/layout{layouts}.plan.json"
    json.dump(plan, open(plan_file, "w"))
    layout = ["--plan", plan_file]
    fallback = ""
    if text.startswith("# Megatron-LM cannot"):
        # The file configures the fallback its header line names (layout::Plan's text).
        named = next(l for l in text.splitlines() if " configuration (" in l)
        named = named.split("): ", 1)[1].rsplit(", ", 1)[0]
        layout = layout_flags(named, sourced)
        fallback = " (Megatron-LM's fallback)"
    priced = subprocess.run([meshtp, "plan", *kept_only(args), "--3d", "--evaluate", "--runtime",
                             "megatron", *layout, "--json"], capture_output=True, text=True)
    if priced.returncode != 0:
        fail(f"plan {shown}: --evaluate --runtime megatron {' '.join(layout)}: "
             f"{priced.stderr.strip()}")
    price = json.loads(priced.stdout)
    if not price["fits"] or price["runtime"] != "megatron":
        fail(f"plan {shown}: priced as Megatron-LM runs it, {price['memory_gib']:.1f} GiB "
             "does not fit")
    plan = price["plan"]
    tp = plan["mesh"][0] * plan["mesh"][1]
    world = plan["dp"] * plan["pp"] * plan.get("cp", 1) * tp
    degree = {k: int(sourced[sourced.index(k) + 1]) if k in sourced else 1
              for k in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size",
                        "--context-parallel-size")}
    if (degree["--tensor-model-parallel-size"], degree["--pipeline-model-parallel-size"],
            degree["--context-parallel-size"]) != (tp, plan["pp"], plan.get("cp", 1)):
        fail(f"plan {shown}: the file's degrees {degree} are not the plan's "
             f"tp {tp}, pp {plan['pp']}, cp {plan.get('cp', 1)}")
    quoted = f"{price['memory_gib']:.1f} GiB, {price['t_step_s']:.4g} s"
    if doc is not None and quoted not in doc:
        fail(f"plan {shown}: priced at {quoted} as Megatron-LM runs it, which "
             f"{sys.argv[4]} does not quote: rerun this test and update its table")
    verdict = "validate_args skipped (MEGATRON_LM_DIR not set)"
    if validator:
        checked = subprocess.run(["/usr/bin/python3", f"{root}/scripts/megatron_validate_args.py",
                                  validator, target, str(world)], capture_output=True, text=True)
        last = (checked.stdout.strip().splitlines() or [""])[-1]
        if checked.returncode != 0 or not last.startswith("validate_args passed"):
            fail(f"plan {shown}: Megatron-LM's validate_args: "
                 f"{(checked.stdout + checked.stderr).strip().splitlines()[-1:]}")
        verdict = last
    print(f"ok   plan {shown}:{fallback} {world} GPUs, tp {tp} pp {plan['pp']} dp {plan['dp']} "
          f"cp {plan.get('cp', 1)}, {price['memory_gib']:.1f} GiB as Megatron-LM runs it "
          f"(fits), {price['t_step_s']:.4g} s; {verdict}")
print(f"{layouts} layouts")
