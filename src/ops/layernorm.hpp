// LayerNorm over the last dim (PyTorch nn.LayerNorm(C), eps = 1e-5), with weight and bias.
//
//   N  rows (tokens: batch·sequence, or a sequence shard of them)
//   C  normalised features
//
//   forward : μ_n    = (1/C)·Σ_c x[n,c]
//             rstd_n = 1 / √((1/C)·Σ_c (x[n,c] − μ_n)² + eps)      (biased variance)
//             x̂      = (x − μ_n)·rstd_n
//             y      = x̂ ⊙ w + b                     x, y: (N,C)  w, b: (C)
//             saves mean (N) and rstd (N) for the backward.
//   backward: g   = dy ⊙ w
//             dx += rstd_n · (g − mean_c(g) − x̂ · mean_c(g ⊙ x̂))
//             dw += Σ_n dy ⊙ x̂
//             db += Σ_n dy
//
// Row statistics are accumulated in double (two passes: mean, then centred variance), so
// the results stay accurate for large C and large offsets. layernorm_forward/backward run
// the fast row kernels (kernels.hpp); the *_reference twins are the naive scalar loops.
//
// residual_layernorm_forward fuses the residual add before a LayerNorm (the block's
// x_mid = x + attn(x); LN2(x_mid)): each row is summed and normalised while it is in cache.
#pragma once

#include <cstdint>
#include <span>

#include "core/norm_eps.hpp"  // kLayerNormEps, kRmsNormEps
#include "tensor/tensor.hpp"

namespace meshtp {

// y = (x − μ)·rstd ⊙ w + b; writes mean[n] = μ_n and rstd[n].
void layernorm_forward(MatrixView y, std::span<float> mean, std::span<float> rstd,
                       ConstMatrixView x, std::span<const float> w, std::span<const float> b);

// dx += rstd·(g − mean(g) − x̂·mean(g⊙x̂)) with g = dy⊙w;  dw += Σ_n dy⊙x̂;  db += Σ_n dy
void layernorm_backward(MatrixView dx, std::span<float> dw, std::span<float> db, ConstMatrixView dy,
                        ConstMatrixView x, std::span<const float> w, std::span<const float> mean,
                        std::span<const float> rstd);

// sum = a + b; y = layernorm(sum) (sum may alias a or b; the backward is the two ops').
void residual_layernorm_forward(MatrixView sum, MatrixView y, std::span<float> mean,
                                std::span<float> rstd, ConstMatrixView a, ConstMatrixView b,
                                std::span<const float> w, std::span<const float> bias);

// LayerNorm over features split across ranks, in two phases with a sum over the feature
// shards between them (the caller's all-reduce of `sums`): the sharded LayerNorm of ATP
// (parallel/layernorm_sharded.hpp). x holds C_local of the C_global features; sums holds 2·N
// doubles.
//   forward   phase 1: sums = [Σ_c x[n,c] | Σ_c x[n,c]²] over local c
//             phase 2: with sums over all shards: μ, rstd, y = x̂ ⊙ w + b (local features)
//   backward  phase 1: sums = [Σ_c g | Σ_c g·x̂] (g = dy⊙w); dw += Σ_n dy⊙x̂; db += Σ_n dy
//             phase 2: dx = rstd·(g − mean(g) − x̂·mean(g⊙x̂)) with the means over all shards
// Simulated build, charged mode: phase 1 charges the op's bytes and neither phase computes.
void layernorm_shard_forward_sums(ConstMatrixView x, std::span<double> sums);
void layernorm_shard_forward_apply(MatrixView y, std::span<float> mean, std::span<float> rstd,
                                   ConstMatrixView x, std::span<const float> w,
                                   std::span<const float> b, std::span<const double> sums,
                                   std::int64_t c_global);
void layernorm_shard_backward_sums(std::span<double> sums, std::span<float> dw,
                                   std::span<float> db, ConstMatrixView dy, ConstMatrixView x,
                                   std::span<const float> w, std::span<const float> mean,
                                   std::span<const float> rstd);
void layernorm_shard_backward_apply(MatrixView dx, ConstMatrixView dy, ConstMatrixView x,
                                    std::span<const float> w, std::span<const float> mean,
                                    std::span<const float> rstd, std::span<const double> sums,
                                    std::int64_t c_global);

void layernorm_forward_reference(MatrixView y, std::span<float> mean, std::span<float> rstd,
                                 ConstMatrixView x, std::span<const float> w,
                                 std::span<const float> b);
void layernorm_backward_reference(MatrixView dx, std::span<float> dw, std::span<float> db,
                                  ConstMatrixView dy, ConstMatrixView x, std::span<const float> w,
                                  std::span<const float> mean, std::span<const float> rstd);

}  // namespace meshtp
