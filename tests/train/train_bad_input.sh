#!/usr/bin/env bash
# train_bad_input.sh MESHTP MPIEXEC: every bad input of `meshtp train` fails on 2 ranks with a
# message naming the problem, a non-zero exit and no hang (expect_failure.sh), and no
# checkpoint is overwritten by a failed run (sha256 before == after).
set -u
meshtp=$1
mpiexec=$2
here=$(cd "$(dirname "$0")" && pwd)
expect_failure="$here/../expect_failure.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

run2() { "$mpiexec" --oversubscribe -np 2 "$meshtp" train "$@"; }
check() {  # check NAME REGEX ARGS…
  local name=$1 regex=$2
  shift 2
  if out=$("$expect_failure" "$regex" "$mpiexec" --oversubscribe -np 2 "$meshtp" train "$@"); then
    echo "ok   $name"
  else
    echo "FAIL $name"
    echo "$out"
    failures=$((failures + 1))
  fi
}

head -c 20000 /dev/urandom | base64 > "$work/corpus.txt"
: > "$work/empty.txt"
small=(--data "$work/corpus.txt" --seq 32 --batch 4 --eval-batches 1)

check missing-data "error: data '$work/nope.txt' does not exist" --data "$work/nope.txt" --steps 1
check empty-data "error: data '$work/empty.txt' is empty" --data "$work/empty.txt" --steps 1
check tp-dp-product "error: the layout dp=1 × pp=1 × mesh 2x2 = 4 ranks, but there are 2" "${small[@]}" --mesh 2x2
check dp-product "error: the layout dp=4 × pp=1 × mesh 1x1 = 4 ranks, but there are 2" "${small[@]}" --mesh 1x1 --dp 4
check bad-tp "error: bad mesh '2y1'" "${small[@]}" --mesh 2y1
check unknown-model "error: .*'huge'.*tiny" "${small[@]}" --model huge
check zero-without-dp "error: zero=1 shards over the data-parallel replicas, but dp=1" "${small[@]}" --mesh 2x1 --zero 1
check zero-4 "error: plan: zero=4 must be 0, 1, 2 or 3" "${small[@]}" --mesh 1x1 --dp 2 --zero 4
check bad-recompute "error: unknown recompute 'some'" "${small[@]}" --recompute some
check precision-fp16 "error: --precision fp16 is not one the runtime trains in \\(fp32, bf16\\)" "${small[@]}" --precision fp16
check precision-unknown "error: --precision 'fp8' is not fp32, bf16 or fp16" "${small[@]}" --precision fp8
# Pipeline stages (tiny has 2 layers; three.json 3).
printf '{"name": "three", "layers": 3, "hidden": 32, "heads": 2, "vocab": 256, "batch": 4, "seq": 32}' \
  > "$work/three.json"
check pp-not-dividing-layers "error: layers=3 do not split into pp=2 × virtual_stages=1 = 2 pipeline stages" \
  "${small[@]}" --model "$work/three.json" --pp 2
check virtual-stages-not-dividing-layers "error: layers=2 do not split into pp=2 × virtual_stages=2 = 4 pipeline stages" \
  "${small[@]}" --pp 2 --microbatches 2 --schedule interleaved:2
check microbatches-not-dividing-batch "error: batch=4 does not split into dp=1 × microbatches=3" \
  "${small[@]}" --pp 2 --microbatches 3
check 1f1b-too-few-microbatches "error: pipeline: 1f1b needs at least as many microbatches as stages: microbatches=1 < pp=2" \
  "${small[@]}" --pp 2 --schedule 1f1b
check interleaved-microbatches "error: pipeline: interleaved runs microbatches in groups of pp: microbatches=3 is not a multiple of pp=2" \
  --data "$work/corpus.txt" --seq 32 --batch 6 --pp 2 --microbatches 3 --schedule interleaved:2
check pp-tp-world "error: the layout dp=1 × pp=2 × mesh 2x1 = 4 ranks, but there are 2" "${small[@]}" --pp 2 --mesh 2x1
check pp-world "error: dp=1 × pp=4 does not divide the 2 ranks" "${small[@]}" --pp 4
check bad-schedule "error: unknown schedule 'zigzag'" "${small[@]}" --pp 2 --schedule zigzag
check schedule-virtual-stages "error: --schedule '1f1b:2': only interleaved takes virtual stages" \
  "${small[@]}" --pp 2 --microbatches 2 --schedule 1f1b:2
check pp-mesh-auto "error: --pp conflicts with --mesh auto: the planner chooses the layout" \
  "${small[@]}" --pp 2 --mesh auto --topology nvlink-network-2
check resume-without-checkpoint "error: --resume: checkpoint directory '$work/none' does not exist" \
  "${small[@]}" --checkpoint-dir "$work/none" --resume

# Context parallelism (--cp, --cp-comm): each refusal names its numbers, before any
# communication, on every rank.
printf '{"name": "three-heads", "layers": 2, "hidden": 48, "heads": 3, "vocab": 256, "batch": 4, "seq": 32}' \
  > "$work/three-heads.json"
check cp-seq "error: context parallelism: seq=30 is not divisible by 2·cp=4" \
  --data "$work/corpus.txt" --seq 30 --batch 4 --model tiny-llama --cp 2
