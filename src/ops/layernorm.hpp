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
// Row statistics are accumulated in double (two passes: mean, then centred variance), so the
// reference stays accurate for large C and large offsets.
#pragma once

#include <span>

#include "tensor/tensor.hpp"

namespace meshtp {

inline constexpr float kLayerNormEps = 1e-5f;

// y = (x − μ)·rstd ⊙ w + b; writes mean[n] = μ_n and rstd[n].
void layernorm_forward(MatrixView y, std::span<float> mean, std::span<float> rstd,
                       ConstMatrixView x, std::span<const float> w, std::span<const float> b);

// dx += rstd·(g − mean(g) − x̂·mean(g⊙x̂)) with g = dy⊙w;  dw += Σ_n dy⊙x̂;  db += Σ_n dy
void layernorm_backward(MatrixView dx, std::span<float> dw, std::span<float> db, ConstMatrixView dy,
                        ConstMatrixView x, std::span<const float> w, std::span<const float> mean,
                        std::span<const float> rstd);

}  // namespace meshtp
