// Time of ONE distributed 2D GeMM per algorithm (MeshSlice §2.3, §3.1, §3.2): the pipelined
// estimate (prologue + (iterations−1)·steady + epilogue) of the traffic that
// layout/gemm2d_traffic.hpp describes — each direction's launches, kind and message size
// come from there (the same numbers the runtime's traffic counter is checked against), the
// iterations are its local GeMM calls.
//
// One launch per direction: a ring all-gather / reduce-scatter of message n over P ranks
// (MeshSlice Eq. 5) c = T_launch + (P−1)(L_sync + (n/P)/BW); a SUMMA panel broadcast /
// reduce (below); a send/recv step L_sync + n/BW. flops = 2·m·n·k/(Nr·Nc) per rank at the
// device's effective FLOP/s (gemm = flops/F, g = gemm/iterations).
//
// Where both dims' collectives run at once (OS's two gathers, LS/RS's gather beside the
// reduce-scatter, SUMMA's two broadcasts, Cannon's two skews), max(a, b) is the ideal of
// separate links; `links.concurrent(a, b)` adds the measured sharing (MeshLinks::dim_sharing).
// Time (g = gemm time of one iteration; in = the input collective, out = the output one):
//   OS:    prologue = max(c_v, c_h)  steady = max(c_v, c_h, g)    epilogue = g
//   LS/RS: prologue = c_in           steady = max(c_in, g, c_out) epilogue = g + c_out
//   Collective   1 iteration, full shards (no overlap: prologue + gemm + epilogue)
//   MeshSlice    S iterations of shard/S and gemm/S; S = 1 is exactly Collective
//   SUMMA        Kp iterations of one panel broadcast/reduce and gemm/Kp; consecutive
//                broadcasts overlap their chains' fill, so the steady state pays a
//                broadcast's summa_panel_interval, not its whole chain
//   Wang         prologue = blocking collective of the other dir; P_d iterations of gemm/P_d
//                (two half-block calls each) overlapped with one two-way step, half a shard
//                to each neighbour: T_launch + L_sync + (shard/2)/BW_two_way (DimLinks)
//   Cannon       prologue = the skew, each moving block sent once to its rotated place,
//                T_launch + L_skew + shard/BW_skew per operand (mesh_links.hpp's DimLinks::skew;
//                OS rotates A and B at once: the slower); q iterations of gemm/q overlapped
//                with one shift L_sync + shard/BW per direction; LS/RS add the output's
//                un-skew to the epilogue
//
// SUMMA's panel broadcast / reduce is priced as what the runtime's library runs: Open MPI's
// tuned `pipeline` — a chain of the P ranks, the panel cut into segments of a fixed size that
// its decision rule picks by P and message size (library_segment_bytes; SMPI's ompi_pipeline,
// the simulator's, is the same code). MeshSlice §2.3.3 instead streams D packets with D chosen
// optimally (summa_best_packets); no MPI library does that per message, and on 3 µs links the
// difference is 6.4x: a 16 MiB panel on nvlink-network-16's 4-rank rows is 128 segments of
// 128 KiB, 130 · (3 + 0.15) µs = 409 µs, against D* = 4 packets' 64 µs.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "core/gemm_model.hpp"
#include "layout/gemm2d_traffic.hpp"
#include "plan/mesh_links.hpp"

