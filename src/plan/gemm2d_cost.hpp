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
// Time (g = gemm time of one iteration; in = the input collective, out = the output one):
//   OS:    prologue = max(c_v, c_h)  steady = max(c_v, c_h, g)    epilogue = g
//   LS/RS: prologue = c_in           steady = max(c_in, g, c_out) epilogue = g + c_out
//   Collective   1 iteration, full shards (no overlap: prologue + gemm + epilogue)
//   MeshSlice    S iterations of shard/S and gemm/S; S = 1 is exactly Collective
//   SUMMA        Kp iterations of one panel broadcast/reduce and gemm/Kp
//   Wang         prologue = blocking collective of the other dir; P_d iterations of gemm/P_d
//                overlapped with one send/recv step T_launch + L_sync + shard/BW
//   Cannon       prologue = T_launch + ⌊q/2⌋·(L_sync + shard/BW) skew; q iterations of gemm/q
//                overlapped with one shift L_sync + shard/BW per direction; LS/RS add the
//                output's unskew to the epilogue
//
// The time model of SUMMA streams each broadcast in D packets (D+P−1 stages, D optimal,
// MeshSlice §2.3.3); the runtime leaves packetisation to MPI.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

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
PipelineEstimate gemm2d_estimate(Algorithm algorithm, const Gemm2dShape& shape,
                                 const Gemm2dParams& params, const MeshLinks& links,
                                 double flops_per_s);

// Peak transient buffer bytes per rank (gathered blocks, partial outputs before RdS).
double gemm2d_workspace_bytes(Algorithm algorithm, const Gemm2dShape& shape,
                              const Gemm2dParams& params);

// SUMMA's pipelined ring broadcast/reduce of `panel_bytes` over P ranks in D packets:
// T_launch + (D+P−1)·(L_sync + panel/(D·BW)); packets = 0 picks the best D.
double summa_panel_time(const RingParams& ring, int p, double panel_bytes, int packets);
int summa_best_packets(const RingParams& ring, int p, double panel_bytes);

}  // namespace meshtp::plan
