#!/usr/bin/env bash
# plan --report with a model file whose path is not UTF-8 (a byte 0xFF): the page is drawn,
# the path shown with U+FFFD, and the command exits 0 — not an unnamed JSON error after all
# the planning. usage: report_non_utf8_path.sh MESHTP MODELS_DIR
set -euo pipefail
meshtp=$1 models=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
model="$work/$(printf 'small\xff').json"
cp "$models/small.json" "$model"
"$meshtp" plan --topology nvlink-network-2 --model "$model" --devices 2 --report "$work/page" \
  > "$work/out.txt" 2> "$work/err.txt" || { echo "FAIL: exit $?: $(cat "$work/err.txt")"; exit 1; }
[ -s "$work/page/index.html" ] && [ -s "$work/page/report.json" ] \
  || { echo "FAIL: no page written"; exit 1; }
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$work/page/report.json" \
  || { echo "FAIL: report.json is not JSON"; exit 1; }
echo "report_non_utf8_path: ok"
