#!/usr/bin/env python3
"""Writes the nccl-tests logs of this folder: synthetic, in the formats nccl-tests print.

Not measured: every time comes from a model of NCCL and a fixed seed, so the files are
reproducible (`python3 make_logs.py` rewrites them). The model is NCCL's own kind of cost
model: per message size NCCL runs the fastest of its protocols (LL, LL128, Simple), each
priced as a ring, latency + n·(bytes/P)/bw; here T(size) = min over the protocols of
lat_p + f·size/busbw_p (f the nccl-tests bus factor, so busbw_p is the protocol's bus
bandwidth), times a 1% log-normal noise. The numbers are A100-like (DGX A100: NVSwitch,
~232 GB/s all_reduce busbw; two nodes over 8x HDR InfiniBand: ~186 GB/s), not copied from
any log. What each file exercises is in its first comment line.
"""
import math
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 1 << 30
TYPES = {"float": 4, "half": 2, "bfloat16": 2}


def fmt_float(value, width):
    """nccl-tests' getFloatStr: the widest of %.2f, %.1f, %.0f, %e that fits."""
    for spec in ("%*.2f", "%*.1f", "%*.0f"):
        s = spec % (width, value)
        if len(s) <= width:
            return s
    return "%*.1e" % (width, value)


def bus_factor(coll, p):
    return {"all_reduce": 2 * (p - 1) / p, "all_gather": (p - 1) / p,
            "reduce_scatter": (p - 1) / p, "sendrecv": 1.0}[coll]


