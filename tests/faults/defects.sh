#!/usr/bin/env bash
# defects.sh MESHTP MPIEXEC [N…]: one check per defect of the fault-handling review, each
# reproducing it on 2 ranks (all of them, or only defects N…). Every check failed before its
# fix; run it against an older binary to see them fail.
source "$(dirname "$0")/lib.sh" "$1" "$2"
shift 2
only=" $* "
want() { [ "$only" = "  " ] || [[ "$only" == *" $1 "* ]]; }

# A checkpoint directory with the newest checkpoint at step $2 (every step saved).
make_checkpoints() {
  next_trial
  mpi 2 train "${small[@]}" --steps "$2" --checkpoint-every 1 --checkpoint-dir "$1" >"$1.log" 2>&1 ||
    { failed "could not write checkpoints into $1"; cat "$1.log"; }
}

# Path of the newest checkpoint file of directory $1.
newest() { readlink -f "$1/checkpoint.safetensors"; }

# Overwrites 4 KiB of tensor data (past the header) of file $1 with 0xFF.
corrupt_data() {
  python3 - "$1" <<'EOF'
import struct, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    f.seek(8 + n + 128)
    f.write(b"\xff" * 4096)
EOF
}

if want 1; then  # --dp 0: SIGFPE
  expect_error "1 --dp 0" 2 "error: --dp.* 0 must be" train "${small[@]}" --dp 0
fi

if want 2; then  # JSON nested 100000 deep: SIGSEGV; at 50000 the message was the whole file
  for depth in 100000 50000; do  # every command at 100000, one at 50000
    python3 -c "print('[' * $depth + ']' * $depth)" >"$work/deep$depth.json"
    f="$work/deep$depth.json"
    re="error: malformed JSON in '$f' at line 1, column 65: nested more than 64 levels"
    max_output=2000
    expect_error "2 topo show, depth $depth" 2 "$re" topo show "$f"
    if [ "$depth" -eq 100000 ]; then
      expect_error "2 plan --topology, depth $depth" 2 "$re" plan --topology "$f" --model tiny --devices 2
      expect_error "2 plan --model, depth $depth" 2 "$re" plan --topology nvlink-network-2 --model "$f"
      expect_error "2 train --model, depth $depth" 2 "$re" train "${small[@]}" --model "$f"
      expect_error "2 bench plan --topology, depth $depth" 2 "$re" bench plan --topology "$f"
    fi
    max_output=
  done
fi

if want 3; then  # --seed -1 wrapped to 2^64−1, whose checkpoint did not resume
  expect_error "3 --seed -1" 2 "error: --seed: '-1' must not be negative" train "${small[@]}" --seed -1
  d="$work/seedmax"
  next_trial
  if mpi 2 train "${small[@]}" --steps 1 --seed 18446744073709551615 --checkpoint-dir "$d" >"$d.log" 2>&1 &&
    next_trial && mpi 2 train "${small[@]}" --steps 2 --checkpoint-dir "$d" --resume >>"$d.log" 2>&1; then
    pass "3 seed 2^64-1 checkpoints and resumes"
  else
    failed "3 seed 2^64-1: $(grep -m1 error "$d.log")"
  fi
fi

if want 4; then  # corrupted tensor bytes resumed silently (then NaN, saved over itself)
  d="$work/corrupt"
  make_checkpoints "$d" 2
  bad=$(newest "$d")
  corrupt_data "$bad"
  next_trial
  out=$(mpi 2 train "${small[@]}" --steps 3 --checkpoint-dir "$d" --resume 2>&1)
  if grep -qE "warning: .*damaged.*$bad: tensor '.*' has checksum.*resuming from the previous one, '$d/checkpoint-0*1.safetensors'" <<<"$out"; then
    pass "4 a corrupt newest checkpoint is named and the previous one used"
  else
    failed "4 corrupt checkpoint resumed without a warning naming both files"
    echo "$out" | grep -E "error|warning|resumed" | head -3
  fi
  d="$work/corrupt1"
  make_checkpoints "$d" 1
  corrupt_data "$(newest "$d")"
  good="$d" expect_error "4 the only checkpoint corrupt" 2 "error: --resume: no checkpoint in '$d' is intact: .*checksum" \
    train "${small[@]}" --steps 3 --checkpoint-dir "$d" --resume
