#!/usr/bin/env bash
# watchdog-overhead.sh [RANKS] [ROUNDS]: what the communication watchdog costs. Runs
# `meshtp bench collectives` and `meshtp bench layer` with the watchdog on (--comm-timeout
# 300, the default) and off (--comm-timeout 0: plain blocking MPI calls and MPI_Wait),
# alternating ROUNDS times (default 3) so both see the same machine load, and prints per
# case the median time of each and the ratio on/off (> 1: the watchdog costs time), then
# the median ratio per benchmark, as JSON lines.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env.sh
ranks=${1:-4}
rounds=${2:-3}
meshtp=build/src/cli/meshtp
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for r in $(seq "$rounds"); do
  for mode in on off; do
    timeout=300
    [ "$mode" = off ] && timeout=0
    mpirun -np "$ranks" "$meshtp" bench collectives --mesh 2x2 --sizes 8K,64K,1M,8M \
      --seconds 0.2 --json --comm-timeout $timeout >>"$out/collectives.$mode"
    mpirun -np "$ranks" "$meshtp" bench layer --hidden 256 --heads 8 --seq 128 --batch 4 \
      --layers 2 --mesh all --chunks 1,2 --seconds 1 --json --comm-timeout $timeout \
      >>"$out/layer.$mode"
  done
done

python3 - "$out" <<'EOF'
import json, statistics, sys
out = sys.argv[1]
def load(name, mode, key, value):
    rows = {}
    for line in open(f"{out}/{name}.{mode}"):
        line = line.strip()
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        rows.setdefault(key(row), []).append(value(row))
    return {k: statistics.median(v) for k, v in rows.items()}
benches = {
    "collectives": (lambda r: f'{r["collective"]} dim{r["mesh_dim"]} {r["bytes"]}B',
                    lambda r: r["median_s"]),
    "layer": (lambda r: f'mesh {r.get("mesh")} chunks {r.get("chunks")}',
              lambda r: r["step_s"]),
}
for name, (key, value) in benches.items():
    on, off = load(name, "on", key, value), load(name, "off", key, value)
    ratios = []
    for case in sorted(on):
        if case in off and off[case] > 0:
            ratio = on[case] / off[case]
            ratios.append(ratio)
            print(json.dumps({"bench": name, "case": case, "on": on[case], "off": off[case],
                              "ratio_on_off": round(ratio, 3)}))
    if ratios:
        print(json.dumps({"bench": name, "cases": len(ratios),
                          "median_ratio_on_off": round(statistics.median(ratios), 3),
                          "min": round(min(ratios), 3), "max": round(max(ratios), 3)}))
EOF
