#!/usr/bin/env bash
# scripts/bench-simulator.sh [OUT.json] [--quick]: the simulator's own speed (issue 10 item 6; a
# benchmark, not a test). One training step of one GPT-3 175B layer (`meshtp simulate --what
# step --layers 1`, charged mode) at 16, 64 and 256 simulated devices, each case in its own
# process: the wall time, the CPU time and the max RSS of the simulation (getrusage of the
# children), the simulated step time, and the load average when it ran (the machine is shared:
# compare CPU seconds, not wall seconds). Prints a line per case and writes the JSON to OUT
# (default bench-simulator.json). --quick: the 16- and 64-device cases only.
#
# Batch = devices / 2 (MeshSlice's weak-scaling point: 128 sequences on 256 chips). Layouts:
# ATP needs whole attention heads on every rank (96 heads: d1·d2 divides 96), so it runs at
# 16 devices only; the 2D GeMM blocks split heads over the mesh columns alone (Nc divides 96),
# so MeshSlice runs at every size.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench-simulator.json
quick=0
for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    --*) echo "error: unknown option '$a' (usage: scripts/bench-simulator.sh [OUT.json] [--quick])" >&2; exit 2 ;;
    *) out=$a ;;
  esac
done
[ -x build/src/cli/meshtp ] && [ -x build-sim/src/cli/meshtp ] || scripts/install.sh --sim

# devices topology mesh strategy
cases=(
  "16 nvlink-network-16 4x4 atp"
  "16 nvlink-network-16 4x4 meshslice"
  "64 nvlink-network-64 8x8 meshslice"
)
if [ "$quick" = 0 ]; then
  cases+=("256 tpuv4-torus-16x16 16x16 meshslice" "256 tpuv4-torus-16x16 32x8 meshslice")
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
results=()
for c in "${cases[@]}"; do
  read -r n topo mesh strategy <<< "$c"
  python3 - "$tmp/case.json" build/src/cli/meshtp simulate --topology "$topo" --model gpt3-175b \
      --devices "$n" --mesh "$mesh" --strategy "$strategy" --what step --layers 1 \
      --batch $((n / 2)) --ignore-memory --json <<'EOF'
# Runs the command; writes its JSON result with the measurement of the whole process tree.
import json, os, resource, subprocess, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
load = os.getloadavg()[0]
t0 = time.monotonic()
p = subprocess.run(cmd, capture_output=True, text=True)
wall = time.monotonic() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
case = {"command": " ".join(cmd), "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
        "max_rss_mib": ru.ru_maxrss / 1024, "load_avg_1min": load, "ok": p.returncode == 0}
if p.returncode == 0:
    r = json.loads(p.stdout)
    run = r["runs"][0]
    case.update({"devices": r["devices"], "topology": r["topology"], "layout": run["layout"],
                 "simulated_step_ms": run["simulated"]["total_s"] * 1e3,
                 "predicted_step_ms": run["predicted"].get("total_s", float("nan")) * 1e3,
                 "simulation_wall_s": run["wall_s"]})
else:
    case["error"] = (p.stderr.strip().splitlines() or ["?"])[0]
json.dump(case, open(out, "w"))
if not case["ok"]:
    print(f"FAILED: {case['command']}: {case['error']}")
else:
    print(f"{case['devices']:4d} devices {case['topology']:20s} {case['layout']:30s} "
          f"wall {wall:6.1f} s  cpu {case['cpu_s']:6.1f} s  max RSS {case['max_rss_mib']:6.0f} MiB  "
          f"simulated step {case['simulated_step_ms']:8.2f} ms  (load {load:.1f})", flush=True)
EOF
  results+=("$(cat "$tmp/case.json")")
done
printf '%s\n' "${results[@]}" | python3 -c '
import json, sys
cases = [json.loads(l) for l in sys.stdin if l.strip()]
json.dump({"benchmark": "simulator speed: one GPT-3 175B layer, one training step",
           "cases": cases}, open(sys.argv[1] + ".tmp", "w"), indent=2)
' "$out"
mv "$out.tmp" "$out"
echo "wrote $out"
