#!/usr/bin/env bash
# bad_inputs.sh MESHTP MPIEXEC [GROUP]: the catalogue of hostile inputs across every command
# — flags, topology/model JSON, safetensors, data and checkpoint paths. Each must fail on 2
# ranks with `error: …` naming the value, a non-zero exit within 10 s on every rank (none
# left behind), and leave every good file under $good byte-for-byte unchanged.
# GROUP (flags | files | all, default all) runs part of it.
source "$(dirname "$0")/lib.sh" "$1" "$2"
group=${3:-all}
repo=$(cd "$faults_dir/../.." && pwd)

# The good files: a checkpoint, a topology and a model file, weights, data.
good="$work/good"
mkdir -p "$good"
cp "$work/corpus.txt" "$good/corpus.txt"
cp "$repo/topologies/pcie-8xa100.json" "$good/topology.json"
cp "$repo/models/tiny.json" "$good/model.json"
cp "$repo/tests/data/safetensors/f32_only.safetensors" "$good/weights.safetensors"
next_trial
mpi 2 train "${small[@]}" --steps 2 --checkpoint-every 1 --checkpoint-dir "$good/ckpt" >"$work/good.log" 2>&1 ||
  { echo "could not write the good checkpoint"; cat "$work/good.log"; exit 1; }
# A plan for the training trials' model (tiny, seq 32, batch 4) on 2 ranks.
mpi 1 plan --topology nvlink-network-2 --model tiny --seq 32 --batch 4 --out "$good/plan.json" >"$work/plan.log" 2>&1 ||
  { echo "could not write the good plan"; cat "$work/plan.log"; exit 1; }
t=(--data "$good/corpus.txt" --eval-batches 1)  # + --seq 32 --batch 4 --steps 2 where not under test

# Damaged copies, next to (not in) the good files.
bad="$work/bad"
mkdir -p "$bad/emptydir" "$bad/dangling" "$bad/ckpt-none"
: >"$bad/empty.txt"
head -c 10 "$good/corpus.txt" >"$bad/short.txt"
mkfifo "$bad/fifo"
ln -s /nonexistent/file.txt "$bad/dangling/a.txt"
echo "not a directory" >"$bad/afile"
python3 - "$good" "$bad" <<'EOF'
import json, struct, sys
good, bad = sys.argv[1], sys.argv[2]
def put(name, text):
    open(f"{bad}/{name}", "w").write(text)
