#!/usr/bin/env bash
# --report with a python3 first on the PATH that leaves a child holding its output (issue 48,
# "Hangs"): meshtp stops waiting for it after its check timeout (60 s, cli/report_dir.cpp),
# kills its process group — the child too — and goes on to /usr/bin/python3: the page is
# drawn where that one has matplotlib, else one error line naming both. Never a hang.
# usage: report_hung_python.sh MESHTP
set -uo pipefail
meshtp=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
cat >"$work/bin/python3" <<'PY'
#!/bin/sh
sleep 600 &
echo $! >>"$MESHTP_TEST_CHILDREN"
exit 0
PY
chmod +x "$work/bin/python3"
started=$SECONDS
MESHTP_TEST_CHILDREN="$work/children" PATH="$work/bin:$PATH" timeout -k 5 150 \
  "$meshtp" plan --topology pcie-8xa100 --model tiny --report "$work/page" \
  >"$work/out.txt" 2>"$work/err.txt"
rc=$? took=$((SECONDS - started))
fail() { echo "FAIL: $* (exit $rc after $took s): $(cat "$work/err.txt")"; exit 1; }
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "meshtp hung"
[ -s "$work/children" ] || fail "the stand-in python3 never ran"
while read -r pid; do
  # Gone, or a zombie nobody reaped yet: either way not holding the pipe.
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
  [ -z "$state" ] || [ "$state" = Z ] || fail "the child $pid it left is still running ($state)"
done <"$work/children"
if [ "$rc" -eq 0 ]; then
  [ -s "$work/page/index.html" ] || fail "exit 0 but no page"
  echo "report_hung_python: ok (the page drawn by the next python3 after $took s)"
elif [ "$(wc -l <"$work/err.txt")" -eq 1 ] &&
  grep -q "^error: .*python3 did not answer within 60 s" "$work/err.txt" && [ ! -e "$work/page" ]; then
  echo "report_hung_python: ok (refused after $took s, nothing written: $(cut -c1-160 "$work/err.txt"))"
else
  fail "neither a page nor one error line naming the python3 that did not answer"
fi
