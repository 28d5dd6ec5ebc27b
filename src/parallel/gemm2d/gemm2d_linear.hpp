// A linear layer under 2D tensor parallelism (MeshSlice §3.2.1, Table 1): its
// forward, backward-data and backward-weight GeMMs as three gemm2d calls whose dataflows
// keep ONE matrix (and its gradient) stationary in all three, with no transposes.
//
//   N tokens (b·s, split over mesh rows)   K input features   M output features
//   y = x·Wᵀ    dx = dy·W    dW = dyᵀ·x    (W is [M, K], PyTorch's [out, in]; no bias)
// Every stored matrix is 2D-blocked [Shard(0), Shard(1)]. Which matrix stays, and so how the
// weight and the activations are stored, is the layer's Stationary mode:
//
//   mode       weight    in  → out     forward          backward-data        backward-weight
//   kInput     W [M,K]   x   → y       y  = LS(x, W)    dx  += OS(dy, W)     dW += RS(dy, x)
//   kOutput    V [K,M]   x   → y       y  = OS(x, V)    dx  += LS(dy, V)     dV += RS(x, dy)
//   kWeight    W [M,K]   x   → yᵀ      yᵀ = LS(W, x)    dx  += RS(dyᵀ, W)    dW += OS(dyᵀ, x)
//   kWeightT   V [K,M]   xᵀ  → y       y  = RS(xᵀ, V)   dxᵀ += LS(V, dy)     dV += OS(xᵀ, dy)
//
// with OS(A,B) = A·B (C stays), LS(A,B) = A·Bᵀ (A stays), RS(A,B) = Aᵀ·B (B stays), V = Wᵀ.
// input keeps x/dx, output y/dy, weight W/dW: the weight-stationary pair hands transposed
// activations between layers (layer 1 emits yᵀ, layer 2 takes it with transposed_input),
// the paper's "transposed dataflow", so no layer ever transposes.
// layout::choose_stationary() picks the operand keeping the largest matrix (auto).
//
// Backward ADDS into dx and dW (llm.c convention); forward overwrites out.
#pragma once

#include <iosfwd>
#include <optional>

#include "parallel/gemm2d/gemm2d.hpp"

namespace meshtp::parallel {

using layout::Stationary;

struct Gemm2dLinearOptions {
  std::optional<Stationary> stationary;  // unset: auto
  bool allow_weight_stationary = false;  // auto may pick the weight (output yᵀ)
  bool transposed_input = false;         // the weight-stationary mode taking xᵀ
  Algorithm algo = Algorithm::kMeshSlice;
  layout::Gemm2dParams params{};  // the slice count S (params.slices)
  int progress_splits = 4;
};

// The three GeMMs of one layer, resolved and validated.
struct Gemm2dLinearPlan {
  std::int64_t n = 0, k = 0, m = 0;
  Stationary stationary = Stationary::kInput;  // resolved
  bool transposed_input = false;
  Gemm2dOptions forward, backward_data, backward_weight;

  // Global shapes as stored: the weight, the layer input / output (possibly transposed).
  Shape weight_shape() const;
  Shape input_shape() const;
  Shape output_shape() const;
};
std::ostream& operator<<(std::ostream& os, const Gemm2dLinearPlan& plan);

// Resolves auto and validates all three products on an nr × nc mesh; errors name the
// product ("backward-weight (rs): m=…"). Pure: call before any communication.
Gemm2dLinearPlan plan_gemm2d_linear(int nr, int nc, std::int64_t n, std::int64_t k, std::int64_t m,
                                    const Gemm2dLinearOptions& options);

// out = forward(in, weight) — local blocks of the plan's stored shapes.
// On the seam: packed views in the workspace backend's memory (gemm2d's rules). The host
// forms below wrap host fp32 blocks as views of the CPU backend.
void gemm2d_linear_forward(const mesh::DeviceMesh& mesh, const Gemm2dLinearPlan& plan,
                           const View& out, const View& in, const View& weight,
                           Gemm2dWorkspace& ws);
void gemm2d_linear_backward(const mesh::DeviceMesh& mesh, const Gemm2dLinearPlan& plan,
                            const View& din, const View& dweight, const View& dout, const View& in,
                            const View& weight, Gemm2dWorkspace& ws);

void gemm2d_linear_forward(const mesh::DeviceMesh& mesh, const Gemm2dLinearPlan& plan,
                           MatrixView out, ConstMatrixView in, ConstMatrixView weight,
                           Gemm2dWorkspace& ws);

// din += backward-data(dout, weight);  dweight += backward-weight(dout, in).
void gemm2d_linear_backward(const mesh::DeviceMesh& mesh, const Gemm2dLinearPlan& plan,
                            MatrixView din, MatrixView dweight, ConstMatrixView dout,
                            ConstMatrixView in, ConstMatrixView weight, Gemm2dWorkspace& ws);

}  // namespace meshtp::parallel