namespace meshtp::plan {

using layout::Algorithm;
using layout::CollectiveKind;
using layout::Dataflow;
using layout::Direction;
using layout::DirectionTraffic;
using layout::Gemm2dParams;
using layout::Gemm2dShape;
using layout::Gemm2dTraffic;

struct PipelineEstimate {
  double prologue_s = 0;
  double steady_s = 0;  // one steady-state iteration
  std::int64_t iterations = 1;
  double epilogue_s = 0;
  double total_s = 0;    // prologue + (iterations−1)·steady + epilogue
  double comm_s = 0;     // all communication, as if nothing overlapped
  double compute_s = 0;  // all local GeMM time
};
// `links` must be for mesh (shape.nr, shape.nc); throws otherwise or when invalid.
// `step_overhead_s` is the runtime's host time per local GeMM call beyond the GeMM itself
// (Topology::step_overhead_s: packing, issuing and testing the step's collectives), added to
// every call's g, so it sits on the compute path: a rank's core does it, nothing hides it.
PipelineEstimate gemm2d_estimate(Algorithm algorithm, const Gemm2dShape& shape,
                                 const Gemm2dParams& params, const MeshLinks& links,
                                 const GemmModel& gemm, double step_overhead_s = 0);

// Peak transient buffer bytes per rank (gathered blocks, partial outputs before RdS).
double gemm2d_workspace_bytes(Algorithm algorithm, const Gemm2dShape& shape,
                              const Gemm2dParams& params);

// SUMMA's pipelined chain broadcast/reduce of `panel_bytes` over P ranks in D segments: the
// root sends them one after another and each rank forwards a segment once it has it, so the
// last rank has the last segment after D−1 stages at the root and P−1 hops:
//   T = T_launch + (D−1)·(L_sync + seg/BW) + (P−1)·(L_sync + last/BW)
// seg = panel/D for packets = D > 0 (then (D+P−2) equal stages); packets = 0 cuts it as the
// library does: seg = library_segment_bytes, D = ⌈panel/seg⌉, last = panel − (D−1)·seg.
// Worked example: 16 MiB over P = 4 at L = 3 µs, BW = 900 GB/s, T_launch = 10 µs: seg =
// 128 KiB, D = 128, T = 10 + 130 · (3 + 0.146) = 419 µs.
double summa_panel_time(const RingParams& ring, int p, double panel_bytes, int packets,
                        CollectiveKind kind = CollectiveKind::kBroadcast);
// The same broadcast's cost per panel when panels follow each other (SUMMA's loop, the
// next broadcast posted before this one is waited): the next panel's root is the same rank or
// the next one down the chain, so its segments start as soon as that rank has sent this
// panel's, while the far end still fills — the P−1 fill steps overlap the next panel, and a
// panel costs its segments and one hop (cut in the segments of the whole chain's P):
//   T_launch + (D−1)·(L_sync + seg/BW) + (L_sync + last/BW)
// Worked example: 36 MiB panels over P = 32 at L = 3 µs, BW = 900 GB/s, T_launch = 10 µs:
// 288 segments of 128 KiB, 916 µs a panel against a lone broadcast's 1010 µs.
double summa_panel_interval(const RingParams& ring, int p, double panel_bytes, int packets);
// Open MPI's segment size for its pipelined broadcast (kBroadcast) or reduce (kReduce) of
// `bytes` over P ranks (the tuned component's fixed decision rule, as SMPI's ompi_pipeline
// algorithms implement it): broadcast 128 KiB while P < 1.6134e-6·bytes + 2.1102, else 64 KiB
// while P < 2.3679e-6·bytes + 1.1787, else 32 KiB while P < 3.2118e-6·bytes + 8.7936, else
// 128 KiB; reduce 1 KiB when P > 4.0039e-5·bytes + 9.7128, else 32 KiB when P >
// 3.2227e-6·bytes + 1.6761, else 64 KiB. A message shorter than a segment is one segment.
// (Open MPI's rule has 16 KiB in the third case; SimGrid 3.32's ompi_pipeline cuts 32 KiB
// there — measured: 64 KiB–2 MiB over 8 ranks take (bytes/32 KiB + 6) stages.)
double library_segment_bytes(CollectiveKind kind, int p, double bytes);
// MeshSlice §2.3.3's optimal packet count for the formula above, D* = sqrt((P−2)·x/(BW·L))
// (for comparison: the runtime's library does not pick it).
int summa_best_packets(const RingParams& ring, int p, double panel_bytes);

}  // namespace meshtp::plan
