#!/usr/bin/env bash
# evaluate_matches_search.sh MESHTP WORKDIR RUNTIME ARGS…: `plan --3d` searches ARGS (a
# topology and model) with --runtime RUNTIME and writes its best layout (--out); `plan --3d
# --evaluate --plan` of that file must print exactly the search's step time and memory for
# it (the same numbers in the JSON, not close ones), and so must the layout spelled out in
# flags.
set -euo pipefail
meshtp=$1 dir=$2 runtime=$3
shift 3
mkdir -p "$dir"
plan="$dir/best-$runtime.json"
"$meshtp" plan --3d "$@" --runtime "$runtime" --top 1 --json --out "$plan" >"$dir/search.json"
"$meshtp" plan --3d --evaluate "$@" --runtime "$runtime" --plan "$plan" --json >"$dir/evaluate.json"
flags=$(python3 - "$plan" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
f = ["--dp", p["dp"], "--pp", p["pp"], "--mesh", f'{p["mesh"][0]}x{p["mesh"][1]}',
     "--strategy", p["strategy"], "--chunks", p["chunks"], "--microbatches", p["microbatches"],
     "--zero", p["zero"], "--recompute", p["recompute"]]
if p["schedule"] == "interleaved":
    f += ["--schedule", f'interleaved:{p["virtual_stages"]}']
if p.get("sequence_parallel"):
    f += ["--sequence-parallel"]
print(" ".join(str(x) for x in f))
PY
)
# shellcheck disable=SC2086
"$meshtp" plan --3d --evaluate "$@" --runtime "$runtime" $flags --json >"$dir/flags.json"
python3 - "$dir/search.json" "$dir/evaluate.json" "$dir/flags.json" <<'PY'
import json, sys
best = json.load(open(sys.argv[1]))["best"]
for path in sys.argv[2:]:
    e = json.load(open(path))
    for key in ("t_step_s", "t_stage_s", "t_rerun_s", "t_head_s", "t_head_comm_s", "t_p2p_s", "t_dp_s",
                "memory_gib", "runtime",
                "feasible"):
        if e[key] != best[key]:
            sys.exit(f"{path}: {key} {e[key]!r} but the search priced {best[key]!r}")
    parts = e["parts"]
    total = sum(parts.values())
    if abs(total - e["t_step_s"]) > 1e-12 * e["t_step_s"]:
        sys.exit(f"{path}: the parts sum to {total}, not t_step_s {e['t_step_s']}")
print(f"evaluate = search: t_step_s {best['t_step_s']!r} ({best['runtime']}, "
      f"dp={best['plan']['dp']} pp={best['plan']['pp']} m={best['plan']['microbatches']})")
PY
