// The four FC layers of a transformer layer as 2D GeMMs (MeshSlice §3.2.1).
//
//   FC layer  Y = X·W     X: M×K (M = b·s tokens)   W: K×N   Y: M×N
//   qkv  K=h N=3h    proj  K=h N=h    mlp1  K=h N=4h    mlp2  K=4h N=h
//   (a Llama-family model: qkv N = h + 2·g·d, mlp1 N = f or 2f (SwiGLU), mlp2 K = f;
//   layout/model_shape.hpp)
//
// Training runs three GeMMs per layer: forward Y = X·W, backward-data dX = dY·Wᵀ,
// backward-weight dW = Xᵀ·dY. The autotuner keeps the LARGEST of X, W, Y stationary in all
// three (ties: Y, then X, then W), so each matrix and its gradient always flow the same way
// and nothing is transposed between GeMMs. Activations keep tokens (M) over mesh rows. The
// canonical GeMM (gemm2d_cost.hpp) of each pass:
//
//   stationary  forward                 backward-data            backward-weight
//   Y           OS(A=X,   B=W)   → Y    LS(A=dY,  B=W)   → dX    RS(A=X,   B=dY) → dW
//   X           LS(A=X,   B=Wᵀ)  → Y    OS(A=dY,  B=Wᵀ)  → dX    RS(A=dY,  B=X)  → dWᵀ
//   W           LS(A=Wᵀ,  B=X)   → Yᵀ   RS(A=dYᵀ, B=Wᵀ)  → dX    OS(A=dYᵀ, B=X)  → dWᵀ
//
//   so with Y stationary, X (and dX) move horizontally and W (and dW) vertically; with X
//   stationary, Y/dY horizontally and W vertically; with W stationary, Y/dY horizontally
//   and X/dX vertically.
//
// 1D TP (Megatron with sequence parallelism, MeshSlice's "1D TP" baseline) on P = N ranks,
// W sharded, activations sequence-sharded between layers, blocking collectives of the
// activation (bytes per rank = (P−1)·|act|/P · element bytes):
//   column-parallel (qkv, mlp1): fwd all_gather X; bwd-data reduce_scatter dX;
//                                bwd-weight none (the runtime keeps the gathered X:
//                                parallel/linear2d.hpp's x_g)
//   row-parallel (proj, mlp2):   fwd reduce_scatter Y; bwd-data all_gather dY;
//                                bwd-weight none (dY is still gathered)
// The LayerNorm gradients' all-reduce is layout::elementwise_traffic's.
#pragma once

#include <array>
#include <cstdint>

#include "plan/gemm2d_cost.hpp"
#include "plan/model_spec.hpp"

namespace meshtp::plan {

using layout::Linear;
using layout::Stationary;  // output: Y (C-stn), input: X (A-stn), weight: W (B-stn)
enum class Pass { kForward, kBackwardData, kBackwardWeight };

const char* name(Pass p);
constexpr std::array<Pass, 3> kPasses{Pass::kForward, Pass::kBackwardData,
                                      Pass::kBackwardWeight};

struct FcShape {
  Linear layer = Linear::kQkv;
  std::int64_t tokens = 0;  // M
  std::int64_t in = 0;      // K
  std::int64_t out = 0;     // N
};

std::array<FcShape, 4> fc_layers(const ModelSpec& model);

// layout::choose_stationary of the shape: the largest of Y (M·N), X (M·K) and W (K·N), ties
// in that order; W only when `allow_weight` (the whole-model runtime keeps X or Y).
Stationary choose_stationary(const FcShape& fc, bool allow_weight = true);

// The canonical 2D GeMM of `pass` (table above).
Gemm2dShape fc_gemm(const FcShape& fc, Stationary stationary, Pass pass, int nr, int nc,
                    int element_bytes);

// 1D TP: the one collective of `pass` on P ranks (kind kNone when the pass has none), with
// its bytes per rank and the blocking time T = collective + GeMM.
struct Tp1dPass {
  CollectiveKind kind = CollectiveKind::kNone;
  double shard_bytes = 0;     // |activation|/P · element bytes
  double bytes_per_rank = 0;  // (P−1)·shard
  std::int64_t steps = 0;     // P−1 ring steps
  double flops_per_rank = 0;  // 2·M·N·K/P
};
Tp1dPass tp1d_pass(const FcShape& fc, Pass pass, int p, int element_bytes);

}  // namespace meshtp::plan
