#!/usr/bin/env python3
"""`meshtp bench rank` end to end (one process, no mpirun): rank 0 of `small` on an 8x1 mesh, a
first-stage rank of a dp 2 x pp 2 x 2x1 layout, and under bf16 rank 0 of 8x1 and of 4x1 with
sequence parallelism (whose alone all-gathers leave other ranks' rows unwritten: the step runs
whatever the values). Each prints one JSON object whose measured tensor high-water mark is
within 10% of the planner's memory for that rank, with the traffic its alone collectives
counted; bf16 takes less memory than fp32 (the blocks' saved GeMM inputs in bf16); a rank
outside the layout, an unknown device and fp16 are refused with a one-line error naming the
value, and write nothing to stdout; --device cuda, where no GPU answers, fails so too, naming
CUDA's error (where one answers, gpu-check.sh runs it).

usage: bench_rank_cli_test.py MESHTP DATA"""
import json
import subprocess
import sys

meshtp, data = sys.argv[1], sys.argv[2]


def run(*args):
    return subprocess.run([meshtp, "bench", "rank", "--data", data, "--steps", "1", "--warmup",
                           "1", *args], capture_output=True, text=True, timeout=300)


def check(condition, what):
    if not condition:
        sys.exit(f"bench_rank_cli: FAILED: {what}")


memory = {}
for layout in (["--mesh", "8x1", "--rank", "0"],
               ["--dp", "2", "--pp", "2", "--microbatches", "2", "--mesh", "2x1", "--rank", "1"],
               ["--mesh", "8x1", "--rank", "0", "--precision", "bf16"],
               ["--mesh", "4x1", "--sequence-parallel", "--rank", "0", "--precision", "bf16"]):
    done = run("--model", "small", "--json", *layout)
    check(done.returncode == 0, f"{layout}: exit {done.returncode}: {done.stderr}")
    r = json.loads(done.stdout)
    check(r["bench"] == "rank" and r["collectives"] == "alone", f"{layout}: {r}")
    ratio = r["predicted"]["memory_gib"] / r["measured"]["memory_gib"]
    check(abs(ratio - 1) <= 0.10, f"{layout}: predicted/measured memory {ratio:.3f}")
    check(r["measured"]["compute_s"] > 0, f"{layout}: compute {r['measured']}")
    kinds = {s["collective"] for s in r["skipped"]}
    check(kinds, f"{layout}: no skipped collective counted")
    memory[" ".join(layout)] = r["measured"]["memory_gib"]
    print(f"{' '.join(layout)}: memory predicted/measured {ratio:.3f}, skipped {sorted(kinds)}")
check(memory["--mesh 8x1 --rank 0 --precision bf16"] < memory["--mesh 8x1 --rank 0"],
      f"bf16 takes no less memory than fp32: {memory}")

for args, message in ((["--mesh", "8x1", "--rank", "8"], "--rank 8 is outside the layout's 8 ranks"),
                      (["--mesh", "2x1", "--device", "tpu"], "--device 'tpu' is not cpu or cuda"),
                      ([], "bench rank needs the layout: --plan FILE or --mesh d1xd2"),
                      (["--mesh", "2x1", "--precision", "fp16"],
                       "--precision fp16 is not one a device trains in")):
    done = run("--model", "tiny", *args)
    check(done.returncode != 0 and message in done.stderr and not done.stdout,
          f"{args}: exit {done.returncode}, stderr {done.stderr!r}, stdout {done.stdout!r}")
done = run("--model", "tiny", "--mesh", "2x1", "--device", "cuda")
if done.returncode != 0:
    check("error: --device cuda: " in done.stderr and not done.stdout,
          f"--device cuda: exit {done.returncode}, stderr {done.stderr!r}, stdout {done.stdout!r}")
print("bench_rank_cli: ok")
