#!/usr/bin/env python3
"""check_collectives.py LIMIT [KINDS] < OUTPUT: every row of `meshtp simulate --what
collectives` (simulated µs beside the planner's model, err%) of the comma-separated KINDS
(default all_reduce,all_gather,reduce_scatter) is within LIMIT percent.

The rows read `DIM COLLECTIVE BYTES SIM_US RING_US ERR%`. On a platform whose rings cross a
shared link (pcie-8xa100's socket link, ib-2x8xa100's InfiniBand uplinks) this holds only
when the simulated all-gather is a ring — every rank sends to its ring neighbour — as the
planner's model (plan/mesh_links.hpp) and NCCL-class libraries assume; SMPI's `ring`
all-gather sends step i's block to rank + i, crossing the shared link up to P/2 times per
step (2.3x the ring's time on pcie-8xa100, mesh 1x8). A broadcast is priced as the library's
pipelined chain (plan/gemm2d_cost.hpp), which the simulator runs (smpi/bcast:ompi_pipeline).
"""
import sys

limit = float(sys.argv[1])
kinds = (sys.argv[2] if len(sys.argv) > 2 else "all_reduce,all_gather,reduce_scatter").split(",")
checked, worst = 0, 0.0
for line in sys.stdin:
    print(line, end="")
    f = line.split()
    if len(f) == 6 and f[1] in kinds:
        err = abs(float(f[5].rstrip("%")))
        worst = max(worst, err)
        checked += 1
if checked == 0:
    sys.exit(f"error: no {'/'.join(kinds)} row in the output")
if worst > limit:
    sys.exit(f"error: a simulated collective is {worst:.1f}% off the planner's ring model "
             f"(limit {limit}%)")
print(f"planner ring model: {checked} collectives within {worst:.1f}% (limit {limit}%)")
