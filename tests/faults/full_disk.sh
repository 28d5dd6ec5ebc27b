#!/usr/bin/env bash
# full_disk.sh MESHTP MPIEXEC: checkpoints and metrics on a disk that fills up. On a real
# 3 MB tmpfs where this machine allows mounting one (root, CAP_SYS_ADMIN), and always with
# the write-failure hook (MESHTP_FAULT_ENOSPC_AFTER, core/atomic_file.hpp): the run must
# stop with "No space left on device" naming the file, within seconds, leaving the
# checkpoints it had written intact and no temporary file behind.
source "$(dirname "$0")/lib.sh" "$1" "$2"

# check_full NAME DIR LOG STATUS: the verdict on one full-disk run.
check_full() {
  local name=$1 d=$2 log=$3 status=$4
  trials=$((trials + 1))
  local kept
  kept=$(find "$d" -name 'checkpoint-*.safetensors' | wc -l)
  if [ "$status" -eq 0 ]; then
    failed "$name: the run succeeded on a full disk"
  elif ! grep -qE "error: .*No space left on device" "$log"; then
    failed "$name: exit $status without 'No space left on device': $(grep -m1 error "$log")"
  elif [ -n "$(find "$d" -name '.checkpoint*')" ]; then
    failed "$name: temporary files left: $(find "$d" -name '.checkpoint*')"
  elif [ "$kept" -lt 1 ]; then
    failed "$name: no checkpoint survived"
  else
    # The newest checkpoint left must load (resumed in a copy on a disk with room).
    local copy
    copy="$work/$(basename "$d").copy"
    rm -rf "$copy"
    cp -r "$d" "$copy"
    next_trial
    if mpi 2 train "${small[@]}" --steps 100 --stop-after 1 --checkpoint-dir "$copy" --resume \
      >"$log.resume" 2>&1; then
      pass "$name: $(grep -m1 -oE 'error: .*No space left on device' "$log" | cut -c1-110)…; $kept checkpoint(s) intact"
    else
      failed "$name: the checkpoint left does not resume: $(grep -m1 error "$log.resume")"
    fi
  fi
}

# 1. The injected failure: room for a bit more than one checkpoint (of ~1.4 MB).
d="$work/hook"
next_trial
MESHTP_FAULT_ENOSPC_AFTER=2000000 mpi 2 train "${small[@]}" --steps 100 --checkpoint-every 1 \
  --checkpoint-dir "$d" >"$d.log" 2>&1
check_full "injected ENOSPC, checkpoints" "$d" "$d.log" $?

d="$work/hookm"
next_trial
MESHTP_FAULT_ENOSPC_AFTER=2000 mpi 2 train "${small[@]}" --steps 100 --metrics "$work/hook.jsonl" \
  >"$d.log" 2>&1
status=$?
trials=$((trials + 1))
if [ "$status" -ne 0 ] && grep -qE "error: cannot write metrics file '$work/hook.jsonl' at step [0-9]+: No space left on device" "$d.log"; then
  pass "injected ENOSPC, metrics: named the file and the step"
else
  failed "injected ENOSPC, metrics: exit $status, $(grep -m1 error "$d.log")"
fi

# 2. A real full disk, where mounting is allowed.
mnt="$work/tmpfs"
mkdir -p "$mnt"
if mount -t tmpfs -o size=3m tmpfs "$mnt" 2>/dev/null; then
  d="$mnt/ckpt"
  next_trial
  mpi 2 train "${small[@]}" --steps 100 --checkpoint-every 1 --checkpoint-dir "$d" >"$work/tmpfs.log" 2>&1
  check_full "3 MB tmpfs, checkpoints" "$d" "$work/tmpfs.log" $?
  umount "$mnt"
else
  echo "skip a real tmpfs: mount -t tmpfs is not permitted here (the hook above covers it)"
fi
finish
