#!/usr/bin/env bash
# plan_to_train.sh MESHTP MPIEXEC…: the planner's output is the runtime's input. On 2 and 4
# ranks, for every strategy `meshtp plan --json` emits as feasible (its best row), the
# candidate's "plan" object, saved as it is printed, trains one step through
# `meshtp train --plan` with that strategy and mesh; and `plan --out --pick ROW` writes the
# same plan (provenance aside).
set -euo pipefail
meshtp=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ran=0
for n in 2 4; do
  "$meshtp" plan --topology "nvlink-network-$n" --model tiny --json > "$work/plan$n.json"
  # One line per strategy: STRATEGY ROW MESH, with the plan in $work/STRATEGY-N.json.
  python3 - "$work" "$n" > "$work/rows$n" <<'PY'
import json, sys
work, n = sys.argv[1], sys.argv[2]
seen = set()
for row, c in enumerate(json.load(open(f"{work}/plan{n}.json"))["candidates"], 1):
    if not c["feasible"] or c["strategy"] in seen:
        continue
    seen.add(c["strategy"])
    json.dump(c["plan"], open(f"{work}/{c['strategy']}-{n}.json", "w"))
    print(c["strategy"], row, "x".join(map(str, c["plan"]["mesh"])))
PY
  while read -r strategy row mesh; do
    plan="$work/$strategy-$n.json"
    "$meshtp" plan --topology "nvlink-network-$n" --model tiny --pick "$row" \
      --out "$work/out.json" < /dev/null > /dev/null
    python3 - "$plan" "$work/out.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for p in (a, b):
    p.pop("provenance", None)
assert a == b, f"plan --json and plan --out differ:\n{a}\n{b}"
PY
    if ! "$@" -np "$n" "$meshtp" train --model tiny --plan "$plan" --steps 1 --eval-batches 1 \
        < /dev/null > "$work/log" 2>&1; then
      echo "FAIL $strategy on $n ranks (row $row):"; cat "$work/log"; exit 1
    fi
    if ! grep -q "^layout  dp=1 mesh=$mesh $strategy" "$work/log" ||
       ! grep -q "^done    steps 1–1" "$work/log"; then
      echo "FAIL $strategy on $n ranks: not trained with mesh $mesh:"; cat "$work/log"; exit 1
    fi
    echo "ok   $strategy $mesh on $n ranks (row $row)"
    ran=$((ran + 1))
  done < "$work/rows$n"
done
# 2 ranks: megatron tp1d meshslice collective wang summa; 4 ranks: those, atp and cannon.
[ "$ran" -ge 14 ] || { echo "FAIL only $ran strategies ran"; exit 1; }