def sizes_and_counts(coll, p, e, lo, hi):
    """(printed size, printed count) per requested size, as nccl-tests compute them."""
    out, s = [], lo
    while s <= hi:
        count = s // e
        if coll in ("all_gather", "reduce_scatter"):
            base = (count // p) & ~(16 // e - 1)   # per-rank count, 16-byte aligned
            out.append((base * p * e, base))
        else:
            out.append((count * e, count))
        s *= 2
    return out


def time_us(coll, p, size, protocols, rng):
    f = bus_factor(coll, p)
    t = min(lat + f * size / (bw * 1e3) for lat, bw in protocols)  # µs (GB/s = 1e3 B/µs)
    return t * math.exp(rng.gauss(0, 0.01))


def rank_lines(style, hosts, per_host, gpu, gpus_per_process, pid0=41000):
    lines, rank = [], 0
    for h in hosts:
        for d in range(per_host):
            if style == "2022":
                lines.append("#  Rank %2d Group  0 Pid %6d on %10s device %2d [0x%02x] %s"
                             % (rank, pid0 + rank // gpus_per_process, h, d, 0x07 + 0x10 * d, gpu))
            else:
                lines.append("#   Rank %2d Pid %6d on %10s device %2d [0x%02x] %s"
                             % (rank, pid0 + rank // gpus_per_process, h, d, 0x07 + 0x10 * d, gpu))
            rank += 1
    return lines


def write_log(name, comment, coll, hosts, per_host, protocols, *, style="2022", lo=8,
              hi=8 * GIB, type_="float", program_line=False, nccl_info=False,
              tag_output=False, gpus_per_process=1, seed=1):
    rng = random.Random(seed)
    p = len(hosts) * per_host
    e = TYPES[type_]
    redop = {"all_reduce": "sum", "reduce_scatter": "sum"}.get(coll, "none")
    out = ["# " + c for c in comment]
    if program_line:
        out.append("# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703")
        out.append("# Collective test starting: %s_perf" % coll)
    if style == "2022":
        out.append("# nThread 1 nGpus %d minBytes %d maxBytes %d step: 2(factor) warmup iters: 5 "
                   "iters: 20 agg iters: 1 validation: 1 graph: 0" % (gpus_per_process, lo, hi))
    else:
        out.append("# nThread 1 nGpus %d minBytes %d maxBytes %d step: 2(factor) warmup iters: 5 "
                   "iters: 20 validation: 1 " % (gpus_per_process, lo, hi))
    out.append("#")
    out.append("# Using devices")
    out += rank_lines(style, hosts, per_host, "NVIDIA A100-SXM4-80GB", gpus_per_process)
    if nccl_info:
        out.append("%s:%d:%d [0] NCCL INFO Bootstrap : Using ib0:10.1.0.11<0>" % (hosts[0], 41000, 41000))
        out.append("%s:%d:%d [0] NCCL INFO NCCL version 2.18.5+cuda12.2" % (hosts[0], 41000, 41000))
        out.append("%s:%d:%d [0] NCCL INFO comm 0x55d0c3a0 rank 0 nranks %d cudaDev 0 busId 7000 - Init COMPLETE"
                   % (hosts[0], 41000, 41077, p))
    out.append("#")
    if style == "2022":
        out.append("#                                                              out-of-place                       in-place          ")
        out.append("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong")
        out.append("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ")
    else:
        out.append("#                                                 out-of-place                       in-place          ")
        out.append("#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error")
        out.append("#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ")
    f = bus_factor(coll, p)
    bus_sum, rows = 0.0, 0
    for size, count in sizes_and_counts(coll, p, e, lo, hi):
        if style == "2022":
            line = "%12d  %12d  %8s  %6s  %6d" % (size, count, type_, redop, -1)
        else:
            line = "%12d  %12d  %6s  %6s" % (size, count, type_, redop)
        for in_place in (False, True):
            t = time_us(coll, p, size, protocols, rng) if size else 5.0 + rng.random()
            algbw = size / t / 1e3 if size else 0.0
            busbw = algbw * f
            wrong = "N/A" if coll == "sendrecv" and in_place else "0"
            if style == "2022":
                line += "  %7s  %6.2f  %6.2f  %5s" % (fmt_float(t, 7), algbw, busbw, wrong)
            else:
                line += "  %7s  %6.2f  %6.2f  %5s" % (fmt_float(t, 7), algbw, busbw,
                                                      "N/A" if wrong == "N/A" else "0e+00")
            if not in_place:
                bus_sum += busbw
                rows += 1
        out.append(line)
    out.append("# Out of bounds values : 0 OK")
    out.append("# Avg bus bandwidth    : %g " % (bus_sum / rows))
    out.append("#")
    if program_line:
        out.append("# Collective test concluded: %s_perf" % coll)
    if tag_output:
        out = ["[1,0]<stdout>:" + l for l in out]
    with open(os.path.join(HERE, name), "w") as fh:
        fh.write("\n".join(out) + "\n")


# (latency µs, busbw GB/s) of LL, LL128, Simple.
NVSWITCH = [(14, 45), (22, 170), (34, 232)]
NVSWITCH_GATHER = [(10, 40), (16, 160), (26, 225)]
NVSWITCH_P2P = [(7, 30), (10, 120), (14, 228)]
TWO_NODES = [(25, 18), (40, 95), (62, 186)]

ONE_HOST = ["dgx-a01"]
write_log("all_reduce_perf.log",
          ["Synthetic (tests/plan/data/nccl-tests/make_logs.py): all_reduce_perf -b 8 -e 8G -f 2 -g 8 on one",
           "DGX A100-like node: one process, 8 GPUs (-g 8); nccl-tests 2.13-2.16 format, no program line."],
          "all_reduce", ONE_HOST, 8, NVSWITCH, gpus_per_process=8, seed=11)
write_log("all_gather_perf.log",
          ["Synthetic (tests/plan/data/nccl-tests/make_logs.py): mpirun -np 8 all_gather_perf -b 8 -e 8G -f 2",
           "on one DGX A100-like node, NCCL_DEBUG=INFO lines interleaved; the program line names it; the",
           "smallest sizes round to 0 bytes per rank (size 0 rows)."],
          "all_gather", ONE_HOST, 8, NVSWITCH_GATHER, program_line=True, nccl_info=True, seed=12)
write_log("reduce_scatter_perf.log",
          ["Synthetic (tests/plan/data/nccl-tests/make_logs.py): mpirun --tag-output -np 8 reduce_scatter_perf",
           "-b 1K -e 4G -f 2 on one DGX A100-like node, in the nccl-tests 2.x (2019-2021) format: no Group,",
           "no root column, an 'error' column; every line prefixed by Open MPI's --tag-output."],
          "reduce_scatter", ONE_HOST, 8, NVSWITCH_GATHER, style="2021", lo=1024, hi=4 * GIB,
          tag_output=True, seed=13)
write_log("sendrecv_perf.log",
          ["Synthetic (tests/plan/data/nccl-tests/make_logs.py): mpirun -np 8 sendrecv_perf -b 8 -e 8G -f 2 on",
           "one DGX A100-like node: every rank sends to rank+1, one ring step."],
          "sendrecv", ONE_HOST, 8, NVSWITCH_P2P, program_line=True, seed=14)
write_log("all_reduce_perf_2x8.log",
          ["Synthetic (tests/plan/data/nccl-tests/make_logs.py): mpirun -np 16 -N 8 all_reduce_perf -b 8 -e 8G",
           "-f 2 over two DGX A100-like nodes joined by 8x HDR InfiniBand each: 16 ranks, 8 per host."],
          "all_reduce", ["dgx-a01", "dgx-a02"], 8, TWO_NODES, seed=15)

# Malformed: all_reduce_perf.log with its 1 MiB row cut short, as a log truncated mid-write.
with open(os.path.join(HERE, "all_reduce_perf.log")) as fh:
    lines = fh.read().split("\n")
lines[0] = "# Malformed on purpose (make_logs.py): all_reduce_perf.log with its 1 MiB row cut short."
lines[1] = "# The error must name this file's line of that row."
cut = next(i for i, l in enumerate(lines) if l.split()[:1] == ["1048576"])
lines[cut] = "  ".join(lines[cut].split()[:7])
with open(os.path.join(HERE, "malformed_all_reduce_perf.log"), "w") as fh:
    fh.write("\n".join(lines))