fi

if want 5; then  # --lr inf: exit 0 with every parameter NaN, checkpoint written
  expect_error "5 --lr inf" 2 "error: --lr.*inf" train "${small[@]}" --lr inf
  d="$work/nan"
  mkdir -p "$d"
  expect_error "5 NaN loss stops naming the step" 2 \
    "error: step [0-9]+: the loss is (nan|inf|-nan) and the gradient norm" \
    train "${small[@]}" --steps 6 --warmup 0 --lr 1e30 --grad-clip 0 --checkpoint-dir "$d" --checkpoint-every 1
  for f in "$d"/checkpoint-*.safetensors; do
    python3 - "$f" <<'EOF' || failed "5 a checkpoint holds a non-finite value: $f"
import json, math, struct, sys
with open(sys.argv[1], "rb") as fh:
    n = struct.unpack("<Q", fh.read(8))[0]
    header = json.loads(fh.read(n))
    data = fh.read()
for name, e in header.items():
    if name == "__metadata__":
        continue
    b, end = e["data_offsets"]
    vals = struct.unpack("<%df" % ((end - b) // 4), data[b:end])
    if not all(math.isfinite(v) for v in vals):
        sys.exit(1)
EOF
  done
  next_trial
  out=$(mpi 2 train "${small[@]}" --steps 5 --warmup 0 --lr 1e30 --grad-clip 0 --skip-nonfinite 10 2>&1)
  if grep -qE "skipped [0-9]+ steps? with a non-finite" <<<"$out"; then
    pass "5 --skip-nonfinite skips and counts"
  else
    failed "5 --skip-nonfinite: $(grep -m1 -E 'error|skipped' <<<"$out")"
  fi
fi

if want 6; then  # a fresh run overwrote another model's checkpoint
  d="$work/other"
  make_checkpoints "$d" 1
  good="$d" expect_error "6 fresh run into a directory with checkpoints" 2 \
    "error: checkpoint directory '$d' already holds checkpoints" \
    train --data "$work/corpus.txt" --seq 16 --batch 4 --eval-batches 1 --steps 2 --checkpoint-dir "$d"
fi

if want 7; then  # SIGINT/SIGTERM: ~1 s, no message, nothing saved
  for sig in TERM INT; do
    d="$work/sig$sig"
    start_bg 2 "$d.log" train "${small[@]}" --steps 100000 --checkpoint-dir "$d"
    for _ in $(seq 200); do grep -q "^step" "$d.log" && break; sleep 0.05; done
    kill -"$sig" "$(rank_pids | tail -1)"
    start=$(now)
    wait_job 60
    status=$?
    n=$(grep -oE "stopped by SIG$sig after step [0-9]+" "$d.log" | grep -oE "[0-9]+$")
    if [ "$status" -ne 0 ] && [ -n "$n" ] && [ -f "$d/checkpoint-$(printf %08d "$n").safetensors" ]; then
      pass "7 SIG$sig: stopped after step $n in $(elapsed "$start") s, checkpoint written, exit $status"
    else
      failed "7 SIG$sig: exit $status; $(grep -m1 -E 'error|stopped' "$d.log")"
    fi
  done
fi

if want 8; then  # an unwritable checkpoint dir / trace path found only after the steps ran
  for flag in --checkpoint-dir --trace; do
    target=/proc/self
    [ "$flag" = --trace ] && target=/proc/self/trace.json
    next_trial
    out=$(mpi 2 train "${small[@]}" --steps 3 "$flag" "$target" 2>&1)
    if [ $? -ne 0 ] && grep -q "error: .*/proc/self" <<<"$out" && ! grep -q "^step" <<<"$out"; then
      pass "8 unwritable $flag refused before the first step"
    else
      failed "8 unwritable $flag: $(grep -c '^step' <<<"$out") steps ran first"
    fi
  done
fi

if want 9; then  # stray .tmp files of killed writers never cleaned
  d="$work/stale"
  make_checkpoints "$d" 1
  head -c 1000000 /dev/zero >"$d/.checkpoint-00000002.safetensors.tmp.99999.0"
  next_trial
  out=$(mpi 2 train "${small[@]}" --steps 2 --checkpoint-dir "$d" --resume 2>&1)
  if [ ! -e "$d/.checkpoint-00000002.safetensors.tmp.99999.0" ] && grep -q "removed 1 temporary file" <<<"$out"; then
    pass "9 stale temporary files removed and reported"
  else
    failed "9 stale temporary file still there"
  fi
fi

if want 10; then  # two runs in one checkpoint directory both succeeded
  d="$work/shared"
  start_bg 2 "$d.a.log" train "${small[@]}" --steps 100000 --checkpoint-dir "$d"
  first=$trial
  a=$job
  for _ in $(seq 200); do grep -q "^step" "$d.a.log" && break; sleep 0.05; done
  expect_error "10 a second run into a directory in use" 2 \
    "error: checkpoint directory '$d' is in use by another meshtp run \(pid [0-9]+ on " \
    train "${small[@]}" --steps 2 --checkpoint-dir "$d"
  # The first run dies without cleaning up: its lock must not block forever.
  kill -KILL "$a"
  trial=$first
  for pid in $(rank_pids); do kill -KILL "$pid"; done
  { wait "$a"; } 2>/dev/null
  mkdir -p "$d.b"
  cp "$d/meshtp.lock" "$d.b/meshtp.lock"
  next_trial
  if out=$(mpi 2 train "${small[@]}" --steps 2 --checkpoint-dir "$d.b" 2>&1) &&
    grep -q "removed the stale lock of a run that is gone" <<<"$out"; then
    pass "10 a dead run's lock is removed with a warning"
  else
    failed "10 dead run's lock: $(grep -m1 error <<<"$out")"
  fi
fi

if want 11; then  # --metrics on a full disk: errors ignored, exit 0
  # The disk fills at the first metrics line (the write hook, core/atomic_file.hpp); /dev/full
  # itself is now refused as a character device (bad_inputs.sh).
  MESHTP_FAULT_ENOSPC_AFTER=0 expect_error "11 --metrics on a full disk" 2 \
    "error: cannot write metrics file '$work/full.jsonl' at step 1: No space left on device" \
    train "${small[@]}" --steps 2 --metrics "$work/full.jsonl"
fi

if want 12; then  # after a crash and resume, the metrics file held steps twice
  d="$work/metrics"
  next_trial
  mpi 2 train "${small[@]}" --steps 4 --checkpoint-dir "$d" --metrics "$d.jsonl" >/dev/null 2>&1
  # What a run killed after step 6 (checkpoint at 4) leaves behind.
  printf '{"step":5,"loss":1}\n{"step":6,"loss":1}\n{"step":7,"lo' >>"$d.jsonl"
  next_trial
  mpi 2 train "${small[@]}" --steps 6 --checkpoint-dir "$d" --resume --metrics "$d.jsonl" >/dev/null 2>&1
  steps=$(python3 -c "import json,sys; print(' '.join(str(json.loads(l)['step']) for l in open(sys.argv[1])))" "$d.jsonl" 2>&1)
  if [ "$steps" = "1 2 3 4 5 6" ]; then
    pass "12 metrics after resume hold each step once"
  else
    failed "12 metrics after resume hold steps: $steps"
  fi
fi

if want 13; then  # values silently replaced by defaults
  expect_error "13 train --seq 0" 2 "error: --seq.* 0 must be" train --data "$work/corpus.txt" --seq 0
  expect_error "13 train --batch -8" 2 "error: --batch.* -8 must be" train --data "$work/corpus.txt" --batch -8
  expect_error "13 block --heads -4" 2 "error: --heads.* -4 must be" block --weights "$work/w" --input "$work/x" \
    --grad-output "$work/dy" --out "$work/out" --mesh 2x1 --heads -4
  expect_error "13 plan --devices 0" 2 "error: --devices.* 0 must be" plan --topology nvlink-network-2 --model tiny --devices 0
fi

if want 14; then  # --data FIFO hung in open()
  mkfifo "$work/fifo"
  expect_error "14 --data FIFO" 2 "error: data '$work/fifo' is not a regular file" train --data "$work/fifo"
fi

if want 15; then  # a model 100× too big for the machine grew towards OOM with no output
  # (capped, so an unfixed build fails with bad_alloc rather than swapping the machine)
  (
    f0=$failures
    ulimit -v 8000000
    expect_error "15 --model atp-m4" 2 "error: model 'atp-m4' .*needs ~[0-9.]+ GiB per rank" train --model atp-m4 --steps 1
    expect_error "15 --seq 100000" 2 "error: model 'tiny' with .*--seq=100000 .*needs ~[0-9.]+ GiB per rank" \
      train --data "$work/corpus.txt" --seq 100000 --steps 1
    exit $((failures - f0))
  ) || failures=$((failures + $?))
  trials=$((trials + 2))
fi

if want 16; then  # symlinks in a data directory skipped silently
  mkdir -p "$work/linked"
  ln -s "$work/corpus.txt" "$work/linked/corpus.txt"
  next_trial
  if out=$(mpi 2 train --data "$work/linked" --seq 32 --batch 4 --eval-batches 1 --steps 1 2>&1); then
    pass "16 a symlinked data file is read"
  else
    failed "16 symlinked data: $(grep -m1 error <<<"$out")"
  fi
fi

if want 17; then  # resume with --steps ≤ the checkpoint's: "done steps 5–4", exit 0; wrong seed shown
  d="$work/done"
  make_checkpoints "$d" 4
  expect_error "17 --steps at the checkpoint's step" 2 "error: --steps=4 but '.*' is already at step 4" \
    train "${small[@]}" --steps 4 --checkpoint-dir "$d" --resume
  next_trial
  out=$(mpi 2 train "${small[@]}" --steps 5 --seed 7 --checkpoint-dir "$d" --resume 2>&1)
  if grep -qE "seed 1 \(the checkpoint's; --seed 7 is not used\)" <<<"$out"; then
    pass "17 the resume header shows the checkpoint's seed"
  else
    failed "17 header seed: $(grep -m1 optim <<<"$out")"
  fi
fi

if want 18; then  # after mpirun was killed the ranks went on for ~1 s
  # Not timed (a loaded machine stretches any bound): the ranks went on training, so the
  # metrics file (a line per step, flushed) grew after mpirun's death; now they exit on their
  # launcher's death, so at most the step in flight is logged.
  d="$work/orphans"
  start_bg 2 "$d.log" train "${small[@]}" --steps 100000 --checkpoint-dir "$d" --checkpoint-every 1 \
    --metrics "$d.jsonl"
  for _ in $(seq 200); do grep -q "^step" "$d.log" && break; sleep 0.05; done
  kill -KILL "$job"
  at_kill=$(wc -l <"$d.jsonl")
  start=$(now)
  wait_gone 10 || failed "18 ranks still running $(elapsed "$start") s after mpirun's death"
  after=$(wc -l <"$d.jsonl")
  if [ $((after - at_kill)) -le 1 ]; then
    pass "18 ranks stop with mpirun: $at_kill steps logged at the kill, $after after"
  else
    failed "18 ranks went on after mpirun's death: $at_kill steps logged at the kill, $after when they ended"
  fi
  { wait "$job"; } 2>/dev/null
fi

finish
