#!/usr/bin/env bash
# scripts/bench-planner.sh [--meshtp BIN] [--repeats N] [--timeout S] [--callgrind]
#                          [--callgrind-max-s S] [--only REGEX] [--out FILE.json]
# The planner's own speed at cluster scale (issue 27; a benchmark, not a test): `meshtp plan`
# (2D) and `meshtp plan --3d` at 8, 256, 1,536, 16,384 and 100,000 devices, on a hierarchical
# topology (DGX A100 nodes of 8 GPUs: levels node × gpu; below 8 devices one node) and on a
# graph one (a 3D torus, row-major placement), each case in its own process. Per case: the
# median wall and CPU seconds of N runs (the machine is shared: wall moves with load, so the
# CPU time is printed too), and with --callgrind the instructions `valgrind --tool=callgrind`
# counts for one run (Ir: a number that does not move with load), skipped for a case whose
# median wall time is over --callgrind-max-s (default 20 s: callgrind runs ~50× slower).
# A run over --timeout seconds (default 120) is killed and reported as such.
#
# Models: 2D `--model tiny` (the issue's smoke question; most meshes are invalid for its
# hidden 64, which exercises the invalid path), 3D `--model gpt3-175b` with batch = devices,
# but 2,048 at 16,384 devices (the issue's case) and 12,500 at 100,000 (8 GPUs a sequence).
# Topology files are generated into a temporary folder; the commands print them.
set -euo pipefail
cd "$(dirname "$0")/.."
meshtp=build/src/cli/meshtp
repeats=3
timeout_s=120
callgrind=0
callgrind_max_s=20
only=.
out=
while [ $# -gt 0 ]; do
  case $1 in
    --meshtp) meshtp=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --callgrind) callgrind=1; shift ;;
    --callgrind-max-s) callgrind_max_s=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "error: unknown argument '$1' (scripts/bench-planner.sh [--meshtp BIN] [--repeats N]" \
            "[--timeout S] [--callgrind] [--callgrind-max-s S] [--only REGEX] [--out FILE.json])" >&2
       exit 2 ;;
  esac
done
[ -x "$meshtp" ] || { echo "error: no meshtp at '$meshtp' (scripts/install.sh builds it)" >&2; exit 2; }
if [ "$callgrind" = 1 ] && ! command -v valgrind > /dev/null; then
  echo "error: --callgrind needs valgrind (apt-get install valgrind)" >&2
  exit 2
fi

topologies=$(mktemp -d)
trap 'rm -rf "$topologies"' EXIT

# levels N: N A100s as N/8 DGX A100 nodes (dgx-a100-192x8's numbers), or one node below 8.
levels() {
  local n=$1 file=$topologies/dgx-a100-$1.json nodes=$(( $1 >= 8 ? $1 / 8 : 1 ))
  local gpus=$(( n / nodes ))
  cat > "$file" <<EOF
{"name": "dgx-a100-${nodes}x${gpus}", "description": "bench-planner.sh: $n A100s",
 "device": {"memory_gib": 80, "tflops": 250, "elementwise_gbps": 1600}, "launch_us": 10,
 "levels": [{"name": "node", "members": $nodes, "group_gbps": 200, "latency_us": 8},
            {"name": "gpu", "members": $gpus, "group_gbps": 600, "latency_us": 3}]}
EOF
  echo "$file"
}
# torus N DIMS: a 3D torus of 50 GB/s links (tpuv4-torus-16x16's numbers), row-major ranks.
torus() {
  local file=$topologies/torus-$1.json
  cat > "$file" <<EOF
{"name": "torus-$1", "description": "bench-planner.sh: a $2 torus",
 "device": {"memory_gib": 32, "tflops": 200, "elementwise_gbps": 1200}, "launch_us": 5,
 "graph": {"generator": "torus", "dims": [$2], "link_gbps": 50, "latency_us": 1}}
EOF
  echo "$file"
}
declare -A torus_dims=([8]="2, 2, 2" [256]="4, 8, 8" [1536]="8, 12, 16" [16384]="16, 32, 32"
                       [100000]="40, 50, 50")
