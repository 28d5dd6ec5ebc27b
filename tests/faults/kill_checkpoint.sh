#!/usr/bin/env bash
# kill_checkpoint.sh MESHTP MPIEXEC [TRIALS]: SIGKILL a training job that saves a 39 MB
# checkpoint after every step (most of its time goes to saving them) — the whole job
# (mpirun and every rank at once) or one random rank, while a checkpoint file is being
# written or at a random moment (the four combinations in turn) — then resume. A
# checkpoint is lost if the resume fails or starts before the last step the run
# reported (a step's line is printed only after its checkpoint is on disk). Stale temporary
# files must be gone after the resume. Prints "kill trials N, checkpoints lost L, hangs H".
source "$(dirname "$0")/lib.sh" "$1" "$2"
n=${3:-2}
lost=0
hangs=0
temporaries=0
model=(--model small --seq 16 --batch 2 --data "$work/corpus.txt" --eval-batches 1)
for t in $(seq "$n"); do
  d="$work/kill$t"
  trials=$((trials + 1))
  start_bg 2 "$d.log" train "${model[@]}" --steps 100000 --checkpoint-every 1 --checkpoint-dir "$d"
  for _ in $(seq 600); do grep -q "^step" "$d.log" && break; sleep 0.05; done
  ranks=$(rank_pids)  # looked up now: it takes longer than a checkpoint file exists
  when="at a random moment"
  if [ $(((t - 1) / 2 % 2)) -eq 0 ]; then
    sleep "0.$((RANDOM % 10))"
    wait_for_file "$d/.checkpoint-*.tmp.*" 10 && when="while writing a checkpoint"
    sleep "0.0$((RANDOM % 3))"
  else
    sleep "$((RANDOM % 3)).$((RANDOM % 10))"
  fi
  if [ $((t % 2)) -eq 1 ]; then
    what="the whole job $when"
    kill -KILL "$job" $ranks 2>/dev/null
  else
    what="one rank $when"
    kill -KILL "$(shuf -n 1 <<<"$ranks")" 2>/dev/null
  fi
  { wait "$job"; } 2>/dev/null
  if ! wait_gone 10; then
    hangs=$((hangs + 1))
    failed "trial $t: ranks still alive 10 s after killing $what"
    for pid in $(marked_pids "$trial"); do kill -KILL "$pid"; done
  fi
  reported=$(grep -oE "^step +[0-9]+" "$d.log" | tail -1 | grep -oE "[0-9]+")
  temps=$(find "$d" -name '.checkpoint*' | wc -l)
  temporaries=$((temporaries + temps))
  next_trial
  out=$(mpi 2 train "${model[@]}" --steps 100000 --stop-after 1 --checkpoint-dir "$d" --resume 2>&1)
  status=$?
  resumed=$(grep -oE "^step +[0-9]+" <<<"$out" | head -1 | grep -oE "[0-9]+")
  if [ "$status" -ne 0 ] || [ -z "$resumed" ] || [ "$((resumed - 1))" -lt "${reported:-0}" ]; then
    lost=$((lost + 1))
    failed "trial $t: killed $what after step ${reported:-0} was reported; resume: exit $status, first step ${resumed:-none}"
    grep -m2 -E "error|warning" <<<"$out" | sed 's/^/       /'
  elif [ -n "$(find "$d" -name '.checkpoint*')" ]; then
    failed "trial $t: temporary files left after the resume: $(find "$d" -name '.checkpoint*')"
  else
    pass "trial $t: killed $what after step ${reported:-0} ($temps temporary file(s) left) → resumed at step $resumed"
  fi
done
echo "kill trials $n, checkpoints lost $lost, hangs $hangs, temporaries cleaned $temporaries"
finish