topo = json.load(open(f"{good}/topology.json"))
model = json.load(open(f"{good}/model.json"))
put("deep.json", "[" * 100000 + "]" * 100000)
put("truncated-topology.json", open(f"{good}/topology.json").read()[:300])
put("garbage.json", "\x00\x01binary\xff garbage")
put("typo-topology.json", json.dumps({**topo, "levles": topo["levels"]}))
put("negative-bw.json", json.dumps({**topo, "levels": [{**topo["levels"][0], "group_gbps": -5}] + topo["levels"][1:]}))
put("huge-number.json", json.dumps(topo).replace('"launch_us": 20', '"launch_us": 1e999'))
put("nan-topology.json", json.dumps(topo).replace('"tflops": 250', '"tflops": "NaN"'))
put("zero-members.json", json.dumps({**topo, "levels": [{**topo["levels"][0], "members": 0}] + topo["levels"][1:]}))
put("negative-layers.json", json.dumps({**model, "layers": -2}))
put("string-hidden.json", json.dumps({**model, "hidden": "sixty-four"}))
put("heads-not-dividing.json", json.dumps({**model, "heads": 5}))
put("huge-model.json", json.dumps({**model, "layers": 2**31}))
# Round 2 (issue 28): keys given twice, integers past 32 and 63 bits, plans for another model.
put("dup-model.json", json.dumps(model)[:-1] + ', "hidden": 128}')
put("dup-topology.json", json.dumps(topo).replace('"members": 2,', '"members": 2, "members": 4,', 1))
put("members-2^32.json", json.dumps({**topo, "levels": [{**topo["levels"][0], "members": 2**32 + 1}] + topo["levels"][1:]}))
put("layers-2^63.json", json.dumps({**model, "layers": 2**63 + 1}))
plan = json.load(open(f"{good}/plan.json"))
prov, shape = plan["provenance"], plan["provenance"]["model_shape"]
put("plan-dup.json", json.dumps(plan)[:-1] + ', "dp": 2}')
put("plan-dp-2^32.json", json.dumps({**plan, "dp": 2**32 + 1}))
put("plan-dp-2^31.json", json.dumps({**plan, "dp": 2**31}))
put("plan-dp-2^63.json", json.dumps({**plan, "dp": 2**63}))
put("plan-mesh-2^32.json", json.dumps({**plan, "mesh": [2**32 + 2, 1]}))
put("plan-shape-negative.json", json.dumps({**plan, "provenance": {**prov, "model_shape": {**shape, "hidden": -64}}}))
put("plan-shape-typo.json", json.dumps({**plan, "provenance": {**prov, "model_shape": {**shape, "hiden": 64}}}))
put("plan-other-model.json", json.dumps({**plan, "provenance": {**prov, "model": "small", "model_shape": {**shape, "hidden": 256, "heads": 8}}}))
put("plan-other-seq.json", json.dumps({**plan, "provenance": {**prov, "model_shape": {**shape, "seq": 64}}}))
w = open(f"{good}/weights.safetensors", "rb").read()
n = struct.unpack("<Q", w[:8])[0]
open(f"{bad}/truncated.safetensors", "wb").write(w[: len(w) - 5])
open(f"{bad}/huge-length.safetensors", "wb").write(struct.pack("<Q", 2**63) + w[8:])
deep = ("[" * 50000 + "]" * 50000).encode()
open(f"{bad}/deep-header.safetensors", "wb").write(struct.pack("<Q", len(deep)) + deep)
hdr = json.loads(w[8 : 8 + n])
name = next(k for k in hdr if k != "__metadata__")
hdr[name]["dtype"] = "I64"
h = json.dumps(hdr).encode()
open(f"{bad}/wrong-dtype.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + w[8 + n :])
hdr[name]["dtype"] = "F32"
h = (json.dumps(hdr)[:-1] + ', "' + name + '": ' + json.dumps(hdr[name]) + "}").encode()
open(f"{bad}/dup-tensor.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + w[8 + n :])
EOF
mkdir -p "$bad/ckpt-truncated" "$bad/ckpt-other"
head -c 100000 "$good/ckpt/checkpoint-00000002.safetensors" >"$bad/ckpt-truncated/checkpoint-00000002.safetensors"
cp "$good/ckpt/checkpoint-00000002.safetensors" "$bad/ckpt-other/checkpoint-00000002.safetensors"

if [ "$group" = all ] || [ "$group" = flags ]; then
  # ---- train: flags --------------------------------------------------------------------
  expect_error "train --dp 0" 2 "error: --dp: 0 must be an integer ≥ 1" train "${t[@]}" --seq 32 --batch 4 --steps 2 --dp 0
  expect_error "train --dp -2" 2 "error: --dp: -2 must be" train "${t[@]}" --seq 32 --batch 4 --steps 2 --dp -2
  expect_error "train --mesh 0x2" 2 "error: bad mesh '0x2'" train "${t[@]}" --seq 32 --batch 4 --steps 2 --mesh 0x2
  expect_error "train --mesh 2x" 2 "error: bad mesh '2x'" train "${t[@]}" --seq 32 --batch 4 --steps 2 --mesh 2x
  expect_error "train --mesh 2x2 on 2 ranks" 2 "error: the layout dp=1 × pp=1 × mesh 2x2 = 4 ranks, but there are 2" train "${t[@]}" --seq 32 --batch 4 --steps 2 --mesh 2x2
  expect_error "train --steps 0" 2 "error: --steps=0 must be ≥ 1" train "${t[@]}" --seq 32 --batch 4 --steps 0
  expect_error "train --lr inf" 2 "error: --lr=inf must be a finite number" train "${t[@]}" --seq 32 --batch 4 --steps 2 --lr inf
  expect_error "train --lr -1" 2 "error: --lr=-1 must be" train "${t[@]}" --seq 32 --batch 4 --steps 2 --lr -1
  expect_error "train --lr nan" 2 "error: --lr=nan must be" train "${t[@]}" --seq 32 --batch 4 --steps 2 --lr nan
  expect_error "train --min-lr above --lr" 2 "error: --min-lr=1 must be a finite number in \[0, 0.001\]" train "${t[@]}" --seq 32 --batch 4 --steps 2 --min-lr 1
  expect_error "train --seq 0" 2 "error: --seq: 0 must be" train "${t[@]}" --batch 4 --steps 2 --seq 0
  expect_error "train --seq 2^40" 2 "error: --seq=1099511627776 is too large" train "${t[@]}" --batch 4 --steps 2 --seq 1099511627776
  expect_error "train --batch -8" 2 "error: --batch: -8 must be" train "${t[@]}" --seq 32 --steps 2 --batch -8
  expect_error "train --batch 3 with --dp 2" 2 "error: batch=3 does not split into dp=2 × microbatches=1" train "${t[@]}" --seq 32 --steps 2 --batch 3 --dp 2 --mesh 1x1
  expect_error "train --seed -1" 2 "error: --seed: '-1' must not be negative" train "${t[@]}" --seq 32 --batch 4 --steps 2 --seed -1
  expect_error "train --seed 2^64" 2 "error: --seed: '18446744073709551616' is out of range \\(at most 18446744073709551615\\)" train "${t[@]}" --seq 32 --batch 4 --steps 2 --seed 18446744073709551616
  expect_error "train --checkpoint-every -1" 2 "error: --checkpoint-every=-1 must be ≥ 0" train "${t[@]}" --seq 32 --batch 4 --steps 2 --checkpoint-every -1
  expect_error "train --keep 0" 2 "error: --keep=0 must be ≥ 1" train "${t[@]}" --seq 32 --batch 4 --steps 2 --keep 0
  expect_error "train --val-fraction 1.5" 2 "error: --val-fraction=1.5 must be" train "${t[@]}" --seq 32 --batch 4 --steps 2 --val-fraction 1.5
  expect_error "train --eval-batches 0" 2 "error: --eval-batches=0 must be ≥ 1" train --data "$good/corpus.txt" --eval-batches 0
  expect_error "train --beta2 1" 2 "error: --beta2=1 must be a finite number in \[0, 1\)" train "${t[@]}" --seq 32 --batch 4 --steps 2 --beta2 1
  expect_error "train --eps 0" 2 "error: --eps=0 must be" train "${t[@]}" --seq 32 --batch 4 --steps 2 --eps 0
  expect_error "train --grad-clip -1" 2 "error: --grad-clip=-1 must be" train "${t[@]}" --seq 32 --batch 4 --steps 2 --grad-clip -1
  expect_error "train --weight-decay inf" 2 "error: --weight-decay=inf must be" train "${t[@]}" --seq 32 --batch 4 --steps 2 --weight-decay inf
  expect_error "train --warmup -3" 2 "error: --warmup=-3 must be ≥ 0" train "${t[@]}" --seq 32 --batch 4 --steps 2 --warmup -3
  expect_error "train --chunks 0" 2 "error: --chunks: 0 must be an integer ≥ 1" train "${t[@]}" --seq 32 --batch 4 --steps 2 --chunks 0
  expect_error "train --strategy foo" 2 "error: unknown strategy 'foo'" train "${t[@]}" --seq 32 --batch 4 --steps 2 --strategy foo
  expect_error "train --slices 0" 2 "error: --slices: 0 must be" train "${t[@]}" --seq 32 --batch 4 --steps 2 --slices 0
  expect_error "train --model nonexistent" 2 "error: unknown model 'nonexistent'" train "${t[@]}" --seq 32 --batch 4 --steps 2 --model nonexistent
  expect_error "train --mesh bogus" 2 "error: bad mesh 'bogus': expected positive sizes joined by 'x'" train "${t[@]}" --seq 32 --batch 4 --steps 2 --mesh bogus
  expect_error "train --mesh auto without --topology" 2 "error: --mesh auto needs --topology" train "${t[@]}" --seq 32 --batch 4 --steps 2 --mesh auto
  expect_error "train --strategies without --mesh auto" 2 "error: --strategies atp needs --mesh auto" train "${t[@]}" --seq 32 --batch 4 --steps 2 --strategies atp
  expect_error "train --mesh auto --strategies foo" 2 "error: unknown strategy 'foo'" train "${t[@]}" --seq 32 --batch 4 --steps 2 --mesh auto --topology nvlink-network-2 --strategies foo
  expect_error "train --comm-timeout -1" 2 "error: --comm-timeout=-1 must be" train "${t[@]}" --seq 32 --batch 4 --steps 2 --comm-timeout -1
  expect_error "train --skip-nonfinite -1" 2 "error: --skip-nonfinite=-1 must be ≥ 0" train "${t[@]}" --seq 32 --batch 4 --steps 2 --skip-nonfinite -1
  expect_error "train --trace-steps 0" 2 "error: --trace-steps=0 must be ≥ 1" train "${t[@]}" --seq 32 --batch 4 --steps 2 --trace-steps 0
  expect_error "train --stop-after -1" 2 "error: --stop-after=-1 must be ≥ 0" train "${t[@]}" --seq 32 --batch 4 --steps 2 --stop-after -1
  expect_error "train --steps abc" 2 "error: --steps: 'abc' is not a decimal integer" train "${t[@]}" --seq 32 --batch 4 --steps abc
  expect_error "train --model atp-m4 (memory)" 2 "error: model 'atp-m4' .*needs ~[0-9.]+ GiB per rank" train --model atp-m4
  expect_error "train --seq 100000 (memory)" 2 "error: model 'tiny' with --batch=4 --seq=100000 .*needs ~[0-9.]+ GiB per rank" \
    train --data "$good/corpus.txt" --batch 4 --seq 100000
  # ---- other commands: flags ---------------------------------------------------------
  expect_error "plan --devices 0" 2 "error: --devices: 0 must be" plan --topology nvlink-network-2 --model tiny --devices 0
  expect_error "plan --devices 3 on a 2-device topology" 2 "error: topology 'nvlink-network-2' has 2 devices but --devices is 3" \
    plan --topology nvlink-network-2 --model tiny --devices 3
  expect_error "plan --batch 0" 2 "error: --batch: 0 must be" plan --topology nvlink-network-2 --model tiny --batch 0
  expect_error "plan --strategies foo" 2 "error: .*'foo'" plan --topology nvlink-network-2 --model tiny --strategies foo
  expect_error "block --heads -4" 2 "error: --heads: -4 must be" block --weights "$good/weights.safetensors" \
    --input "$good/weights.safetensors" --grad-output "$good/weights.safetensors" --out "$work/o.safetensors" --mesh 2x1 --heads -4
  expect_error "topo show --mesh 0x2" 2 "error: bad mesh '0x2'" topo show nvlink-network-2 --mesh 0x2
  expect_error "topo show nvlink-network-0" 2 "error: .*nvlink-network-0" topo show nvlink-network-0
  expect_error "bench collectives --sizes 0" 2 "error: bad size '0'" bench collectives --sizes 0
  expect_error "bench collectives --mesh 3x3" 2 "error: mesh 3x3 has 9 ranks but the world has 2" bench collectives --mesh 3x3
  expect_error "bench collectives --seconds -1" 2 "error: --seconds=-1 must be" bench collectives --seconds -1
  expect_error "bench layer --heads -4" 2 "error: --heads: -4 must be an integer ≥ 1" bench layer --hidden 64 --heads -4 --seq 8 --batch 2 --layers 1 --mesh 2x1
  expect_error "bench gemm --shapes 0x1x1" 2 "error: bad --shapes item '0x1x1'" bench gemm --shapes 0x1x1
  expect_error "bench gemm2d --m 0" 2 "error: GeMM sizes must be positive, got m=0" bench gemm2d --m 0 --n 8 --k 8 --mesh 1x2
  expect_error "calibrate --mesh 5" 2 "error: --mesh 5 is not a 2D mesh" calibrate --mesh 5 --out "$work/cal.json"
  # calibrate --from-nccl-tests and topo from-nvidia-smi (issue 25): their flags.
  ar_log="$repo/tests/plan/data/nccl-tests/all_reduce_perf.log"
  dgx_smi="$repo/tests/topo/data/nvidia-smi/dgx-a100.txt"
  expect_error "calibrate --from-nccl-tests without --base" 2 "error: --from-nccl-tests needs --base TOPOLOGY" \
    calibrate --from-nccl-tests "$ar_log" --out "$work/cal.json"
  expect_error "calibrate --from-nccl-tests --repeats" 2 "error: --repeats sets what calibrate measures; with --from-nccl-tests nothing is measured" \
    calibrate --from-nccl-tests "$ar_log" --base nvswitch-8xa100 --repeats 2 --out "$work/cal.json"
  expect_error "calibrate --min-bytes without --from-nccl-tests" 2 "error: --min-bytes needs --from-nccl-tests" \
    calibrate --min-bytes 1M --out "$work/cal.json"
  expect_error "calibrate --from-nccl-tests --min-bytes 0" 2 "error: --min-bytes: bad size '0'" \
    calibrate --from-nccl-tests "$ar_log" --base nvswitch-8xa100 --min-bytes 0 --out "$work/cal.json"
  expect_error "calibrate --from-nccl-tests --min-bytes past the log" 2 "error: '.*all_reduce_perf.log': 0 distinct size\(s\) of at least 17179869184 bytes \(--min-bytes\), the fit needs 2" \
    calibrate --from-nccl-tests "$ar_log" --base nvswitch-8xa100 --min-bytes 16G --out "$work/cal.json"
  expect_error "calibrate --from-nccl-tests, 16 ranks on an 8-device --base" 2 "error: '.*all_reduce_perf_2x8.log' times 16 ranks, which do not divide the 8 devices of topology 'nvswitch-8xa100'" \
    calibrate --from-nccl-tests "$repo/tests/plan/data/nccl-tests/all_reduce_perf_2x8.log" --base nvswitch-8xa100 --out "$work/cal.json"
  expect_error "topo from-nvidia-smi --nodes without --node-gbps" 2 "error: --nodes 2 needs --node-gbps G" \
    topo from-nvidia-smi "$dgx_smi" --nodes 2 --out "$work/smi.json"
  expect_error "topo from-nvidia-smi --node-gbps without --nodes" 2 "error: --node-gbps needs --nodes N" \
    topo from-nvidia-smi "$dgx_smi" --node-gbps 25 --out "$work/smi.json"
  expect_error "topo from-nvidia-smi --pcie-gbps -1" 2 "error: NVLink 50 GB/s and PCIe -1 GB/s must be positive" \
    topo from-nvidia-smi "$dgx_smi" --pcie-gbps -1 --out "$work/smi.json"
  expect_error "topo from-nvidia-smi --memory-gib 0" 2 "error: --memory-gib=0 must be positive" \
    topo from-nvidia-smi "$dgx_smi" --memory-gib 0 --out "$work/smi.json"
  expect_error "unknown command" 2 "error: unknown command 'frobnicate'" frobnicate
  # ---- numbers: decimal as typed, in range (cli/flag_checks.hpp require_decimal_integers) --
  # 010 is ten, not octal eight; hex, a '+' and 64-bit overflow are refused naming the text.
  expect_error "simulate --devices 010 (decimal ten)" 1 "error: topology 'pcie-8xa100' has 8 devices but --devices is 10" \
    simulate --topology pcie-8xa100 --model tiny --devices 010 --predict-only
  expect_error "simulate --devices 0x8" 1 "error: --devices: '0x8' is not a decimal integer" \
    simulate --topology pcie-8xa100 --model tiny --devices 0x8 --predict-only
  expect_error "simulate --devices +2" 1 "error: --devices: '\\+2' is not a decimal integer" \
    simulate --topology pcie-8xa100 --model tiny --devices +2 --predict-only
  expect_error "simulate --devices 2^67" 1 "error: --devices: '147573952589676412928' is out of range" \
    simulate --topology pcie-8xa100 --model tiny --devices 147573952589676412928 --predict-only
  expect_error "train --warmup 0x10" 2 "error: --warmup: '0x10' is not a decimal integer" train "${t[@]}" --seq 32 --batch 4 --steps 2 --warmup 0x10
  expect_error "train --steps 2^63" 2 "error: --steps: '9223372036854775808' is out of range \\(at most 9223372036854775807\\)" \
    train "${t[@]}" --seq 32 --batch 4 --steps 9223372036854775808
  expect_error "train --dp 2^32+1" 2 "error: --dp: '4294967297' is out of range for this flag" train "${t[@]}" --seq 32 --batch 4 --steps 2 --dp 4294967297
  expect_error "plan --devices 0x2" 2 "error: --devices: '0x2' is not a decimal integer" plan --topology nvlink-network-2 --model tiny --devices 0x2
  expect_error "bench layer --seq 1e3" 2 "error: --seq: '1e3' is not a decimal integer" bench layer --hidden 64 --heads 4 --seq 1e3 --batch 2 --layers 1 --mesh 2x1
  # ---- round 2 (issue 28): numbers, empty values, real causes, simulate's flags ------------
  expect_error "train --seed +5" 2 "error: --seed: '\+5' is not a decimal integer" train "${t[@]}" --seq 32 --batch 4 --steps 2 --seed +5
  expect_error "train --seed 0x10" 2 "error: --seed: '0x10' is not a decimal integer" train "${t[@]}" --seq 32 --batch 4 --steps 2 --seed 0x10
  expect_error "train --keep 1e3" 2 "error: --keep: '1e3' is not a decimal integer" train "${t[@]}" --seq 32 --batch 4 --steps 2 --keep 1e3
  expect_error "train --steps -0" 2 "error: --steps=0 must be ≥ 1" train "${t[@]}" --seq 32 --batch 4 --steps -0
  expect_error "train --batch 2^31" 2 "error: --batch: '2147483648' is out of range|error: --batch=2147483648" train "${t[@]}" --seq 32 --steps 2 --batch 2147483648
  expect_error "train --microbatches 2^32+1" 2 "error: --microbatches: '4294967297' is out of range for this flag" \
    train "${t[@]}" --seq 32 --batch 4 --steps 2 --microbatches 4294967297
  expect_error "plan --devices 2^64" 2 "error: --devices: '18446744073709551616' is out of range" plan --topology nvlink-network-2 --model tiny --devices 18446744073709551616
  expect_error "plan --3d --top 0x5" 2 "error: --top: '0x5' is not a decimal integer" plan --3d --topology nvlink-network-2 --model tiny --top 0x5
  expect_error "simulate --seq 08x" 1 "error: --seq: '08x' is not a decimal integer" simulate --topology pcie-8xa100 --model tiny --devices 8 --seq 08x --predict-only
  expect_error "train --checkpoint-dir ''" 2 "error: --checkpoint-dir: the value is empty" train "${t[@]}" --seq 32 --batch 4 --steps 2 --checkpoint-dir ""
  expect_error "train --metrics ''" 2 "error: --metrics: the value is empty" train "${t[@]}" --seq 32 --batch 4 --steps 2 --metrics ""
  expect_error "train --data ''" 2 "error: --data: the value is empty" train --data "" --seq 32 --batch 4 --steps 2
  expect_error "plan --out ''" 2 "error: --out: the value is empty" plan --topology nvlink-network-2 --model tiny --out ""
  expect_error "simulate --keep ''" 1 "error: --keep: the value is empty" simulate --topology pcie-8xa100 --model tiny --devices 8 --keep ""
  expect_error "train --min-lr above a given --lr" 2 "error: --min-lr=0.01 must be a finite number in \[0, 0.005\] \(at most --lr\)" \
    train "${t[@]}" --seq 32 --batch 4 --steps 2 --lr 0.005 --min-lr 0.01
  expect_error "plan --out, nothing feasible" 2 "error: --out: no candidate is feasible \(the first, .*needs [0-9.]+ GiB per rank but the device has 80 GiB\); name a row of the table with --pick R" \
    plan --topology nvlink-network-2 --model gpt3-175b --out "$work/none.json"
  expect_error "plan --explain, nothing feasible" 2 "error: --explain: no candidate is feasible .*--explain-rank R" \
    plan --topology nvlink-network-2 --model gpt3-175b --explain
  expect_error "plan --pick -1" 2 "error: --pick=-1 is not a row of the table" plan --topology nvlink-network-2 --model tiny --out "$work/p.json" --pick -1
  expect_error "plan --3d --out, nothing divides" 2 "error: --out: no layout splits model 'tiny' over 7 devices: dp must divide the batch \(3\)" \
    plan --3d --topology nvlink-network-7 --model tiny --batch 3 --out "$work/p.json"
  expect_error "plan --3d --out, nothing fits" 2 "error: --out: no layout of 'gpt3-175b' fits 80 GiB per device on 'nvlink-network-2'" \
    plan --3d --topology nvlink-network-2 --model gpt3-175b --out "$work/p.json"
  # plan --3d --evaluate / --runtime (issue 22 item 5): one layout priced, named by the layout flags.
  ev=(plan --3d --evaluate --topology nvswitch-8xa100 --model korthikanti-22b)
  expect_error "plan --evaluate without --3d" 2 "error: --evaluate needs --3d" plan --evaluate --topology nvswitch-8xa100 --model tiny
  expect_error "plan --runtime without --3d" 2 "error: --runtime needs --3d" plan --topology nvswitch-8xa100 --model tiny --runtime megatron
  expect_error "plan --3d --pp without --evaluate" 2 "error: --pp needs --3d --evaluate" plan --3d --topology nvswitch-8xa100 --model tiny --pp 2
  expect_error "plan --3d --runtime megatron-2019" 2 "error: unknown runtime 'megatron-2019' \(valid: meshtp, megatron, deepspeed, megatron-2021\)" \
    plan --3d --topology nvswitch-8xa100 --model tiny --runtime megatron-2019
  expect_error "plan --evaluate --runtime deepspeed interleaved" 2 "error: virtual stages=2 \(interleaved\): DeepSpeed's pipeline engine runs one stage per pipeline rank" \
    "${ev[@]}" --pp 2 --microbatches 4 --mesh 4x1 --schedule interleaved:2 --runtime deepspeed
  expect_error "plan --evaluate dp·pp·tp ≠ devices" 2 "error: the layout dp=2 × pp=1 × mesh 8x1 = 16 ranks, but there are 8" "${ev[@]}" --dp 2 --mesh 8x1
  expect_error "plan --evaluate tp not dividing heads" 2 "error: heads=64 of 'korthikanti-22b' are not divisible by tp=3" \
    plan --3d --evaluate --topology nvlink-network-3 --model korthikanti-22b
  expect_error "plan --evaluate virtual stages not dividing layers/pp" 2 "error: layers=48 of 'korthikanti-22b' do not split into pp=2 × virtual stages=5" \
    "${ev[@]}" --pp 2 --microbatches 4 --schedule interleaved:5 --batch 4
  expect_error "plan --evaluate microbatches not dividing the batch" 2 "error: batch=4 does not split into dp=1 × microbatches=3" "${ev[@]}" --microbatches 3
  expect_error "plan --evaluate megatron-2021 ZeRO-1" 2 "error: zero=1: the megatron-2021 runtime \(Narayanan et al. 2021\) has no distributed optimizer" \
    "${ev[@]}" --dp 2 --zero 1 --runtime megatron-2021
  expect_error "plan --evaluate --top" 2 "error: --top is not available with --evaluate" "${ev[@]}" --top 3
  # plan --emit (issue 25 item 1): a framework's configuration of the layout.
  expect_error "plan --emit unknown framework" 2 "error: unknown framework 'fsdp' \(valid: megatron, torchtitan, deepspeed\)" \
    plan --3d --topology nvswitch-8xa100 --model tiny --emit fsdp
  expect_error "plan --emit with --json, no --emit-file" 2 "error: --emit megatron prints the configuration, --json the planner's answer: give --emit-file FILE" \
    plan --3d --topology nvswitch-8xa100 --model tiny --emit megatron --json
  expect_error "plan --emit with --explain, no --emit-file" 2 "error: --emit torchtitan prints the configuration, --explain the planner's answer" \
    plan --topology nvswitch-8xa100 --model tiny --emit torchtitan --explain
  expect_error "plan --emit-file without --emit" 2 "error: --emit-file $work/e.toml needs --emit megatron\|torchtitan\|deepspeed" \
    plan --3d --topology nvswitch-8xa100 --model tiny --emit-file "$work/e.toml"
  expect_error "plan --3d --emit, nothing fits" 2 "error: --emit: no layout of 'gpt3-175b' fits 80 GiB per device on 'nvlink-network-2'" \
    plan --3d --topology nvlink-network-2 --model gpt3-175b --emit deepspeed
  expect_error "plan --emit, nothing feasible" 2 "error: --emit: no candidate is feasible .*; name a row of the table with --pick R" \
    plan --topology nvlink-network-2 --model gpt3-175b --emit megatron
  expect_error "topo show --emit" 2 "error: The following arguments were not expected: megatron --emit" topo show nvlink-network-2 --emit megatron
  expect_error "simulate --chunks without --mesh" 1 "error: --chunks needs --mesh d1xd2" simulate --topology pcie-8xa100 --model tiny --devices 8 --chunks 2 --predict-only
  expect_error "simulate --recompute without --mesh" 1 "error: --recompute needs --mesh d1xd2" simulate --topology pcie-8xa100 --model tiny --devices 8 --recompute full --predict-only
  expect_error "simulate --sequence-parallel without --mesh" 1 "error: --sequence-parallel needs --mesh d1xd2" \
    simulate --topology pcie-8xa100 --model tiny --devices 8 --sequence-parallel --predict-only
  expect_error "simulate --m -5" 1 "error: --m: -5 must be an integer ≥ 1" simulate --topology pcie-8xa100 --model tiny --devices 8 --what gemm2d --m -5 --predict-only
  expect_error "simulate --k 0" 1 "error: --k: 0 must be an integer ≥ 1" simulate --topology pcie-8xa100 --model tiny --devices 8 --what gemm2d --k 0 --predict-only
  expect_error "simulate --what bogus" 1 "error: unknown --what 'bogus'" simulate --topology pcie-8xa100 --model tiny --devices 8 --what bogus --predict-only
  expect_error "simulate --sizes 3" 1 "error: .*message of 3 bytes is not a whole number of floats per rank" \
    simulate --topology pcie-8xa100 --model tiny --devices 8 --what collectives --sizes 3 --predict-only
  expect_error "simulate --mesh and --top" 1 "error: give one layout \(--mesh or --plan\) or --top K, not both" \
    simulate --topology pcie-8xa100 --model tiny --devices 8 --mesh 2x4 --top 2 --predict-only
  expect_error "simulate under mpirun" 2 "error: meshtp simulate launches its own simulation: run it without mpirun \(got 2 ranks\)" \
    simulate --topology pcie-8xa100 --model tiny --devices 8 --predict-only
  expect_error "simulate --what pipeline without a layout" 1 "error: --what pipeline simulates one layout: give it with --mesh d1xd2" \
    simulate --topology pcie-8xa100 --model tiny --devices 8 --what pipeline --predict-only
  expect_error "simulate --what layer with --pp" 1 "error: --what layer runs one tensor-parallel mesh: dp=1 and pp=4 need --what pipeline" \
    simulate --topology pcie-8xa100 --model tiny --layers 4 --devices 8 --mesh 2x1 --pp 4 --predict-only
  expect_error "simulate --fold-layers without a pipeline" 1 "error: folding layers is for --what pipeline, not layer" \
    simulate --topology pcie-8xa100 --model tiny --devices 8 --mesh 8x1 --fold-layers --predict-only
  expect_error "simulate --fold-layers --values" 1 "error: --fold-layers charges a stage's later blocks the first block's time, which only charged mode does; --values computes every block" \
    simulate --topology pcie-8xa100 --model tiny --layers 8 --devices 8 --what pipeline --mesh 2x1 --pp 4 --microbatches 4 --values --fold-layers
  expect_error "simulate --what pipeline, interleaved m % pp" 1 "error: .*interleaved.*microbatches=3.*pp=4" \
    simulate --topology pcie-8xa100 --model tiny --layers 8 --devices 8 --what pipeline --mesh 2x1 --pp 4 --microbatches 3 --schedule interleaved:2 --batch 24 --predict-only
  expect_error "simulate a layout that does not fit" 1 "error: megatron 8x1 chunks=1 does not fit in device memory, as \`meshtp plan\` marks it: it needs [0-9.]+ GiB per rank but the device has 80 GiB; --ignore-memory simulates it anyway" \
    simulate --topology pcie-8xa100 --model gpt3-175b --devices 8 --mesh 8x1
fi

if [ "$group" = all ] || [ "$group" = files ]; then
  # ---- data ----------------------------------------------------------------------------
  expect_error "data missing" 2 "error: data '$bad/missing.txt' does not exist" train --data "$bad/missing.txt"
  expect_error "data empty" 2 "error: data '$bad/empty.txt' is empty" train --data "$bad/empty.txt"
  expect_error "data too short" 2 "error: data '$bad/short.txt' has 10 bytes: too short" train --data "$bad/short.txt" --seq 32
  expect_error "data FIFO" 2 "error: data '$bad/fifo' is not a regular file" train --data "$bad/fifo"
  expect_error "data dir, dangling symlink" 2 "error: data directory '$bad/dangling': 'a.txt' is a symlink to '/nonexistent/file.txt', which does not exist" \
    train --data "$bad/dangling"
  expect_error "data dir, no files" 2 "error: data directory '$bad/emptydir' holds no regular files" train --data "$bad/emptydir"
  # ---- topology / model JSON ----------------------------------------------------------
  expect_error "topology nested 100000 deep" 2 "error: malformed JSON in '$bad/deep.json' at line 1, column 65: nested more than 64" \
    topo show "$bad/deep.json"
  expect_error "topology truncated" 2 "error: malformed JSON in '$bad/truncated-topology.json' at line [0-9]+, column [0-9]+" \
    topo show "$bad/truncated-topology.json"
  expect_error "topology binary garbage" 2 "error: malformed JSON in '$bad/garbage.json'" topo show "$bad/garbage.json"
  expect_error "topology field typo" 2 "error: .*'levles'" topo show "$bad/typo-topology.json"
  expect_error "topology negative bandwidth" 2 "error: .*group_gbps.*-5" topo show "$bad/negative-bw.json"
  expect_error "topology number 1e999" 2 "error: .*huge-number.json.*(1e999|out of range|overflow)" topo show "$bad/huge-number.json"
  expect_error "topology \"NaN\" string" 2 "error: .*tflops.*NaN" topo show "$bad/nan-topology.json"
  expect_error "topology 0 members" 2 "error: .*members.*0" plan --topology "$bad/zero-members.json" --model tiny
  expect_error "topology FIFO" 2 "error: .*'$bad/fifo'" plan --topology "$bad/fifo" --model tiny
  expect_error "model negative layers" 2 "error: .*layers.*-2" plan --topology nvlink-network-2 --model "$bad/negative-layers.json"
  expect_error "model string hidden" 2 "error: .*hidden.*sixty-four" train --data "$good/corpus.txt" --model "$bad/string-hidden.json"
  expect_error "model heads not dividing hidden" 2 "error: .*heads.*5" train --data "$good/corpus.txt" --model "$bad/heads-not-dividing.json"
  expect_error "model 2^31 layers" 2 "error: .*layers.*2147483648" train --data "$good/corpus.txt" --model "$bad/huge-model.json"
  expect_error "model nested 100000 deep" 2 "error: malformed JSON in '$bad/deep.json'.*nested more than 64" \
    train --data "$good/corpus.txt" --model "$bad/deep.json"
  # ---- nccl-tests logs, nvidia-smi matrices (issue 25): each error names the line ---------
  nccl="$repo/tests/plan/data/nccl-tests"
  smi="$repo/tests/topo/data/nvidia-smi"
  python3 - "$nccl" "$smi" "$bad" <<'EOF'
import sys
nccl, smi, bad = sys.argv[1:]
log = open(f"{nccl}/all_reduce_perf.log").read().split("\n")
def put(name, lines):
    open(f"{bad}/{name}", "w").write("\n".join(lines))
one = next(i for i, l in enumerate(log) if l.startswith("#  Rank  1 "))
put("all_reduce_perf-nompi.log", log[:one] + [log[one - 1].replace("dgx-a01", "dgx-a02")] + log[one + 1:])
row = next(i for i, l in enumerate(log) if l.split()[:1] == ["8388608"])
f = log[row].split()
f[8] = "5"
put("all_reduce_perf-wrong.log", log[:row] + ["  ".join(f)] + log[row + 1:])
put("broadcast_perf.log", ["# Collective test starting: broadcast_perf"] + log)
m = open(f"{smi}/pcie-box.txt").read().split("\n")
gpu3 = next(i for i, l in enumerate(m) if l.startswith("GPU3"))
put("smi-unknown.txt", m[:gpu3] + [m[gpu3].replace("PIX", "PCI", 1)] + m[gpu3 + 1:])
put("smi-ragged.txt", m[:gpu3] + ["\t".join(m[gpu3].split("\t")[:5])] + m[gpu3 + 1:])
put("smi-blocks.txt", ["\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity", "GPU0\t X \tSYS\tPIX\tSYS\t0-7",
                      "GPU1\tSYS\t X \tSYS\tPIX\t0-7", "GPU2\tPIX\tSYS\t X \tSYS\t0-7",
                      "GPU3\tSYS\tPIX\tSYS\t X \t0-7", ""])
EOF
  cal=(--base nvswitch-8xa100 --out "$work/cal.json")
  expect_error "nccl-tests log truncated row" 2 "error: '$nccl/malformed_all_reduce_perf.log' line 35: '1048576  262144  float  sum  -1  32.54  32.22' has 7 fields, but the column header on line 16 has 13" \
    calibrate --from-nccl-tests "$nccl/malformed_all_reduce_perf.log" "${cal[@]}"
  expect_error "nccl-tests log of a build without MPI" 2 "error: '$bad/all_reduce_perf-nompi.log' line 7: rank 0 is listed twice \(first on line 6\)" \
    calibrate --from-nccl-tests "$bad/all_reduce_perf-nompi.log" "${cal[@]}"
  expect_error "nccl-tests log with wrong values" 2 "error: '$bad/all_reduce_perf-wrong.log' line [0-9]+: #wrong is 5 at 8388608 bytes" \
    calibrate --from-nccl-tests "$bad/all_reduce_perf-wrong.log" "${cal[@]}"
  expect_error "nccl-tests log of broadcast_perf" 2 "error: '$bad/broadcast_perf.log' is the output of broadcast_perf" \
    calibrate --from-nccl-tests "$bad/broadcast_perf.log" "${cal[@]}"
  expect_error "nccl-tests log binary garbage" 2 "error: '$bad/garbage.json' has no '#  Rank N" \
    calibrate --from-nccl-tests "$bad/garbage.json" "${cal[@]}"
  expect_error "nccl-tests log FIFO" 2 "error: .*'$bad/fifo'" calibrate --from-nccl-tests "$bad/fifo" "${cal[@]}"
  expect_error "nccl-tests log missing" 2 "error: .*'$bad/missing.log'" calibrate --from-nccl-tests "$bad/missing.log" "${cal[@]}"
  expect_error "nvidia-smi matrix asymmetric" 2 "error: '$smi/asymmetric.txt' line 5: GPU2 to GPU0 is 'SYS', but line 3 has GPU0 to GPU2 as 'PIX'" \
    topo from-nvidia-smi "$smi/asymmetric.txt" --out "$work/smi.json"
  expect_error "nvidia-smi matrix unknown entry" 2 "error: '$bad/smi-unknown.txt' line 7: GPU3 to GPU2: unknown entry 'PCI'" \
    topo from-nvidia-smi "$bad/smi-unknown.txt" --out "$work/smi.json"
  expect_error "nvidia-smi matrix ragged row" 2 "error: '$bad/smi-ragged.txt' line 7: row GPU3 has 4 entries but the header on line 3 has 9 device columns" \
    topo from-nvidia-smi "$bad/smi-ragged.txt" --out "$work/smi.json"
  expect_error "nvidia-smi matrix empty" 2 "error: '$bad/empty.txt' has no nvidia-smi topo -m header line" \
    topo from-nvidia-smi "$bad/empty.txt" --out "$work/smi.json"
  expect_error "nvidia-smi matrix, blocks not consecutive" 2 "error: '$bad/smi-blocks.txt': the GPUs joined by PIX or closer form the blocks \{0,2\} \{1,3\}" \
    topo from-nvidia-smi "$bad/smi-blocks.txt" --out "$work/smi.json"
  expect_error "topo from-nvidia-smi --out a directory" 2 "error: '$bad/emptydir' is a directory, not a regular file" \
    topo from-nvidia-smi "$smi/dgx-a100.txt" --out "$bad/emptydir"
  # ---- safetensors ---------------------------------------------------------------------
  b=(--input "$good/weights.safetensors" --grad-output "$good/weights.safetensors" --out "$work/o.safetensors" --mesh 2x1 --heads 1)
  expect_error "weights truncated" 2 "error: .*truncated.safetensors.*(extends past the end|belong to no tensor)" block --weights "$bad/truncated.safetensors" "${b[@]}"
  expect_error "weights header length 2^63" 2 "error: .*huge-length.safetensors: header length 9223372036854775808" block --weights "$bad/huge-length.safetensors" "${b[@]}"
  expect_error "weights header nested 50000 deep" 2 "error: malformed JSON in the header of .*deep-header.safetensors.*nested more than 64" \
    block --weights "$bad/deep-header.safetensors" "${b[@]}"
  expect_error "weights dtype I64" 2 "error: .*wrong-dtype.safetensors: tensor '.*' has dtype I64" block --weights "$bad/wrong-dtype.safetensors" "${b[@]}"
  expect_error "weights FIFO" 2 "error: cannot read '$bad/fifo': it is a FIFO" block --weights "$bad/fifo" "${b[@]}"
  expect_error "gemm input missing" 2 "error: cannot open '$bad/none.safetensors': No such file" \
    gemm --a "$bad/none.safetensors" --b "$good/weights.safetensors" --algo summa --dataflow os --mesh 1x2 --out "$work/c.safetensors"
  # ---- checkpoint and output paths ------------------------------------------------------
  expect_error "checkpoint dir is a file" 2 "error: cannot use checkpoint directory '$bad/afile': Not a directory" \
    train "${t[@]}" --seq 32 --batch 4 --steps 2 --checkpoint-dir "$bad/afile"
  expect_error "checkpoint dir not writable" 2 "error: checkpoint directory '/proc/self' is not writable" \
    train "${t[@]}" --seq 32 --batch 4 --steps 2 --checkpoint-dir /proc/self
  expect_error "resume without a directory" 2 "error: --resume needs --checkpoint-dir" train "${t[@]}" --seq 32 --batch 4 --steps 2 --resume
  expect_error "resume from a missing directory" 2 "error: --resume: checkpoint directory '$bad/none' does not exist" \
    train "${t[@]}" --seq 32 --batch 4 --steps 2 --checkpoint-dir "$bad/none" --resume
  expect_error "resume from an empty directory" 2 "error: --resume: no checkpoint in '$bad/ckpt-none'" \
    train "${t[@]}" --seq 32 --batch 4 --steps 2 --checkpoint-dir "$bad/ckpt-none" --resume
  expect_error "resume from a truncated checkpoint" 2 "error: --resume: no checkpoint in '$bad/ckpt-truncated' is intact: .*(extends past|ends at byte)" \
    train "${t[@]}" --seq 32 --batch 4 --steps 4 --checkpoint-dir "$bad/ckpt-truncated" --resume
  expect_error "resume another model's checkpoint" 2 "error: .*checkpoint of a model with seq=32, but this model has seq=16" \
    train --data "$good/corpus.txt" --seq 16 --batch 4 --steps 4 --checkpoint-dir "$bad/ckpt-other" --resume
  expect_error "fresh run over good checkpoints" 2 "error: checkpoint directory '$good/ckpt' already holds checkpoints" \
    train "${t[@]}" --seq 32 --batch 4 --steps 2 --checkpoint-dir "$good/ckpt"
  expect_error "resume --steps below the checkpoint" 2 "error: --steps=1 but '.*' is already at step 2" \
    train "${t[@]}" --seq 32 --batch 4 --steps 1 --checkpoint-dir "$good/ckpt" --resume
  expect_error "trace path not writable" 2 "error: cannot write '/proc/self/t.json'" train "${t[@]}" --seq 32 --batch 4 --steps 2 --trace /proc/self/t.json
  expect_error "metrics path not writable" 2 "error: cannot open metrics file '/proc/self/m.jsonl'" train "${t[@]}" --seq 32 --batch 4 --steps 2 --metrics /proc/self/m.jsonl
  MESHTP_FAULT_ENOSPC_AFTER=0 expect_error "metrics on a full disk" 2 \
    "error: cannot write metrics file '$work/full.jsonl' at step 1: No space left on device" \
    train "${t[@]}" --seq 32 --batch 4 --steps 2 --metrics "$work/full.jsonl"
  expect_error "plan --out not writable" 2 "error: cannot write '/proc/self/p.json'" calibrate --out /proc/self/p.json
  expect_error "calibrate --out is a directory" 2 "error: '$bad/emptydir' is a directory, not a regular file: meshtp writes only regular files" \
    calibrate --out "$bad/emptydir"
  # ---- output paths that are not regular files, or are read-only ------------------------
  # Each is refused before anything is written, and afterwards is what it was: its type,
  # device numbers and mode, and for a regular file its bytes (fingerprint).
  fingerprint() {
    local f
    f=$(stat -c '%F %t:%T %a' -- "$1" 2>&1)
    if [ -f "$1" ]; then f+=" $(md5sum <"$1")"; fi
    echo "$f"
  }
  # expect_kept NAME PATH BEFORE: PATH still has the fingerprint BEFORE. Run only after the
  # trial passed (&&), so that a trial counts as at most one failure.
  expect_kept() {
    local now
    now=$(fingerprint "$2")
    if [ "$now" != "$3" ]; then failed "$1: '$2' changed from '$3' to '$now'"; fi
  }
  only_regular="not a regular file: meshtp writes only regular files"
  # A device node made here when we may (root), so that a regression replaces a copy and
  # not the machine's /dev/full; a non-root run uses /dev/full itself, which it cannot
  # replace. Root without mknod skips the case rather than risk /dev/full.
  dev="$bad/full"
  if ! mknod "$dev" c 1 7 2>/dev/null; then
    dev=/dev/full
    if [ "$(id -u)" -eq 0 ]; then dev=""; echo "skip plan --out a character device: no mknod"; fi
  fi
  if [ -n "$dev" ]; then
    before=$(fingerprint "$dev")
    expect_error "plan --out a character device" 2 "error: '$dev' is a character device, $only_regular" \
      plan --topology nvlink-network-2 --model tiny --out "$dev" &&
      expect_kept "plan --out a character device" "$dev" "$before"
  fi
  mkfifo "$bad/emit-fifo.toml"
  expect_error "plan --emit-file a FIFO" 2 "error: '$bad/emit-fifo.toml' is a FIFO \(named pipe\), $only_regular" \
    plan --3d --topology nvlink-network-2 --model tiny --emit torchtitan --emit-file "$bad/emit-fifo.toml" &&
    { [ -p "$bad/emit-fifo.toml" ] || failed "plan --emit-file a FIFO: '$bad/emit-fifo.toml' is no longer a FIFO"; }
  mkfifo "$bad/plan-fifo.json"
  expect_error "plan --out a FIFO" 2 "error: '$bad/plan-fifo.json' is a FIFO \(named pipe\), $only_regular" \
    plan --topology nvlink-network-2 --model tiny --out "$bad/plan-fifo.json" &&
    { [ -p "$bad/plan-fifo.json" ] || failed "plan --out a FIFO: '$bad/plan-fifo.json' is no longer a FIFO"; }
  # The FIFO is the second of the two files: the first (platform.xml) must not be written
  # either.
  mkdir -p "$bad/platform"
  mkfifo "$bad/platform/hostfile"
  expect_error "topo platform --out onto a FIFO" 2 "error: '$bad/platform/hostfile' is a FIFO \(named pipe\), $only_regular" \
    topo platform nvlink-network-2 --out "$bad/platform" &&
    if [ ! -p "$bad/platform/hostfile" ]; then failed "topo platform --out onto a FIFO: the hostfile is no longer a FIFO"
    elif [ -e "$bad/platform/platform.xml" ]; then failed "topo platform --out onto a FIFO: platform.xml was written"; fi
  echo '{"kept": true}' >"$bad/plan-readonly.json"
  chmod 0444 "$bad/plan-readonly.json"
  before=$(fingerprint "$bad/plan-readonly.json")
  expect_error "plan --out a read-only file" 2 "error: '$bad/plan-readonly.json' is read-only \(mode 0444\): not overwritten" \
    plan --topology nvlink-network-2 --model tiny --out "$bad/plan-readonly.json" &&
    expect_kept "plan --out a read-only file" "$bad/plan-readonly.json" "$before"
fi
if [ "$group" = all ] || [ "$group" = files ]; then
  # ---- round 2 (issue 28): JSON keys twice, wide integers, plans for another model --------
  tt=(train "${t[@]}" --seq 32 --batch 4 --steps 2)
  expect_error "model key twice" 2 "error: malformed JSON in '$bad/dup-model.json': the key 'hidden' appears twice in one object" \
    train --data "$good/corpus.txt" --model "$bad/dup-model.json"
  expect_error "topology key twice" 2 "error: malformed JSON in '$bad/dup-topology.json': the key 'members' appears twice" topo show "$bad/dup-topology.json"
  expect_error "plan key twice" 2 "error: malformed JSON in '$bad/plan-dup.json': the key 'dp' appears twice" "${tt[@]}" --plan "$bad/plan-dup.json"
  expect_error "weights: a tensor twice in the header" 2 "error: .*dup-tensor.safetensors: '.*' appears more than once in the header" \
    block --weights "$bad/dup-tensor.safetensors" "${b[@]}"
  expect_error "topology members 2^32+1" 2 "error: .*members.*4294967297" plan --topology "$bad/members-2^32.json" --model tiny
  expect_error "model layers 2^63+1" 2 "error: .*'layers' is out of range, got 9223372036854775809" plan --topology nvlink-network-2 --model "$bad/layers-2^63.json"
  expect_error "plan dp 2^32+1" 2 "error: plan '$bad/plan-dp-2\^32.json': dp=4294967297 must be between" "${tt[@]}" --plan "$bad/plan-dp-2^32.json"
  expect_error "plan dp 2^31" 2 "error: plan '$bad/plan-dp-2\^31.json': dp=2147483648 must be between" "${tt[@]}" --plan "$bad/plan-dp-2^31.json"
  expect_error "plan dp 2^63" 2 "error: plan '$bad/plan-dp-2\^63.json': field 'dp' is out of range, got 9223372036854775808" "${tt[@]}" --plan "$bad/plan-dp-2^63.json"
  expect_error "plan mesh 2^32+2" 2 "error: plan '$bad/plan-mesh-2\^32.json': mesh\[0\]=4294967298 must be between 1 and" "${tt[@]}" --plan "$bad/plan-mesh-2^32.json"
  expect_error "plan model_shape hidden -64" 2 "error: .*provenance, model_shape: hidden=-64 must be at least 1" "${tt[@]}" --plan "$bad/plan-shape-negative.json"
  expect_error "plan model_shape typo" 2 "error: .*model_shape: unknown field 'hiden'" "${tt[@]}" --plan "$bad/plan-shape-typo.json"
  expect_error "plan for another model (train)" 2 "error: --plan $bad/plan-other-model.json was made for model 'small', not this one 'tiny' \(hidden 256 ≠ 64, heads 8 ≠ 4\)" \
    "${tt[@]}" --plan "$bad/plan-other-model.json"
  expect_error "plan for another seq (train)" 2 "error: --plan .* was made for model 'tiny', not this one 'tiny' \(seq 64 ≠ 32\)" \
    "${tt[@]}" --plan "$bad/plan-other-seq.json"
  expect_error "plan for another model (bench train)" 2 "error: --plan .*plan-other-model.json was made for model 'small'" \
    bench train --data "$good/corpus.txt" --model tiny --seq 32 --batch 4 --steps 2 --plan "$bad/plan-other-model.json"
  expect_error "plan for another model (simulate)" 1 "error: --plan .*plan-other-model.json was made for model 'small'" \
    simulate --topology nvlink-network-2 --model tiny --seq 32 --batch 4 --devices 2 --plan "$bad/plan-other-model.json" --predict-only
  expect_error "plan for another model (simulate, the model's own seq)" 1 "error: --plan .*plan.json was made for model 'tiny', not this one 'tiny' \(seq 32 ≠ 64, batch 4 ≠ 8\)" \
    simulate --topology nvlink-network-2 --model tiny --devices 2 --plan "$good/plan.json" --predict-only
  # ---- round 2: output paths that are not regular files, read-only, or hold an earlier run --
  for flag in --metrics --trace; do
    mkfifo "$bad/fifo$flag"
    expect_error "train $flag a FIFO" 2 "error: '$bad/fifo$flag' is a FIFO \(named pipe\), $only_regular" "${tt[@]}" "$flag" "$bad/fifo$flag" &&
      { [ -p "$bad/fifo$flag" ] || failed "train $flag a FIFO: no longer a FIFO"; }
    echo '{"kept": true}' >"$bad/readonly$flag"
    chmod 0444 "$bad/readonly$flag"
    before=$(fingerprint "$bad/readonly$flag")
    expect_error "train $flag a read-only file" 2 "error: '$bad/readonly$flag' is read-only \(mode 0444\): not overwritten" \
      "${tt[@]}" "$flag" "$bad/readonly$flag" && expect_kept "train $flag a read-only file" "$bad/readonly$flag" "$before"
    expect_error "train $flag a directory" 2 "error: '$bad/emptydir' is a directory, $only_regular" "${tt[@]}" "$flag" "$bad/emptydir"
  done
  if [ -n "$dev" ]; then
    before=$(fingerprint "$dev")
    expect_error "train --metrics a character device" 2 "error: '$dev' is a character device, $only_regular" "${tt[@]}" --metrics "$dev" &&
      expect_kept "train --metrics a character device" "$dev" "$before"
    expect_error "plan --3d --out a character device" 2 "error: '$dev' is a character device, $only_regular" \
      plan --3d --topology nvlink-network-2 --model tiny --out "$dev" && expect_kept "plan --3d --out a character device" "$dev" "$before"
  fi
  ln -s "$bad/plan-fifo.json" "$bad/link-to-fifo.json"
  expect_error "plan --out a symlink to a FIFO" 2 "error: '$bad/link-to-fifo.json' \(a symlink to '$bad/plan-fifo.json'\) is a FIFO" \
    plan --topology nvlink-network-2 --model tiny --out "$bad/link-to-fifo.json" &&
    { [ -L "$bad/link-to-fifo.json" ] && [ -p "$bad/plan-fifo.json" ] || failed "plan --out a symlink to a FIFO: the link or the FIFO changed"; }
  before=$(fingerprint "$bad/plan-readonly.json")
  expect_error "calibrate --out a read-only file" 2 "error: '$bad/plan-readonly.json' is read-only \(mode 0444\)" \
    calibrate --out "$bad/plan-readonly.json" && expect_kept "calibrate --out a read-only file" "$bad/plan-readonly.json" "$before"
  mkdir -p "$bad/platform-ro"
  echo "<platform/>" >"$bad/platform-ro/platform.xml"
  chmod 0444 "$bad/platform-ro/platform.xml"
  before=$(fingerprint "$bad/platform-ro/platform.xml")
  expect_error "topo platform --out over a read-only platform.xml" 2 "error: '$bad/platform-ro/platform.xml' is read-only" \
    topo platform nvlink-network-2 --out "$bad/platform-ro" &&
    expect_kept "topo platform --out over a read-only platform.xml" "$bad/platform-ro/platform.xml" "$before"
  mkdir -p "$bad/earlier-run/0"
  echo '{"earlier": true}' >"$bad/earlier-run/0/spec.json"
  before=$(fingerprint "$bad/earlier-run/0/spec.json")
  expect_error "simulate --keep an earlier run's directory" 1 "error: --keep $bad/earlier-run: the directory is not empty" \
    simulate --topology pcie-8xa100 --model tiny --devices 8 --keep "$bad/earlier-run" &&
    expect_kept "simulate --keep an earlier run's directory" "$bad/earlier-run/0/spec.json" "$before"
  expect_error "simulate --keep a file" 1 "error: --keep $bad/afile: not a directory" simulate --topology pcie-8xa100 --model tiny --devices 8 --keep "$bad/afile"
  # --report DIR (plan, simulate): refused before any work, naming the path; what DIR holds
  # stays as it was, and a DIR that could not be filled is not made.
  before=$(fingerprint "$bad/afile")
  expect_error "plan --report a file" 2 "error: --report $bad/afile: not a directory" \
    plan --topology nvlink-network-2 --model tiny --report "$bad/afile" &&
    expect_kept "plan --report a file" "$bad/afile" "$before"
  expect_error "simulate --report a file" 1 "error: --report $bad/afile: not a directory" \
    simulate --topology pcie-8xa100 --model tiny --devices 8 --predict-only --report "$bad/afile"
  expect_error "plan --report in a missing folder" 2 "error: --report /nonexistent-meshtp/r: the folder '/nonexistent-meshtp' does not exist" \
    plan --topology nvlink-network-2 --model tiny --report /nonexistent-meshtp/r
  expect_error "plan --report where no directory can be made" 2 "error: --report /proc/meshtp-report: cannot make the directory" \
    plan --topology nvlink-network-2 --model tiny --report /proc/meshtp-report
  mkdir -p "$bad/report-dir-page/index.html"
  expect_error "plan --report, DIR/index.html a directory" 2 "error: '$bad/report-dir-page/index.html' is a directory, $only_regular" \
    plan --3d --topology nvlink-network-2 --model tiny --report "$bad/report-dir-page"
  mkdir -p "$bad/report-ro"
  echo '{"earlier": true}' >"$bad/report-ro/report.json"
  chmod 0444 "$bad/report-ro/report.json"
  before=$(fingerprint "$bad/report-ro/report.json")
  expect_error "plan --report over a read-only report.json" 2 "error: '$bad/report-ro/report.json' is read-only" \
    plan --topology nvlink-network-2 --model tiny --report "$bad/report-ro" &&
    expect_kept "plan --report over a read-only report.json" "$bad/report-ro/report.json" "$before"
  PYTHONPATH="$repo/tests/data/report/no_matplotlib" \
    expect_error "plan --report without matplotlib" 2 "error: --report draws its plots with matplotlib, which no python3 here has; .*: install Debian's python3-matplotlib" \
    plan --topology nvlink-network-2 --model tiny --report "$bad/report-no-matplotlib" &&
    { [ ! -e "$bad/report-no-matplotlib" ] || failed "plan --report without matplotlib: DIR was made"; }
fi
echo "bad inputs tried $trials, rejected cleanly $((trials - failures))"
finish