declare -A batch_3d=([8]=8 [256]=256 [1536]=1536 [16384]=2048 [100000]=12500)

# name|command…
cases=()
for n in 8 256 1536 16384 100000; do
  lv=$(levels "$n")
  tr=$(torus "$n" "${torus_dims[$n]}")
  cases+=("plan-levels-$n|$meshtp plan --topology $lv --model tiny"
          "plan-torus-$n|$meshtp plan --topology $tr --model tiny"
          "plan3d-levels-$n|$meshtp plan --3d --topology $lv --model gpt3-175b --batch ${batch_3d[$n]}"
          "plan3d-torus-$n|$meshtp plan --3d --topology $tr --model gpt3-175b --batch ${batch_3d[$n]}")
done

printf '# %s, %s, load %s, %s repeats, timeout %s s\n' "$(date -u +%FT%TZ)" \
  "$("$meshtp" --version)" "$(cut -d' ' -f1 /proc/loadavg)" "$repeats" "$timeout_s"
json_lines=()
for c in "${cases[@]}"; do
  name=${c%%|*}
  cmd=${c#*|}
  [[ $name =~ $only ]] || continue
  line=$(python3 - "$repeats" "$timeout_s" "$callgrind" "$callgrind_max_s" "$name" $cmd <<'EOF'
# Runs the command `repeats` times (wall and CPU seconds of each), then once under callgrind
# when asked; prints one JSON object.
import json, os, re, resource, statistics, subprocess, sys, tempfile, time
repeats, timeout_s, callgrind, callgrind_max_s = (int(sys.argv[1]), float(sys.argv[2]),
                                                  sys.argv[3] == "1", float(sys.argv[4]))
name, cmd = sys.argv[5], sys.argv[6:]
walls, cpus, status, searched = [], [], "ok", None
for _ in range(repeats):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        status = f"timeout after {timeout_s:g} s"
        break
    walls.append(time.monotonic() - t0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if p.returncode != 0:
        status = "exit %d: %s" % (p.returncode, p.stderr.strip().splitlines()[-1:])
        break
    m = re.search(r"(\d+) layouts searched", p.stdout)
    searched = int(m.group(1)) if m else p.stdout.count("\n")
r = {"case": name, "command": " ".join(cmd), "status": status, "runs": len(walls),
     "wall_median_s": statistics.median(walls) if walls else None,
     "cpu_median_s": statistics.median(cpus) if cpus else None,
     "output": searched, "callgrind_ir": None}
if callgrind and status == "ok" and r["wall_median_s"] <= callgrind_max_s:
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/cg"] + cmd,
                           capture_output=True, text=True)
        m = re.search(r"Collected : (\d+)", p.stderr)
        r["callgrind_ir"] = int(m.group(1)) if m else None
print(json.dumps(r))
EOF
)
  json_lines+=("$line")
  python3 -c '
import json, sys
r = json.loads(sys.argv[1])
f = lambda v, fmt: "-" if v is None else fmt % v
print("%-22s wall %9s s  cpu %9s s  Ir %15s  %s  (%s: %s)" % (r["case"],
      f(r["wall_median_s"], "%.3f"), f(r["cpu_median_s"], "%.3f"),
      f(r["callgrind_ir"], "%d"), r["status"],
      "layouts searched" if "--3d" in r["command"] else "output lines", r["output"]))
print("    " + r["command"])' "$line"
done
if [ -n "$out" ]; then
  printf '%s\n' "${json_lines[@]}" | python3 -c '
import json, sys
json.dump([json.loads(l) for l in sys.stdin], open(sys.argv[1], "w"), indent=1)' "$out"
  echo "wrote $out"
fi
