#!/usr/bin/env bash
# calibrate_no_partial_file.sh DIR MESHTP MPIEXEC…: a calibrate run that fails (here: a mesh
# that does not match the ranks, and a directory that does not exist) leaves the previous
# --out file byte for byte as it was and no temporary file beside it.
set -u
dir=$1
meshtp=$2
shift 2
mkdir -p "$dir"
rm -f "$dir"/old.json "$dir"/.old.json.tmp.*
printf 'previous good file\n' >"$dir/old.json"
if timeout 60 "$@" -np 2 "$meshtp" calibrate --mesh 2x2 --out "$dir/old.json" --sizes 4K,8K \
    --seconds 0.01 >"$dir/out.txt" 2>&1; then
  echo "FAIL: calibrate with a mismatched mesh succeeded"; cat "$dir/out.txt"; exit 1
fi
grep -q "error: --mesh 2x2 has 4 ranks but the world has 2" "$dir/out.txt" ||
  { echo "FAIL: unexpected message"; cat "$dir/out.txt"; exit 1; }
[ "$(cat "$dir/old.json")" = "previous good file" ] ||
  { echo "FAIL: the previous file changed"; exit 1; }
if timeout 60 "$@" -np 2 "$meshtp" calibrate --out "$dir/missing/new.json" --sizes 4K,8K \
    --seconds 0.01 >"$dir/out.txt" 2>&1; then
  echo "FAIL: calibrate into a missing directory succeeded"; exit 1
fi
grep -q "error: cannot write '$dir/missing/new.json'" "$dir/out.txt" ||
  { echo "FAIL: unexpected message"; cat "$dir/out.txt"; exit 1; }
[ ! -e "$dir/missing" ] || { echo "FAIL: a directory was created"; exit 1; }
leftovers=$(ls -A "$dir" | grep -v -e '^old.json$' -e '^out.txt$')
[ -z "$leftovers" ] || { echo "FAIL: files left behind: $leftovers"; exit 1; }
echo "ok: failed runs left '$dir/old.json' untouched and wrote nothing"
