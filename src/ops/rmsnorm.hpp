// RMSNorm over the last dim (Zhang & Sennrich 2019; Llama's norm): no centring, no bias.
//
//   N  rows (tokens), C  normalised features
//
//   forward : r_n = 1 / √((1/C)·Σ_c x[n,c]² + eps)
//             y   = x·r_n ⊙ g                       x, y: (N,C)  g: (C)
//             saves r (N) for the backward.
//   backward: x̂   = x·r_n,  h = dy ⊙ g
//             dx += r_n · (h − x̂ · mean_c(h ⊙ x̂))
//             dg += Σ_n dy ⊙ x̂
// (∂r/∂x_c = −r³·x_c/C, so dx_c = r·h_c − r³·x_c·(1/C)·Σ_k h_k·x_k.) Row sums in double.
// eps defaults to 1e-5 (Llama 2 and 3, `rms_norm_eps`).
//
// Over features split across ranks (sequence- or tensor-parallel layers), in two phases with
// a sum over the feature shards between them (the caller's all-reduce of `sums`), as
// layernorm.hpp's layernorm_shard_*: x holds C_local of the C_global features, sums N doubles.
//   forward   phase 1: sums = Σ_c x[n,c]² over local c
//             phase 2: with sums over all shards: r, y = x·r ⊙ g (local features)
//   backward  phase 1: sums = Σ_c h·x̂ (local c); dg += Σ_n dy ⊙ x̂
//             phase 2: dx += r·(h − x̂·(1/C_global)·sums)
// rmsnorm_forward/backward are the two phases on one shard. Simulated build, charged mode:
// phase 1 charges the op's bytes (LayerNorm's passes: op_costs.hpp) and neither phase computes.
#pragma once

#include <cstdint>
#include <span>

#include "core/norm_eps.hpp"  // kLayerNormEps, kRmsNormEps
#include "tensor/tensor.hpp"

namespace meshtp {

// y = x·r ⊙ g; writes r[n].
void rmsnorm_forward(MatrixView y, std::span<float> r, ConstMatrixView x, std::span<const float> g,
                     float eps = kRmsNormEps);

// dx += r·(h − x̂·mean(h⊙x̂)) with h = dy⊙g, x̂ = x·r;  dg += Σ_n dy⊙x̂
void rmsnorm_backward(MatrixView dx, std::span<float> dg, ConstMatrixView dy, ConstMatrixView x,
                      std::span<const float> g, std::span<const float> r);

void rmsnorm_shard_forward_sums(ConstMatrixView x, std::span<double> sums);
void rmsnorm_shard_forward_apply(MatrixView y, std::span<float> r, ConstMatrixView x,
                                 std::span<const float> g, std::span<const double> sums,
                                 std::int64_t c_global, float eps = kRmsNormEps);
void rmsnorm_shard_backward_sums(std::span<double> sums, std::span<float> dg, ConstMatrixView dy,
                                 ConstMatrixView x, std::span<const float> g,
                                 std::span<const float> r);
void rmsnorm_shard_backward_apply(MatrixView dx, ConstMatrixView dy, ConstMatrixView x,
                                  std::span<const float> g, std::span<const float> r,
                                  std::span<const double> sums, std::int64_t c_global);

}  // namespace meshtp
