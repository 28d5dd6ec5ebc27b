// Cost of ONE distributed 2D GeMM per algorithm (MeshSlice §2.3, §3.1, §3.2): the traffic
// each rank generates (steps and bytes — what the runtime in src/parallel/gemm2d/* is checked
// against) and the pipelined time estimate (prologue + (iterations−1)·steady + epilogue).
//
// Mesh Nr × Nc (= mesh dims 0 and 1). Chip (i, j) holds block (i, j) of every matrix: rows
// over mesh rows, columns over mesh columns. "Vertical" traffic runs along a mesh column
// (between rows, mesh dim 0, P = Nr); "horizontal" along a mesh row (mesh dim 1, P = Nc).
//
//   dataflow  C =      stationary  horizontal (P = Nc)     vertical (P = Nr)     sliced dim
//   OS        A·B      C           A m×k  all-gather       B k×n  all-gather     k
//   LS        A·Bᵀ     A m×k       C m×n  reduce-scatter   B n×k  all-gather     n
//   RS        Aᵀ·B     B k×n       A k×m  all-gather       C m×n  reduce-scatter m
//
// shard(X) = |X|/(Nr·Nc) elements · element bytes: one rank's block of the moving matrix X.
// flops    = 2·m·n·k/(Nr·Nc) per rank, at the device's effective FLOP/s (gemm = flops/F).
// Ring collective over P ranks (MeshSlice Eq. 5): c(x) = T_launch + (P−1)(L_sync + x/BW).
//
// Steps and bytes per rank, per direction d with P_d ranks and moving matrix X_d
// (bytes = what one rank sends; steps = synchronised rounds; 0 when P_d = 1):
//   Collective     1 launch,  P−1 steps,          (P−1)·shard bytes
//   MeshSlice(S)   S launches, S·(P−1) steps,     (P−1)·shard bytes   (S partial collectives)
//   Wang           decomposed dir: P−1 send/recv launches and steps, (P−1)·shard bytes;
//                  other dir: one blocking collective as Collective
//   SUMMA(Kp)      Kp broadcasts (inputs) / reduces (outputs) of panels of shard·P/Kp bytes:
//                  Kp launches, Kp·(P−1) pipeline-fill steps, (P−1)·shard bytes
//   Cannon (q×q)   skew (inputs) / unskew (output): 1 send/recv of a shard, ⌊q/2⌋ hops;
//                  then q−1 shifts of a shard: q launches, q steps, q·shard bytes
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
// Worked example: OS, m = n = k = 1024, 2×2 mesh, fp32: shard(A) = shard(B) = 1 MiB;
// Collective: one all-gather per direction of (2−1)·1 MiB per rank, 1 step each.
//
// The runtime (parallel/gemm2d, parallel::gemm2d_cost) counts the same things:
//   bytes_row = horizontal.bytes_per_rank, bytes_col = vertical.bytes_per_rank (all five);
//   sync_steps = vertical.steps + horizontal.steps for Collective, MeshSlice, SUMMA, Wang;
//   comm_calls = launches summed, except that it counts a send/recv step as two calls.
// Its Wang decomposes the row (horizontal) direction, the default here and the only one the
// autotuner tries. For Cannon it counts rounds over both directions (q+1 with the skew).
// The time model of SUMMA streams each broadcast in D packets (D+P−1 stages, D optimal,
// MeshSlice §2.3.3); the runtime leaves packetisation to MPI.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "layout/vocabulary.hpp"
#include "plan/mesh_links.hpp"

namespace meshtp::plan {

using layout::Algorithm;
using layout::CollectiveKind;
using layout::Dataflow;
enum class Direction { kVertical, kHorizontal };
const char* name(Direction d);

// One 2D GeMM as the mesh sees it (shapes are global).
struct Gemm2dShape {
  Dataflow dataflow = Dataflow::kOS;
  std::int64_t m = 0, n = 0, k = 0;  // C is m×n, contraction k; A, B per the table above
  int nr = 1, nc = 1;                // mesh dims 0 and 1
  int element_bytes = 4;

  double flops_per_rank() const;
  // Bytes of one rank's block of the matrix moving in direction d.
  double shard_bytes(Direction d) const;
  // Global extent of the sliced dim (k for OS, n for LS, m for RS).
  std::int64_t sliced_extent() const;
  // "m=1000 is not divisible by mesh dim 0 (size 3)" when a matrix does not shard evenly.
  std::optional<std::string> invalid_reason() const;
};
std::ostream& operator<<(std::ostream& os, const Gemm2dShape& s);

// Algorithm parameters; each algorithm reads its own field.
struct Gemm2dParams {
  int slices = 1;                                  // MeshSlice S
  int panels = 0;                                  // SUMMA Kp (multiple of lcm(Nr, Nc))
  int summa_packets = 0;                           // SUMMA D per broadcast; 0 = cost-optimal
  Direction wang_decomposed = Direction::kHorizontal;  // Wang: the direction split into steps
};

// Why (algorithm, shape, params) cannot run: Cannon on a non-square mesh, S not dividing the
// local sliced extent, Kp not a multiple of lcm(Nr, Nc), … nullopt when valid.
std::optional<std::string> gemm2d_invalid_reason(Algorithm algorithm, const Gemm2dShape& shape,
                                                 const Gemm2dParams& params);

struct DirectionTraffic {
  Direction direction = Direction::kVertical;
  char matrix = '-';  // 'A', 'B' or 'C'
  CollectiveKind kind = CollectiveKind::kNone;
  int group_size = 1;    // P
  int launches = 0;      // communication calls
  std::int64_t steps = 0;  // synchronised rounds, each paying L_sync
  double bytes_per_rank = 0;
};
struct Gemm2dTraffic {
  DirectionTraffic vertical, horizontal;
  double flops_per_rank = 0;
  int gemm_calls = 0;  // local (partial) GeMM calls
};
Gemm2dTraffic gemm2d_traffic(Algorithm algorithm, const Gemm2dShape& shape,
                             const Gemm2dParams& params);

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
