#!/usr/bin/env bash
# calibrate_from_metrics.sh DIR MESHTP BASE MPIEXEC…: calibrate --from-step-log on meshtp's own
# --metrics file, end to end. A 2-rank `train --model tiny --mesh 2x1` writes its metrics; a
# constant of BASE (this machine, measured by `calibrate`, whose ranges are its sweeps) is
# fitted to the run's step, the value, its source range and the residual printed, the file
# written and read back by the planner. Then the bad inputs (a truncated file, no step, another
# version, a file without the run record) are each refused in one line, non-zero, and write
# nothing: a previous --out stays byte for byte, no temporary file is left.
set -u
dir=$1
meshtp=$2
base=$3
shift 3
rm -rf "$dir"
mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }
metrics=$dir/m.jsonl
timeout 120 "$@" -np 2 "$meshtp" train --model tiny --mesh 2x1 --steps 6 --eval-every 0 \
  --metrics "$metrics" >"$dir/train.txt" 2>&1 || { cat "$dir/train.txt"; fail "train failed"; }
timeout 60 "$meshtp" calibrate --from-step-log "$metrics" --base "$base" \
  --out "$dir/fitted.json" >"$dir/fit.txt" 2>&1 || { cat "$dir/fit.txt"; fail "calibrate failed"; }
cat "$dir/fit.txt"
grep -qE "^calibrate --from-step-log .*m.jsonl: meshtp --metrics, 2 devices: dp=1 pp=1 tp=2 m=1 recompute=none; step [0-9.e-]+ s \(median of 6 logged iterations, the first dropped\)$" "$dir/fit.txt" ||
  fail "no run line"
grep -qE "^  priced with /calibration/[a-z_]+ = [0-9.]+: [0-9.e-]+ s \([+-][0-9.]+%\)$" "$dir/fit.txt" ||
  fail "no priced line"
grep -qE "^  fitted /calibration/[a-z_]+ = [0-9.e+-]+ \(source range [0-9.]+ … [0-9.]+: (inside|OUTSIDE)\); priced [0-9.e-]+ s, residual [+-][0-9.]+%$" "$dir/fit.txt" ||
  fail "no fitted line"
timeout 60 "$meshtp" plan --topology "$dir/fitted.json" --model tiny --devices 2 >/dev/null 2>&1 ||
  fail "plan cannot read the fitted topology"

# Bad inputs: each one line, exit non-zero, the previous --out untouched.
printf 'previous good file\n' >"$dir/old.json"
refused() {  # refused NAME FILE REGEX
  local out
  if out=$(timeout 60 "$meshtp" calibrate --from-step-log "$2" --base "$base" \
      --out "$dir/old.json" 2>&1); then
    fail "$1: accepted"
  fi
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "$1: not one line: $out"
  grep -qE "$3" <<<"$out" || fail "$1: unexpected message: $out"
  [ "$(cat "$dir/old.json")" = "previous good file" ] || fail "$1: --out changed"
  echo "ok: $1: $out"
}
head -c $(($(wc -c <"$metrics") - 30)) "$metrics" >"$dir/truncated.jsonl"
refused "truncated" "$dir/truncated.jsonl" \
  "^error: .*truncated.jsonl:6: not a JSON object \(the last line is cut short: a truncated file\?\)$"
: >"$dir/empty.jsonl"
refused "no steps" "$dir/empty.jsonl" "^error: .*empty.jsonl: the file is empty: no step was logged$"
sed 's/"version":1/"version":99/' "$metrics" >"$dir/v99.jsonl"
refused "wrong version" "$dir/v99.jsonl" \
  "^error: .*v99.jsonl:1: metrics version 99 is not the one this meshtp reads \(1\)$"
python3 -c "
import json, sys
for line in open(sys.argv[1]):
    row = json.loads(line); row.pop('run', None); print(json.dumps(row))" "$metrics" >"$dir/old-format.jsonl"
refused "no run record" "$dir/old-format.jsonl" \
  "^error: .*old-format.jsonl: no line carries the run's model and layout .*rerun train with this meshtp$"
leftovers=$(ls -A "$dir" | grep '\.tmp' || true)
[ -z "$leftovers" ] || fail "files left behind: $leftovers"
echo "ok: calibrate --from-step-log fitted meshtp's metrics and refused the bad ones"
