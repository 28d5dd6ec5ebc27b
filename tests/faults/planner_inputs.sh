#!/usr/bin/env bash
# planner_inputs.sh MESHTP: the hostile-input catalogue of the commands that run without MPI
# (plan with --emit and --report, topo, calibrate --from-nccl-tests, simulate's driver; cli/
# commands.hpp runs_without_mpi) and of meshtp-gpu's flags (issue 48). Every case is run as a
# user types it — no mpirun — with a fresh, empty $TMPDIR, and must:
#   exit with the status given, print exactly one stderr line `error: …` matching the regex
#   (no MPI banner), write nothing (the output folder stays empty, the good files unchanged)
#   and leave $TMPDIR empty; within 60 s. Cases that must now work (`accept`: once refused or
#   wrongly taken) exit 0 and leave the same nothing behind; an existing --out stays as it was
#   when the command is refused.
set -u
meshtp=$1
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/meshtp-planner-inputs.XXXXXX")
trap 'rm -rf "$work"' EXIT
good="$work/good" outdir="$work/out" bad="$work/bad"
mkdir -p "$good" "$outdir" "$bad"
failures=0 cases=0

cp "$repo/models/tiny.json" "$good/model.json"
cp "$repo/topologies/pcie-8xa100.json" "$good/topology.json"
cp "$repo/tests/data/real/all_reduce_perf_h100_2x8.log" "$good/all_reduce_perf.log"
cp "$repo/tests/data/real/nvidia-smi_pcie_pix_in_pxb.txt" "$good/smi.txt"
# An output that already exists: a refused command leaves it as it was.
printf '{"kept": "as it was"}\n' >"$good/existing.json"
snapshot() { find "$good" -type f -print0 | sort -z | xargs -0 -r sha256sum; }
before=$(snapshot)