check cp-world "error: dp=1 × pp=1 × cp=4 does not divide the 2 ranks" "${small[@]}" --cp 4
check cp-world-mesh "error: the layout dp=1 × pp=1 × cp=2 × mesh 2x1 = 4 ranks, but there are 2" \
  "${small[@]}" --cp 2 --mesh 2x1
check cp-comm-unknown "error: .*unknown .*'p2p'" "${small[@]}" --cp 2 --cp-comm p2p
check cp-a2a-heads "error: cp_comm=a2a: the 3 heads per tensor-parallel rank \(heads=3 / d1·d2=1\) are not divisible by cp=2" \
  "${small[@]}" --model "$work/three-heads.json" --cp 2 --cp-comm a2a
printf '{"name": "kv3", "layers": 2, "hidden": 48, "heads": 6, "kv_heads": 3, "ffn_hidden": 64, "activation": "swiglu", "norm": "rmsnorm", "position": "rope", "tie_embeddings": false, "vocab": 256, "batch": 4, "seq": 32}' \
  > "$work/kv3.json"
check cp-a2a-kv-heads "error: cp_comm=a2a: the 3 KV heads per tensor-parallel rank \(kv_heads=3 / d1·d2=1\) and the all-to-all's 2 ranks: one must divide the other" \
  "${small[@]}" --model "$work/kv3.json" --cp 2 --cp-comm a2a
check cp-a2a-ring-two "error: cp_comm=a2a\+ring with cp=2: no all-to-all degree 1 < u < 2" \
  "${small[@]}" --model tiny-llama --cp 2 --cp-comm a2a+ring
check cp-unfused "error: cp=2: the context-parallel attention core is flash-style; it needs attention=fused" \
  "${small[@]}" --model tiny-llama --cp 2 --attention unfused
check cp-gemm2d "error: cp=2: context parallelism runs on the ATP blocks" \
  "${small[@]}" --cp 2 --mesh 1x1 --strategy summa
check cp-moe-folding "error: plan: ep=2 etp=2 on mesh 1x1 with cp=2: meshtp's runtime folds the experts onto the tensor-parallel × context-parallel ranks of a mesh N×1, ep × etp = N·cp = 2" \
  "${small[@]}" --model tiny-moe --cp 2 --ep 2 --etp 2

# Bad plan files (--plan), and flags that contradict a plan: the error names the value.
echo '{"strategy": "fsdp", "mesh": [1, 2]}' > "$work/unknown.json"
echo '{"strategy": "megatron", "mesh": [4, 1]}' > "$work/mesh4.json"
echo '{"strategy": "megatron", "mesh": [2, 1' > "$work/broken.json"
echo '{"strategy": "megatron", "mesh": [2, 1]}' > "$work/good.json"
check plan-unknown-strategy "error: plan '$work/unknown.json': field 'strategy': unknown strategy 'fsdp'" \
  "${small[@]}" --plan "$work/unknown.json"
check plan-mesh-not-world "error: the layout dp=1 × pp=1 × mesh 4x1 = 4 ranks, but there are 2" \
  "${small[@]}" --plan "$work/mesh4.json"
check plan-bad-json "error: malformed JSON in '$work/broken.json' at line 2" \
  "${small[@]}" --plan "$work/broken.json"
check plan-missing "error: .*'$work/none.json'" "${small[@]}" --plan "$work/none.json"
check plan-and-tp "error: --mesh conflicts with --plan $work/good.json" \
  "${small[@]}" --plan "$work/good.json" --mesh 1x2
check plan-and-strategy "error: --strategy conflicts with --plan $work/good.json" \
  "${small[@]}" --plan "$work/good.json" --strategy atp

# A good checkpoint, then damaged copies of it.
mkdir -p "$work/good" "$work/truncated" "$work/corrupt" "$work/other"
if ! run2 "${small[@]}" --steps 2 --checkpoint-dir "$work/good" > "$work/good.log" 2>&1; then
  echo "FAIL could not write the good checkpoint"; cat "$work/good.log"; exit 1
fi
good="$work/good/checkpoint.safetensors"
size=$(stat -c %s "$good")
head -c $((size / 2)) "$good" > "$work/truncated/checkpoint.safetensors"
cp "$good" "$work/corrupt/checkpoint.safetensors"
printf '{"broken json' | dd of="$work/corrupt/checkpoint.safetensors" bs=1 seek=8 conv=notrunc status=none
cp "$good" "$work/other/checkpoint.safetensors"
before=$(sha256sum "$work"/*/checkpoint.safetensors)

check truncated-checkpoint "error: .*truncated/checkpoint.safetensors: .*(extends past the end|shorter)" \
  "${small[@]}" --steps 4 --checkpoint-dir "$work/truncated" --resume
check corrupt-checkpoint "error: .*corrupt/checkpoint.safetensors: .*(JSON|json|header)" \
  "${small[@]}" --steps 4 --checkpoint-dir "$work/corrupt" --resume
check other-model-checkpoint "error: .*other/checkpoint.safetensors: checkpoint of a model with seq=32, but this model has seq=16" \
  --data "$work/corpus.txt" --seq 16 --batch 4 --steps 4 --checkpoint-dir "$work/other" --resume

after=$(sha256sum "$work"/*/checkpoint.safetensors)
if [ "$before" != "$after" ]; then
  echo "FAIL a failed run changed a checkpoint:"; diff <(echo "$before") <(echo "$after")
  failures=$((failures + 1))
else
  echo "ok   no checkpoint changed by a failed run"
fi
[ "$failures" -eq 0 ]
