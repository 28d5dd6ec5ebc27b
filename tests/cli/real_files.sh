#!/usr/bin/env bash
# real_files.sh MESHTP DIR WORK: every file of the corpus DIR (tests/data/real, its README
# names each one's source) is read by the command that reads it — nccl-tests logs by
# `calibrate --from-nccl-tests --base B`, nvidia-smi matrices by `topo from-nvidia-smi` —
# and either parses (exit 0, the topology written and read back by `topo show`) or is refused
# with one line `error: …` matching DIR/EXPECTED, exit 1, nothing written. Both without MPI:
# no MPI banner, and nothing left in $TMPDIR (a fresh one per run).
set -u
meshtp=$1 dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fails=0 n=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
while IFS='|' read -r file kind base want; do
  file=$(echo $file) kind=$(echo $kind) base=$(echo $base) want=$(sed 's/^ *//;s/ *$//' <<<"$want")
  [ -z "$file" ] || [ "${file:0:1}" = "#" ] && continue
  n=$((n + 1))
  out="$work/${file%.*}.json"
  tmp=$(mktemp -d "$work/tmp.XXXX")
  if [ "$kind" = nccl ]; then
    TMPDIR=$tmp "$meshtp" calibrate --from-nccl-tests "$dir/$file" --base "$base" --out "$out" \
      >"$work/stdout" 2>"$work/stderr"
  else
    TMPDIR=$tmp "$meshtp" topo from-nvidia-smi "$dir/$file" --out "$out" \
      >"$work/stdout" 2>"$work/stderr"
  fi
  rc=$?
  [ -z "$(ls -A "$tmp")" ] || fail "$file: left in \$TMPDIR: $(ls -A "$tmp")"
  ! grep -q -i -e "mpi_abort" -e "orte" -e "prterun" "$work/stderr" || fail "$file: an MPI banner"
  if [ "$want" = ok ]; then
    if [ $rc -ne 0 ] || [ ! -s "$out" ]; then
      fail "$file: exit $rc, expected it to parse: $(cat "$work/stderr")"
    elif ! "$meshtp" topo show "$out" >/dev/null 2>"$work/show"; then
      fail "$file: the topology written does not load: $(cat "$work/show")"
    else
      echo "ok   $file: parsed ($(head -c 160 "$work/stdout" | head -1))"
    fi
  else
    lines=$(wc -l <"$work/stderr")
    if [ $rc -ne 1 ] || [ "$lines" -ne 1 ] || ! grep -qE -- "^error: .*$want" "$work/stderr"; then
      fail "$file: exit $rc, $lines stderr line(s), expected one matching /$want/: $(cat "$work/stderr")"
    elif [ -e "$out" ]; then
      fail "$file: refused, but $out was written"
    else
      echo "ok   $file: refused: $(cut -c1-150 "$work/stderr")"
    fi
  fi
  rm -rf "$tmp"
done <"$dir/EXPECTED"
listed=$(grep -v '^#' "$dir/EXPECTED" | cut -d'|' -f1 | tr -d ' ' | sort)
present=$(ls "$dir" | grep -v -e '^README.md$' -e '^EXPECTED$' | sort)
[ "$listed" = "$present" ] || fail "EXPECTED and the files of $dir differ: $(diff <(echo "$listed") <(echo "$present") | tr '\n' ' ')"
echo "$n files, $fails failures"
[ $fails -eq 0 ]