# refuse NAME STATUS REGEX ARGS…
refuse() {
  local name=$1 want=$2 regex=$3
  shift 3
  cases=$((cases + 1))
  local tmp
  tmp=$(mktemp -d "$work/tmpdir.XXXX")
  TMPDIR=$tmp timeout -k 5 60 "$@" >"$work/stdout" 2>"$work/stderr"
  local got=$? why=""
  local lines
  lines=$(wc -l <"$work/stderr")
  if [ "$got" -ne "$want" ]; then
    why="exit $got, expected $want"
  elif [ "$lines" -ne 1 ] || ! grep -qE -- "^error: .*$regex" "$work/stderr"; then
    why="stderr is not one line matching /^error: .*$regex/"
  elif [ -n "$(ls -A "$outdir")" ]; then
    why="wrote $(ls -A "$outdir" | tr '\n' ' ')"
  elif [ -n "$(ls -A "$tmp")" ]; then
    why="left in \$TMPDIR: $(ls -A "$tmp" | tr '\n' ' ')"
  elif [ "$(snapshot)" != "$before" ]; then
    why="a good file changed"
  fi
  if [ -z "$why" ]; then
    echo "ok   $name: $(cut -c1-140 "$work/stderr")"
  else
    echo "FAIL $name: $why"
    sed 's/^/     /' "$work/stderr" | head -5
    failures=$((failures + 1))
  fi
  rm -rf "$tmp" "${outdir:?}"/* "${outdir:?}"/.[!.]* 2>/dev/null
}

# accept NAME REGEX ARGS…: a case that must now work (it was refused or went wrong): exit 0,
# stdout matching the regex, no MPI banner, nothing left in $TMPDIR, the good files unchanged.
accept() {
  local name=$1 regex=$2
  shift 2
  cases=$((cases + 1))
  local tmp why=""
  tmp=$(mktemp -d "$work/tmpdir.XXXX")
  TMPDIR=$tmp timeout -k 5 60 "$@" >"$work/stdout" 2>"$work/stderr"
  local got=$?
  if [ "$got" -ne 0 ]; then
    why="exit $got"
  elif ! grep -qE -- "$regex" "$work/stdout"; then
    why="stdout does not match /$regex/"
  elif grep -q -i -e "mpi_abort" -e "orte" -e "prterun" "$work/stderr"; then
    why="an MPI banner"
  elif [ -n "$(ls -A "$tmp")" ]; then
    why="left in \$TMPDIR: $(ls -A "$tmp" | tr '\n' ' ')"
  elif [ "$(snapshot)" != "$before" ]; then
    why="a good file changed"
  fi
  if [ -z "$why" ]; then
    echo "ok   $name: $(grep -m1 -E -- "$regex" "$work/stdout" | cut -c1-140)"
  else
    echo "FAIL $name: $why"
    sed 's/^/     /' "$work/stderr" | head -5
    failures=$((failures + 1))
  fi
  rm -rf "$tmp" "${outdir:?}"/* "${outdir:?}"/.[!.]* 2>/dev/null
}

m=("$meshtp")
out="$outdir/x.json"
# ---- names written into configurations (core/text.hpp) --------------------------------------
python3 - "$good" "$bad" <<'PY'
import json, sys
good, bad = sys.argv[1], sys.argv[2]
model = json.load(open(f"{good}/model.json"))
topo = json.load(open(f"{good}/topology.json"))
def put(name, obj):
    open(f"{bad}/{name}", "w").write(json.dumps(obj))
put("model-newline.json", {**model, "name": "gpt\n--tensor-model-parallel-size 64\n"})
put("model-toml.json", {**model, "name": "x\"]\n[evil]"})
put("model-cr.json", {**model, "name": "a\rb"})
put("model-tab.json", {**model, "name": "a\tb"})
put("model-nul.json", {**model, "name": "a\u0001b"})
put("model-del.json", {**model, "name": "a\u007fb"})
put("topology-newline.json", {**topo, "name": "pcie\n[parallelism]"})
put("topology-level-newline.json", {**topo, "levels": [{**topo["levels"][0], "name": "socket\nx"}] + topo["levels"][1:]})
put("model-precision-int.json", {**model, "precision": 2})
put("one-node.json", {**topo, "name": "one-node", "levels": [{"name": "node", "members": 1, "group_gbps": 25}, {"name": "gpu", "members": 8, "group_gbps": 200}]})
open(f"{bad}/model-latin1.json", "wb").write(json.dumps({**model, "name": "caf_"}).replace("caf_", "caf\\u00e9").encode().replace(b"caf\\u00e9", b"caf\xe9"))
cal = {**topo, "calibration": {"source": "t", "groups": [{"size": 4, "stride": 1, "all_reduce": {"t_launch_us": 1, "l_sync_us": 1, "bw_gbps": 10, "measured": [[1048576, 1e300], [2097152, 2e300]]}}]}}
put("topology-measured-1e300.json", cal)
cal["calibration"]["groups"][0]["all_reduce"]["measured"] = [[1048576, 1e-300], [2097152, 2e-300]]
put("topology-measured-1e-300.json", cal)
PY
refuse "model name with a line break, --emit megatron" 1 "name \"gpt\\\\n--tensor-model-parallel-size 64\\\\n\" holds a control character \(U\+000A\)" \
  "${m[@]}" plan --3d --topology nvswitch-8xa100 --model "$bad/model-newline.json" --emit megatron --emit-file "$out"
refuse "model name breaking TOML, --emit torchtitan" 1 "holds a control character \(U\+000A\)" \
  "${m[@]}" plan --3d --topology nvswitch-8xa100 --model "$bad/model-toml.json" --emit torchtitan
refuse "model name with CR" 1 "holds a control character \(U\+000D\)" "${m[@]}" plan --topology pcie-8xa100 --model "$bad/model-cr.json"
refuse "model name with a tab" 1 "holds a control character \(U\+0009\)" "${m[@]}" plan --topology pcie-8xa100 --model "$bad/model-tab.json"
refuse "model name with U+0001" 1 "holds a control character \(U\+0001\)" "${m[@]}" plan --topology pcie-8xa100 --model "$bad/model-nul.json"
refuse "model name with DEL" 1 "holds a control character \(U\+007F\)" "${m[@]}" plan --topology pcie-8xa100 --model "$bad/model-del.json"
refuse "model JSON not UTF-8" 1 "model-latin1.json" "${m[@]}" plan --topology pcie-8xa100 --model "$bad/model-latin1.json"
refuse "topology name with a line break" 1 "name \"pcie\\\\n\[parallelism\]\" holds a control character" \
  "${m[@]}" plan --topology "$bad/topology-newline.json" --model tiny --emit deepspeed
refuse "topology level name with a line break" 1 "level 0: name \"socket\\\\nx\" holds a control character" \
  "${m[@]}" topo show "$bad/topology-level-newline.json"
refuse "model precision not a string" 1 "precision" "${m[@]}" plan --topology pcie-8xa100 --model "$bad/model-precision-int.json"
refuse "calibrate --name with a line break" 1 "--name \"a\\\\nb\" holds a control character" \
  "${m[@]}" calibrate --from-nccl-tests "$good/all_reduce_perf.log" --base ib-2x8xa100 --name $'a\nb' --out "$out"
refuse "calibrate --name not UTF-8" 1 "--name \"a\\\\uFFFD\" is not UTF-8 text" \
  "${m[@]}" calibrate --from-nccl-tests "$good/all_reduce_perf.log" --base ib-2x8xa100 --name $'a\xff' --out "$out"
refuse "calibrate --name with quotes and a bracket line" 1 "holds a control character" \
  "${m[@]}" calibrate --from-nccl-tests "$good/all_reduce_perf.log" --base ib-2x8xa100 --name $'x"]\n[evil]' --out "$out"
refuse "topo from-nvidia-smi --name with a line break" 1 "--name \"n\\\\nm\" holds a control character" \
  "${m[@]}" topo from-nvidia-smi "$good/smi.txt" --name $'n\nm' --out "$out"
refuse "topo from-nvidia-smi --out with a line break" 1 "--out \".*a\\\\nb.json\" holds a control character" \
  "${m[@]}" topo from-nvidia-smi "$good/smi.txt" --out "$outdir/"$'a\nb.json'
refuse "topo from-nvidia-smi --out not UTF-8" 1 "--out \".*\\\\uFFFD.json\" is not UTF-8 text" \
  "${m[@]}" topo from-nvidia-smi "$good/smi.txt" --out "$outdir/"$'a\xff.json'
refuse "calibrate --out not UTF-8" 1 "--out \".*\\\\uFFFD.json\" is not UTF-8 text" \
  "${m[@]}" calibrate --from-nccl-tests "$good/all_reduce_perf.log" --base ib-2x8xa100 --out "$outdir/"$'b\xfe.json'
cp "$good/all_reduce_perf.log" "$bad/"$'all_reduce_\xff.log'
refuse "calibrate --from-nccl-tests path not UTF-8" 1 "--from-nccl-tests \".*all_reduce_\\\\uFFFD.log\" is not UTF-8 text" \
  "${m[@]}" calibrate --from-nccl-tests "$bad/"$'all_reduce_\xff.log' --base ib-2x8xa100 --out "$out"
refuse "measured curve of 1e300 us" 1 "measured\[0\] \(1048576 bytes\) has 1e\+300 us, outside 0.01 to 1e10 us" \
  "${m[@]}" plan --topology "$bad/topology-measured-1e300.json" --model tiny
refuse "measured curve of 1e-300 us" 1 "has 1e-300 us, outside 0.01 to 1e10 us" \
  "${m[@]}" topo show "$bad/topology-measured-1e-300.json"

# ---- two outputs, one file --------------------------------------------------------------------
refuse "--emit-file X --out X" 1 "--out '$out' and --emit-file '$out' are the same file" \
  "${m[@]}" plan --3d --topology nvswitch-8xa100 --model tiny --emit megatron --emit-file "$out" --out "$out"
refuse "--emit-file ./X --out X (one file, two spellings)" 1 "are the same file" \
  "${m[@]}" plan --3d --topology nvswitch-8xa100 --model tiny --emit megatron --emit-file "$outdir/./x.json" --out "$outdir/../out/x.json"
refuse "--report DIR --emit-file DIR/report.json" 1 "--emit-file '$outdir/report.json' and --report '$outdir/report.json' are the same file" \
  "${m[@]}" plan --3d --topology nvswitch-8xa100 --model tiny --emit deepspeed --emit-file "$outdir/report.json" --report "$outdir"
refuse "--report DIR --out DIR/index.html" 1 "--out '$outdir/index.html' and --report '$outdir/index.html' are the same file" \
  "${m[@]}" plan --topology pcie-8xa100 --model tiny --out "$outdir/index.html" --report "$outdir"

# ---- exports as the framework runs them ---------------------------------------------------------
refuse "--emit megatron --runtime meshtp" 1 "--runtime meshtp with --emit megatron: .*leave --runtime out" \
  "${m[@]}" plan --3d --topology dgx-a100-8x8 --model gpt3-175b --emit megatron --runtime meshtp
refuse "--emit torchtitan of an fp16 model on one replica (fp32 without FSDP)" 1 "torchtitan cannot run the layout .*and no layout it can run fits .*only through FSDP.*in fp32" \
  "${m[@]}" plan --topology pcie-8xa100 --model atp-m4 --devices 8 --emit torchtitan --emit-file "$out"
refuse "--emit fsdp" 1 "unknown framework 'fsdp'" "${m[@]}" plan --3d --topology nvswitch-8xa100 --model tiny --emit fsdp
refuse "--emit-file without --emit" 1 "--emit-file .* needs --emit" "${m[@]}" plan --topology pcie-8xa100 --model tiny --emit-file "$out"
refuse "--emit with --json and no file" 1 "--emit deepspeed prints the configuration, --json the planner's answer" \
  "${m[@]}" plan --3d --topology nvswitch-8xa100 --model tiny --emit deepspeed --json
refuse "--runtime without --3d" 1 "--runtime needs --3d" "${m[@]}" plan --topology pcie-8xa100 --model tiny --runtime megatron
refuse "--runtime foo" 1 "foo" "${m[@]}" plan --3d --topology pcie-8xa100 --model tiny --runtime foo
refuse "--evaluate --mesh auto" 1 "--mesh auto: --evaluate prices one layout" "${m[@]}" plan --3d --evaluate --topology pcie-8xa100 --model tiny --mesh auto
refuse "--evaluate --chunks 1,2" 1 "--evaluate prices one layout, give one chunk count" \
  "${m[@]}" plan --3d --evaluate --topology pcie-8xa100 --model tiny --mesh 8x1 --chunks 1,2
refuse "--evaluate --strategy tp1d --chunks 4 (train runs chunks 4)" 1 "chunks=4 with sequence parallelism \(tp1d\): the planner prices tp1d's collectives unchunked" \
  "${m[@]}" plan --3d --evaluate --topology pcie-8xa100 --model atp-m4 --mesh 8x1 --strategy tp1d --chunks 4
"$meshtp" plan --topology nvlink-network-2 --model tiny --seq 32 --batch 4 --out "$bad/plan.json" >/dev/null
python3 -c "import json, sys; p = json.load(open(sys.argv[1])); p['provenance']['model_shape']['vocab'] = 50257; json.dump(p, open(sys.argv[2], 'w'))" \
  "$bad/plan.json" "$bad/plan-other-vocab.json"
refuse "--plan made for another vocab" 1 "was made for model 'tiny', not this one 'tiny' \(vocab 50257 ≠ 256\)" \
  "${m[@]}" plan --3d --evaluate --topology nvlink-network-2 --model tiny --seq 32 --batch 4 --plan "$bad/plan-other-vocab.json"
refuse "plan --pick 999 --out" 1 "--pick=999 is not a row of the table" "${m[@]}" plan --topology pcie-8xa100 --model tiny --pick 999 --out "$out"
refuse "plan --fc-stationary sideways" 1 "--fc-stationary 'sideways' is none of" "${m[@]}" plan --topology pcie-8xa100 --model tiny --fc-stationary sideways
refuse "plan --explain --3d" 1 "--explain is not available with --3d" "${m[@]}" plan --3d --topology pcie-8xa100 --model tiny --explain
refuse "plan --mesh without --evaluate" 1 "--mesh needs --3d --evaluate" "${m[@]}" plan --topology pcie-8xa100 --model tiny --mesh 8x1
refuse "plan --topology missing" 1 "no-such-topology" "${m[@]}" plan --topology no-such-topology --model tiny
refuse "plan --model missing" 1 "unknown model 'no-such-model'" "${m[@]}" plan --topology pcie-8xa100 --model no-such-model
refuse "plan --devices 0" 105 "--devices: 0 must be an integer ≥ 1" "${m[@]}" plan --topology pcie-8xa100 --model tiny --devices 0
refuse "plan --devices 010 on 8 devices (decimal ten)" 1 "has 8 devices but --devices is 10" "${m[@]}" plan --topology pcie-8xa100 --model tiny --devices 010
refuse "plan --3d --top 0x5" 105 "--top: '0x5' is not a decimal integer" "${m[@]}" plan --3d --topology pcie-8xa100 --model tiny --top 0x5
refuse "plan --out into a missing folder" 1 "cannot write '$outdir/missing/p.json'" "${m[@]}" plan --topology pcie-8xa100 --model tiny --out "$outdir/missing/p.json"
refuse "global flag, then a planner error" 1 "unknown model 'nope'" "${m[@]}" --comm-timeout 5 plan --topology pcie-8xa100 --model nope
refuse "unknown command" 1 "unknown command 'frobnicate'" "${m[@]}" frobnicate

# ---- nccl-tests logs ----------------------------------------------------------------------------
python3 - "$good/all_reduce_perf.log" "$bad" <<'PY'
import re, sys
src, bad = sys.argv[1], sys.argv[2]
text = open(src).read().splitlines()
rows = [i for i, l in enumerate(text) if re.match(r"\s+\d", l)]
def put(name, lines):
    open(f"{bad}/{name}", "w").write("\n".join(lines) + "\n")
def row_with(i, col, value):
    t = text[rows[i]].split()
    t[col] = value
    return "  ".join(t)
l = list(text); l[rows[1]] = row_with(1, 8, "2"); put("all_reduce_wrong.log", l)
l = list(text); l[rows[1]] = row_with(1, 12, "5"); put("all_reduce_wrong_inplace.log", l)
l = list(text); l[-3] = "# Out of bounds values : 7 FAILED"; put("all_reduce_failed.log", l)
put("all_reduce_duplicate.log", text[:rows[-1] + 1] + [text[rows[0]]] + text[rows[-1] + 1:])
l = list(text); l[rows[0]] = row_with(0, 5, "1e-300"); put("all_reduce_tiny_time.log", l)
l = list(text); l[rows[0]] = row_with(0, 5, "1e300"); put("all_reduce_huge_time.log", l)
l = list(text); l[rows[0]] = row_with(0, 5, "0.001"); put("all_reduce_subresolution.log", l)
l = list(text); l[rows[0]] = row_with(0, 1, "4611686018427387904"); put("all_reduce_count_overflow.log", l)
l = list(text); l[rows[0]] = row_with(0, 1, "-4"); put("all_reduce_negative_count.log", l)
l = list(text); l[rows[0]] = row_with(0, 2, "half"); put("all_reduce_two_types.log", l)
l = list(text); l[rows[0]] = row_with(0, 7, "999.00"); put("all_reduce_busbw.log", l)
l = [x for x in text if "Rank" not in x]; put("all_reduce_no_ranks.log", l)
l = list(text); i = next(i for i, x in enumerate(l) if "Rank  3 " in x); l[i] = l[i].replace("Rank  3 ", "Rank  2 "); put("all_reduce_rank_twice.log", l)
l = list(text); i = next(i for i, x in enumerate(l) if "Rank  3 " in x); l[i] = l[i].replace("worker-1", "worker-0"); put("all_reduce_uneven_hosts.log", l)
l = list(text); i = next(i for i, x in enumerate(l) if "Rank  3 " in x); l[i] = l[i].replace("worker-1", "worker\x01one"); put("all_reduce_control_host.log", l)
l = list(text); l.insert(rows[0], "this is not a row"); put("all_reduce_stray_line.log", l)
l = list(text); c = next(i for i, x in enumerate(l) if x.lstrip("# ").startswith("size")); put("all_reduce_row_first.log", l[:3] + [text[rows[0]]] + l[3:])
l = list(text); l[rows[0]] = row_with(0, 1, "12x"); put("all_reduce_bad_count.log", l)
put("broadcast_perf.log", text)
put("all_reduce_empty.log", [])
put("all_reduce_header_only.log", [x for x in text if not re.match(r"\s+\d", x)])
import os
os.makedirs(f"{bad}/all_reduce", exist_ok=True); put("all_reduce/run1.log", text)
open(f"{bad}/all_reduce_latin1_host.log", "wb").write("\n".join(text).replace("worker-0", "w\xe9rker").encode("latin-1") + b"\n")
PY
cal=("${m[@]}" calibrate --base ib-2x8xa100 --out "$out" --from-nccl-tests)
refuse "nccl-tests: #wrong 2 out of place" 1 "#wrong is 2 at 1073741824 bytes" "${cal[@]}" "$bad/all_reduce_wrong.log"
refuse "nccl-tests: #wrong 5 in place" 1 "#wrong is 5 at 1073741824 bytes" "${cal[@]}" "$bad/all_reduce_wrong_inplace.log"
refuse "nccl-tests: Out of bounds FAILED" 1 "nccl-tests reports 'Out of bounds values : 7 FAILED'" "${cal[@]}" "$bad/all_reduce_failed.log"
refuse "nccl-tests: a size twice" 1 "size 536870912 again \(first on line [0-9]+\)" "${cal[@]}" "$bad/all_reduce_duplicate.log"
refuse "nccl-tests: time 1e-300 us" 1 "time 1e-300 us for 536870912 bytes is outside what nccl-tests prints" "${cal[@]}" "$bad/all_reduce_tiny_time.log"
refuse "nccl-tests: time 1e300 us" 1 "time 1e300 us .* is outside what nccl-tests prints" "${cal[@]}" "$bad/all_reduce_huge_time.log"
refuse "nccl-tests: time 0.001 us" 1 "time 0.001 us .* is outside" "${cal[@]}" "$bad/all_reduce_subresolution.log"
refuse "nccl-tests: count × 4 overflows" 1 "count 4611686018427387904 × 4 bytes is more bytes than any log can move" "${cal[@]}" "$bad/all_reduce_count_overflow.log"
refuse "nccl-tests: negative count" 1 "count '-4' is not an element count" "${cal[@]}" "$bad/all_reduce_negative_count.log"
refuse "nccl-tests: two types" 1 "rows of type 'float' after rows of type 'half'" "${cal[@]}" "$bad/all_reduce_two_types.log"
refuse "nccl-tests: busbw disagrees" 1 "busbw 999 GB/s, but size/time" "${cal[@]}" "$bad/all_reduce_busbw.log"
refuse "nccl-tests: no Rank line" 1 "has no '#  Rank N … on HOST …' line" "${cal[@]}" "$bad/all_reduce_no_ranks.log"
refuse "nccl-tests: a rank twice" 1 "rank 2 is listed twice" "${cal[@]}" "$bad/all_reduce_rank_twice.log"
refuse "nccl-tests: hosts of unequal ranks" 1 "host '.*' has [0-9]+ ranks but '.*' has [0-9]+: every host must run as many" "${cal[@]}" "$bad/all_reduce_uneven_hosts.log"
refuse "nccl-tests: a host with a control character" 1 "host \"worker\\\\u0001one\" holds a control character" "${cal[@]}" "$bad/all_reduce_control_host.log"
refuse "nccl-tests: a host not UTF-8" 1 "host \"w\\\\uFFFDrker\" is not UTF-8 text" "${cal[@]}" "$bad/all_reduce_latin1_host.log"
refuse "nccl-tests: a stray line" 1 "'this is not a row' is neither a '#' line nor a result row" "${cal[@]}" "$bad/all_reduce_stray_line.log"
refuse "nccl-tests: a row before the header" 1 "comes before the column header" "${cal[@]}" "$bad/all_reduce_row_first.log"
refuse "nccl-tests: count not a number" 1 "count '12x' is not an element count" "${cal[@]}" "$bad/all_reduce_bad_count.log"
refuse "nccl-tests: broadcast" 1 "does not say which collective it times" "${cal[@]}" "$bad/broadcast_perf.log"
refuse "nccl-tests: the collective only in a folder's name" 1 "all_reduce/run1.log' does not say which collective" "${cal[@]}" "$bad/all_reduce/run1.log"
refuse "nccl-tests: an empty file" 1 "has no '#  Rank N" "${cal[@]}" "$bad/all_reduce_empty.log"
refuse "nccl-tests: no result rows" 1 "has no result rows" "${cal[@]}" "$bad/all_reduce_header_only.log"
refuse "nccl-tests: a missing file" 1 "no-such.log" "${cal[@]}" "$bad/no-such.log"
refuse "nccl-tests: 16 ranks on an 8-device base" 1 "times 16 ranks, which do not divide the 8 devices" \
  "${m[@]}" calibrate --base nvswitch-8xa100 --out "$out" --from-nccl-tests "$good/all_reduce_perf.log"
refuse "nccl-tests: 2 hosts × 8 on a base without 8-device blocks" 1 "has no level whose members are 8 devices" \
  "${m[@]}" calibrate --base nvlink-hdr-4x4 --out "$out" --from-nccl-tests "$good/all_reduce_perf.log"
refuse "nccl-tests: one GPU per host, more hosts than nodes" 1 "spans 2 hosts of one GPU each, but topology 'one-node' has 1 nodes of 8 devices" \
  "${m[@]}" calibrate --base "$bad/one-node.json" --out "$out" --from-nccl-tests "$repo/tests/data/real/all_reduce_perf_v100_1gpu_per_host.log"
refuse "nccl-tests: the same log twice" 1 "both time all_reduce on 16 ranks: give one" \
  "${m[@]}" calibrate --base ib-2x8xa100 --out "$out" --from-nccl-tests "$good/all_reduce_perf.log" "$good/all_reduce_perf.log"

# ---- nvidia-smi topo -m -------------------------------------------------------------------------
python3 - "$good/smi.txt" "$bad" <<'PY'
import sys
src, bad = sys.argv[1], sys.argv[2]
text = open(src).read().splitlines()
def put(name, lines, enc=None):
    data = "\n".join(lines) + "\n"
    open(f"{bad}/{name}", "wb").write(data.encode(enc or "utf-8"))
def cell(row, col, value):
    l = list(text); t = l[row + 1].split("    "); t[col + 1] = value; l[row + 1] = "    ".join(t); return l
put("smi-asymmetric.txt", cell(0, 1, "PXB"))
put("smi-unknown.txt", cell(0, 1, "NV?"))
put("smi-x-off-diagonal.txt", cell(0, 2, " X  "))
put("smi-missing-row.txt", text[:4] + text[5:])
put("smi-no-header.txt", [x for x in text if not x.startswith(("GPU", "\t", " "))])
put("smi-repeated-column.txt", [text[0].replace("GPU7", "GPU6")] + text[1:])
put("smi-out-of-order.txt", [text[0].replace("GPU1 ", "GPU9 ", 1)] + text[1:])
put("smi-latin1.txt", [text[0].replace("CPU Affinity", "CPU Affinit\xe9")] + text[1:], "latin-1")
put("smi-short-row.txt", text[:1] + [" ".join(text[1].split()[:4])] + text[2:])
put("smi-empty.txt", [])
PY
smi=("${m[@]}" topo from-nvidia-smi --out "$out")
refuse "nvidia-smi: asymmetric" 1 "the matrix must be symmetric" "${smi[@]}" "$bad/smi-asymmetric.txt"
refuse "nvidia-smi: unknown entry" 1 "unknown entry 'NV\?'" "${smi[@]}" "$bad/smi-unknown.txt"
refuse "nvidia-smi: X off the diagonal" 1 "is X \(self\) off the diagonal" "${smi[@]}" "$bad/smi-x-off-diagonal.txt"
refuse "nvidia-smi: a missing row" 1 "has no row for GPU3" "${smi[@]}" "$bad/smi-missing-row.txt"
refuse "nvidia-smi: no header" 1 "has no nvidia-smi topo -m header line" "${smi[@]}" "$bad/smi-no-header.txt"
refuse "nvidia-smi: a repeated column" 1 "column 'GPU6' appears twice" "${smi[@]}" "$bad/smi-repeated-column.txt"
refuse "nvidia-smi: GPU columns out of order" 1 "the GPU columns must be GPU0, GPU1, … in order" "${smi[@]}" "$bad/smi-out-of-order.txt"
refuse "nvidia-smi: a line not UTF-8" 1 "the line is not UTF-8 text" "${smi[@]}" "$bad/smi-latin1.txt"
refuse "nvidia-smi: a short row" 1 "row GPU0 has 3 entries but the header" "${smi[@]}" "$bad/smi-short-row.txt"
refuse "nvidia-smi: an empty file" 1 "has no nvidia-smi topo -m header line" "${smi[@]}" "$bad/smi-empty.txt"
refuse "nvidia-smi: NVLink blocks not consecutive" 1 "levels need blocks of consecutive GPUs" "${smi[@]}" "$repo/tests/data/real/vllm_collect_env_b200_link_down.txt"
refuse "nvidia-smi: --nodes 0" 1 "--nodes=0 must be at least 1" "${smi[@]}" "$good/smi.txt" --nodes 0
refuse "nvidia-smi: --nvlink-gbps inf" 1 "must be finite" "${smi[@]}" "$good/smi.txt" --nvlink-gbps inf
refuse "nvidia-smi: --tflops -1" 1 "--tflops=-1 must be positive" "${smi[@]}" "$good/smi.txt" --tflops -1
refuse "nvidia-smi: a missing file" 1 "no-such.txt" "${smi[@]}" "$bad/no-such.txt"

# ---- topo and simulate's driver --------------------------------------------------------------
refuse "topo show: unknown topology" 1 "no-such" "${m[@]}" topo show no-such
refuse "topo show --mesh 3x3" 1 "3x3" "${m[@]}" topo show pcie-8xa100 --mesh 3x3
refuse "simulate --devices 0x8" 105 "--devices: '0x8' is not a decimal integer" "${m[@]}" simulate --topology pcie-8xa100 --model tiny --devices 0x8 --predict-only
refuse "simulate --model missing" 1 "unknown model 'nope'" "${m[@]}" simulate --topology pcie-8xa100 --model nope --devices 8 --predict-only

# ---- parse, validate, then write: an existing output stays as it was ------------------------
existing="$good/existing.json"
refuse "nccl-tests: a host not UTF-8, --out over an existing file" 1 "host \"w\\\\uFFFDrker\" is not UTF-8 text" \
  "${m[@]}" calibrate --base ib-2x8xa100 --out "$existing" --from-nccl-tests "$bad/all_reduce_latin1_host.log"
python3 - "$repo/tests/data/real/vllm_collect_env_h100.txt" "$bad/smi-nic-latin1.txt" <<'PY'
import sys
data = open(sys.argv[1], "rb").read().replace(b"\tNIC3\t", b"\tNIC\xe93\t", 1)
open(sys.argv[2], "wb").write(data)
PY
refuse "nvidia-smi: a NIC column not UTF-8, --out over an existing file" 1 "the line is not UTF-8 text" \
  "${m[@]}" topo from-nvidia-smi "$bad/smi-nic-latin1.txt" --out "$existing"
refuse "topo from-nvidia-smi --name not UTF-8, --out over an existing file" 1 "--name \"s\\\\uFFFD\" is not UTF-8 text" \
  "${m[@]}" topo from-nvidia-smi "$good/smi.txt" --name $'s\xfe' --out "$existing"
refuse "calibrate --name with a line break, --out over an existing file" 1 "holds a control character \(U\+000A\)" \
  "${m[@]}" calibrate --from-nccl-tests "$good/all_reduce_perf.log" --base ib-2x8xa100 --name $'a\nb' --out "$existing"
refuse "--emit-file over an existing file, a model name with a line break" 1 "holds a control character \(U\+000A\)" \
  "${m[@]}" plan --3d --topology nvswitch-8xa100 --model "$bad/model-newline.json" --emit megatron --emit-file "$existing"
refuse "plan --out over an existing file, a model JSON not UTF-8" 1 "model-latin1.json" \
  "${m[@]}" plan --topology pcie-8xa100 --model "$bad/model-latin1.json" --out "$existing"
refuse "topo from-nvidia-smi --out over an existing file, an asymmetric matrix" 1 "the matrix must be symmetric" \
  "${m[@]}" topo from-nvidia-smi "$bad/smi-asymmetric.txt" --out "$existing"

# ---- one GPU per host: the inter-node group, never two GPUs of one box ------------------------
"$meshtp" topo from-nvidia-smi "$repo/tests/data/real/nvidia-smi_dgx1_v100.txt" --out "$bad/dgx1-one-box.json" >/dev/null
"$meshtp" topo from-nvidia-smi "$repo/tests/data/real/nvidia-smi_dgx1_v100.txt" --nodes 2 --node-gbps 12.5 \
  --out "$bad/dgx1-two-nodes.json" >/dev/null
refuse "nccl-tests: one GPU per host on one box (from-nvidia-smi without --nodes)" 1 "spans 2 hosts of one GPU each, but topology 'dgx1-one-box' has 1 nodes of 8 devices \(one level: one node" \
  "${m[@]}" calibrate --base "$bad/dgx1-one-box.json" --out "$out" --from-nccl-tests "$repo/tests/data/real/all_reduce_perf_v100_1gpu_per_host.log"
accept "nccl-tests: one GPU per host on a from-nvidia-smi base of 2 nodes" "^wrote .*/x.json: topology 'dgx1-two-nodes-nccl' \(16 devices\), 1 calibrated group" \
  "${m[@]}" calibrate --base "$bad/dgx1-two-nodes.json" --out "$out" --from-nccl-tests "$repo/tests/data/real/all_reduce_perf_v100_1gpu_per_host.log"
accept "nccl-tests: a bare 'NCCL version' line" "^wrote .*/x.json" \
  "${m[@]}" calibrate --base nvswitch-8xa100 --out "$out" --from-nccl-tests "$repo/tests/data/real/all_reduce_perf_nccl_version.log"
accept "nccl-tests: tags indented by a log collector" "^wrote .*/x.json" \
  "${m[@]}" calibrate --base nvswitch-8xa100 --out "$out" --from-nccl-tests "$repo/tests/data/real/all_reduce_perf_tagged_indented.log"
accept "nvidia-smi: PIX pairs inside PXB quads (vLLM issue 11122)" "^wrote .*/x.json" \
  "${m[@]}" topo from-nvidia-smi "$repo/tests/data/real/nvidia-smi_pcie_pix_in_pxb.txt" --out "$out"
accept "nvidia-smi: a 5-GPU box" "^wrote .*/x.json" \
  "${m[@]}" topo from-nvidia-smi "$repo/tests/data/real/nvidia-smi_5gpu.txt" --out "$out"
accept "nvidia-smi: NV12 priced at the measured 200 GB/s, no GPU said to have 18 links" "NV12 .*more than any GPU has \(at most 18, H100\).*priced at 200 GB/s" \
  "${m[@]}" topo from-nvidia-smi "$repo/tests/data/real/nvidia-smi_dgx_a100.txt" --out "$out"

# ---- no MPI where no rank is needed: $TMPDIR ----------------------------------------------------
# A $TMPDIR that does not exist is not made, by a refusal or by a plan that works.
cases=$((cases + 1))
TMPDIR="$work/no-such-tmp/sub" "$meshtp" plan --topology pcie-8xa100 --model tiny >/dev/null 2>&1
if TMPDIR="$work/no-such-tmp/sub" "$meshtp" plan --topology pcie-8xa100 --model nope >/dev/null 2>&1 ||
  [ -e "$work/no-such-tmp" ]; then
  echo "FAIL a missing \$TMPDIR: made, or the refusal exited 0"
  failures=$((failures + 1))
else
  echo "ok   a missing \$TMPDIR: not made (a plan and a refusal)"
fi
# Ctrl-C while --report draws (a python3 that answers --check, then hangs drawing): the
# interpreter is ended, its temporary directory removed, one error line, exit 130.
cases=$((cases + 1))
tmp=$(mktemp -d "$work/tmpdir.XXXX")
mkdir -p "$work/slow-python"
# The hang is a copy of sleep under this trial's own path, so that looking for it afterwards
# finds this trial's process and no other sleep on the machine.
cp "$(command -v sleep)" "$work/slow-python/draw-forever"
printf '#!/bin/sh\n[ "$2" = --check ] && exit 0\nexec "%s" 300\n' "$work/slow-python/draw-forever" \
  >"$work/slow-python/python3"
chmod +x "$work/slow-python/python3"
(sleep 1; kill -INT "$(cat "$work/pid")") &
TMPDIR=$tmp PATH="$work/slow-python:$PATH" timeout -k 5 60 bash -c 'echo $$ >"$0"; exec "$@"' "$work/pid" \
  "$meshtp" plan --topology pcie-8xa100 --model tiny --report "$outdir/page" >/dev/null 2>"$work/stderr"
got=$?
wait
if [ "$got" -ne 130 ] || [ "$(wc -l <"$work/stderr")" -ne 1 ] ||
  ! grep -q "^error: --report .*: interrupted by signal 2: python3 was ended, nothing written" "$work/stderr"; then
  echo "FAIL Ctrl-C while --report draws: exit $got: $(cat "$work/stderr")"
  failures=$((failures + 1))
elif [ -n "$(ls -A "$tmp")" ] || [ -n "$(ls -A "$outdir")" ] || pgrep -f "$work/slow-python" >/dev/null; then
  echo "FAIL Ctrl-C while --report draws: left $(ls -A "$tmp" "$outdir") or its python3 running"
  failures=$((failures + 1))
else
  echo "ok   Ctrl-C while --report draws: $(cat "$work/stderr"); nothing in \$TMPDIR"
fi
rm -rf "$tmp" "${outdir:?}"/*

# ---- meshtp gpu: integers decimal as typed --------------------------------------------------
gpu="$(dirname "$meshtp")/meshtp-gpu"
refuse "gpu calibrate --repeats 0x10" 105 "--repeats: '0x10' is not a decimal integer" "$gpu" calibrate --out p.json --repeats 0x10
refuse "gpu calibrate --repeats 2^64" 105 "--repeats: '18446744073709551616' is out of range" "$gpu" calibrate --out p.json --repeats 18446744073709551616
refuse "gpu gemm --repeats +3" 105 "--repeats: '\+3' is not a decimal integer" "$gpu" gemm --m 8 --n 8 --k 8 --repeats +3
refuse "gpu gemm --m 1e3" 105 "'1e3' is not a decimal integer" "$gpu" gemm --m 1e3 --n 8 --k 8

echo "$cases cases, $failures failures"
[ "$failures" -eq 0 ]
