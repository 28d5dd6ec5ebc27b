// The traffic of ONE distributed 2D GeMM per algorithm (MeshSlice §2.3, §3.1): what each
// rank sends, per mesh direction, with which collective — the one description the planner
// prices (plan/gemm2d_cost.hpp adds the time) and the runtime reports
// (parallel::gemm2d_traffic), and the one validity rule both apply (parallel::validate
// throws what gemm2d_invalid_reason returns).
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
//
// Bytes a rank sends in one collective of n bytes over P ranks: layout::sent_bytes.
//
// Steps and bytes per rank, per direction d with P_d ranks and moving matrix X_d
// (bytes = what one rank sends; steps = synchronised rounds; 0 when P_d = 1):
//   Collective     1 launch,  P−1 steps,          (P−1)·shard bytes
//   MeshSlice(S)   S launches, S·(P−1) steps,     (P−1)·shard bytes   (S partial collectives)
//   Wang           decomposed dir: P−1 steps, each sending half a shard to each ring
//                  neighbour (2(P−1) send/recv launches of shard/2), (P−1)·shard bytes;
//                  other dir: one blocking collective as Collective
//   SUMMA(Kp)      Kp broadcasts (inputs) / reduces (outputs) of panels of shard·P/Kp bytes:
//                  Kp launches, Kp·(P−1) pipeline-fill steps, (P−1)·shard bytes
//   Cannon (q×q)   skew (inputs) / unskew (output): 1 send/recv of a shard, ⌊q/2⌋ hops;
//                  then q−1 shifts of a shard: q launches, q steps, q·shard bytes (the worst
//                  rank: a rank whose skew is 0 sends nothing then)
//
// Worked example: OS, m = n = k = 1024, 2×2 mesh, fp32: shard(A) = shard(B) = 1 MiB;
// Collective: one all-gather per direction of (2−1)·1 MiB per rank, 1 step each.
// The runtime's Wang decomposes the row (horizontal) direction, the default here.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "layout/vocabulary.hpp"

namespace meshtp::layout {

enum class Direction { kVertical, kHorizontal };  // mesh dim 0, mesh dim 1
const char* name(Direction d);
inline int mesh_dim(Direction d) { return d == Direction::kVertical ? 0 : 1; }

// One 2D GeMM as the mesh sees it (shapes are global): the one shape type of the planner
// and the runtime (parallel/gemm2d/gemm2d.hpp runs it).
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
  int group_size(Direction d) const { return d == Direction::kVertical ? nr : nc; }
  // Is the matrix moving in direction d the output C (reduce-scattered), not an input?
  bool moves_output(Direction d) const;
  // "m=1000 is not divisible by mesh dim 0 (size 3)" when a matrix does not shard evenly.
  std::optional<std::string> invalid_reason() const;
  bool operator==(const Gemm2dShape&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Gemm2dShape& s);

// Algorithm parameters; each algorithm reads its own field. The one holder of the slice
// count: the plan file's linears (layout::LinearPlan::gemm2d), the CLI's --slices
// (PlanSpelling::gemm2d), the runtime's options (parallel::Gemm2dOptions::params,
// Gemm2dLinearOptions::params) and the planner all hold this struct, not a copy of S.
struct Gemm2dParams {
  // The one slice count S of the plan file, the CLI's --slices, the runtime and the planner.
  // MeshSlice: S slices. SUMMA: S panels per lcm(Nr, Nc) block, Kp = lcm·S (summa_panels).
  int slices = 1;
  int summa_packets = 0;                           // SUMMA D per broadcast; 0 = cost-optimal
  Direction wang_decomposed = Direction::kHorizontal;  // Wang: the direction split into steps

  int summa_panels(const Gemm2dShape& shape) const;  // summa_panels(nr, nc, slices)
  bool operator==(const Gemm2dParams&) const = default;
};

// SUMMA's panel count Kp = lcm(Nr, Nc)·S: every panel lies in one rank's shard of both A and
// B. The only place Kp is derived from S (the runtime's summa.cpp and the planner call it).
int summa_panels(int nr, int nc, int slices);

// Why (algorithm, shape, params) cannot run: Cannon on a non-square mesh, S not dividing the
// local sliced extent, Kp not a multiple of lcm(Nr, Nc), … nullopt when valid.
std::optional<std::string> gemm2d_invalid_reason(Algorithm algorithm, const Gemm2dShape& shape,
                                                 const Gemm2dParams& params);

struct DirectionTraffic {
  Direction direction = Direction::kVertical;
  char matrix = '-';  // 'A', 'B' or 'C'
  CollectiveKind kind = CollectiveKind::kNone;
  int group_size = 1;    // P
  int launches = 0;          // communication calls
  double message_bytes = 0;  // of one call (sent_bytes' n)
  std::int64_t steps = 0;    // synchronised rounds, each paying L_sync
  double bytes_per_rank = 0;  // launches · sent_bytes(kind, P, message_bytes)
};
struct Gemm2dTraffic {
  DirectionTraffic vertical, horizontal;
  double flops_per_rank = 0;
  int gemm_calls = 0;  // local (partial) GeMM calls
  double bytes_per_rank() const { return vertical.bytes_per_rank + horizontal.bytes_per_rank; }
  int launches() const { return vertical.launches + horizontal.launches; }
  std::int64_t steps() const { return vertical.steps + horizontal.steps; }
};
Gemm2dTraffic gemm2d_traffic(Algorithm algorithm, const Gemm2dShape& shape,
                             const Gemm2dParams& params);

}  // namespace meshtp::layout
