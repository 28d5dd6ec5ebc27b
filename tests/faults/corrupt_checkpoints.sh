#!/usr/bin/env bash
# corrupt_checkpoints.sh MESHTP MPIEXEC: the newest of two checkpoints damaged in each way a
# disk, a copy or a person can damage it. Every resume must name the damaged file and carry
# on from the previous checkpoint (step 1) — never load it, never fail for lack of a good
# one — and when both are damaged, fail naming both, changing nothing.
source "$(dirname "$0")/lib.sh" "$1" "$2"

# python3 snippets that damage the file $1 in place.
damage() {
  python3 - "$1" "$2" <<'EOF'
import os, random, struct, sys
path, how = sys.argv[1], sys.argv[2]
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
if how == "truncated":
    data = data[: len(data) // 2]
elif how == "bit-flip":
    i = random.randrange(8 + n, len(data))
    data[i] ^= 0x10
elif how == "header-garbage":
    data[8:24] = b"\x00garbage\x07\x08\x09\x0a\x0b\x0c\x0d\x0e"
elif how == "metadata-edit":  # a plausible edit: another step number, valid JSON
    i = data.index(b'"step":"') + len(b'"step":"')
    data[i : i + 1] = b"9"
elif how == "empty":
    data = b""
elif how == "length-field":
    data[0:8] = struct.pack("<Q", 2**62)
open(path, "wb").write(data)
EOF
}

for how in truncated bit-flip header-garbage metadata-edit empty length-field missing; do
  d="$work/$how"
  next_trial
  mpi 2 train "${small[@]}" --steps 2 --checkpoint-every 1 --checkpoint-dir "$d" >"$d.log" 2>&1 ||
    { failed "$how: could not write the checkpoints"; continue; }
  newest=$(readlink -f "$d/checkpoint.safetensors")
  if [ "$how" = missing ]; then rm "$newest"; else damage "$newest" "$how"; fi
  next_trial
  trials=$((trials + 1))
  out=$(mpi 2 train "${small[@]}" --steps 3 --checkpoint-dir "$d" --resume 2>&1)
  status=$?
  if [ "$status" -eq 0 ] && grep -qE "warning: the newest checkpoint is damaged or missing \(.*$(basename "$newest").*\); resuming from the previous one, '$d/checkpoint-00000001.safetensors' \(step 1\)" <<<"$out" &&
    grep -qE "^step +2/3" <<<"$out"; then
    pass "$how: $(grep -m1 -oE 'damaged or missing \(.{0,90}' <<<"$out")…"
  else
    failed "$how: exit $status: $(grep -m1 -E 'error|warning' <<<"$out")"
  fi
done

# Both damaged: an error naming both files, and nothing changed.
d="$work/both"
next_trial
mpi 2 train "${small[@]}" --steps 2 --checkpoint-every 1 --checkpoint-dir "$d" >"$d.log" 2>&1
damage "$d/checkpoint-00000002.safetensors" bit-flip
damage "$d/checkpoint-00000001.safetensors" truncated
good="$d" expect_error "both damaged" 2 \
  "error: --resume: no checkpoint in '$d' is intact: .*checkpoint-00000002.safetensors.*checkpoint-00000001.safetensors" \
  train "${small[@]}" --steps 3 --checkpoint-dir "$d" --resume
finish
