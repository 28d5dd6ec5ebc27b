#include "ops/layernorm.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"
#include "ops/kernels.hpp"

namespace meshtp {
namespace {

std::int64_t size_of(auto span) { return static_cast<std::int64_t>(span.size()); }

void check_forward(MatrixView y, std::span<float> mean, std::span<float> rstd, ConstMatrixView x,
                   std::span<const float> w, std::span<const float> b) {
  const std::int64_t N = x.rows, C = x.cols;
  MESHTP_CHECK(y.rows == N && y.cols == C, "layernorm_forward: y is {}x{}, x is {}x{}", y.rows,
               y.cols, N, C);
  MESHTP_CHECK(size_of(w) == C && size_of(b) == C,
               "layernorm_forward: weight has {} and bias {} values, expected C={}", w.size(),
               b.size(), C);
  MESHTP_CHECK(size_of(mean) == N && size_of(rstd) == N,
               "layernorm_forward: mean has {} and rstd {} slots, expected N={}", mean.size(),
               rstd.size(), N);
  MESHTP_CHECK(C > 0, "layernorm_forward over an empty last dim (C=0)");
}

void check_backward(MatrixView dx, std::span<float> dw, std::span<float> db, ConstMatrixView dy,
                    ConstMatrixView x, std::span<const float> w, std::span<const float> mean,
                    std::span<const float> rstd) {
  const std::int64_t N = x.rows, C = x.cols;
  MESHTP_CHECK(dx.rows == N && dx.cols == C && dy.rows == N && dy.cols == C,
               "layernorm_backward: dx is {}x{}, dy {}x{}, x {}x{}", dx.rows, dx.cols, dy.rows,
               dy.cols, N, C);
  MESHTP_CHECK(size_of(w) == C && size_of(dw) == C && size_of(db) == C,
               "layernorm_backward: w has {}, dw {}, db {} values, expected C={}", w.size(),
               dw.size(), db.size(), C);
  MESHTP_CHECK(size_of(mean) == N && size_of(rstd) == N,
               "layernorm_backward: mean has {} and rstd {} values, expected N={}", mean.size(),
               rstd.size(), N);
}

}  // namespace

void layernorm_forward(MatrixView y, std::span<float> mean, std::span<float> rstd,
                       ConstMatrixView x, std::span<const float> w, std::span<const float> b) {
  const ScopedSpan span("layernorm", SpanKind::kCompute);
  check_forward(y, mean, rstd, x, w, b);
  // Simulated build, charged mode: the time instead of the work (core/simulation.hpp).
  if (simhooks::charge_bytes(
          op_costs::bytes(x.rows * x.cols, op_costs::kLayerNormForwardTouches))) {
    return;
  }
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < x.rows; ++n) {
    k.layernorm_row_forward(y.data + n * y.ld, x.data + n * x.ld, x.cols, w.data(), b.data(),
                            &mean[n], &rstd[n]);
  }
}

void layernorm_backward(MatrixView dx, std::span<float> dw, std::span<float> db, ConstMatrixView dy,
                        ConstMatrixView x, std::span<const float> w, std::span<const float> mean,
                        std::span<const float> rstd) {
  const ScopedSpan span("layernorm", SpanKind::kCompute);
  check_backward(dx, dw, db, dy, x, w, mean, rstd);
  if (simhooks::charge_bytes(
          op_costs::bytes(x.rows * x.cols, op_costs::kLayerNormBackwardTouches))) {
    return;
  }
  const auto& k = kernels::fast();
  const double inv_c = 1.0 / static_cast<double>(x.cols);
  for (std::int64_t n = 0; n < x.rows; ++n) {
    const float* xr = x.data + n * x.ld;
    const float* dyr = dy.data + n * dy.ld;
    const kernels::RowSums s = k.layernorm_row_backward_sums(dyr, xr, x.cols, w.data(), mean[n],
                                                             rstd[n], dw.data(), db.data());
    k.layernorm_row_backward_apply(dx.data + n * dx.ld, dyr, xr, x.cols, w.data(), mean[n],
                                   rstd[n], static_cast<float>(s.first * inv_c),
                                   static_cast<float>(s.second * inv_c));
  }
}

void residual_layernorm_forward(MatrixView sum, MatrixView y, std::span<float> mean,
                                std::span<float> rstd, ConstMatrixView a, ConstMatrixView b,
                                std::span<const float> w, std::span<const float> bias) {
  const ScopedSpan span("layernorm", SpanKind::kCompute);
  MESHTP_CHECK(a.rows == sum.rows && a.cols == sum.cols && b.rows == sum.rows &&
                   b.cols == sum.cols,
               "residual_layernorm_forward: sum {}x{}, a {}x{}, b {}x{}", sum.rows, sum.cols,
               a.rows, a.cols, b.rows, b.cols);
  check_forward(y, mean, rstd, sum, w, bias);
  // Fused, but charged as the planner prices it: a residual add and a LayerNorm.
  if (simhooks::charge_bytes(op_costs::bytes(
          sum.rows * sum.cols,
          op_costs::kResidualForwardTouches + op_costs::kLayerNormForwardTouches))) {
    return;
  }
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < sum.rows; ++n) {
    float* s = sum.data + n * sum.ld;
    k.add(s, a.data + n * a.ld, b.data + n * b.ld, sum.cols);
    k.layernorm_row_forward(y.data + n * y.ld, s, sum.cols, w.data(), bias.data(), &mean[n],
                            &rstd[n]);
  }
}

void layernorm_forward_reference(MatrixView y, std::span<float> mean, std::span<float> rstd,
                                 ConstMatrixView x, std::span<const float> w,
                                 std::span<const float> b) {
  check_forward(y, mean, rstd, x, w, b);
  const std::int64_t N = x.rows, C = x.cols;
  for (std::int64_t n = 0; n < N; ++n) {
    const float* xr = x.data + n * x.ld;
    double sum = 0.0;
    for (std::int64_t c = 0; c < C; ++c) sum += xr[c];
    const double mu = sum / static_cast<double>(C);
    double sq = 0.0;
    for (std::int64_t c = 0; c < C; ++c) {
      const double d = xr[c] - mu;
      sq += d * d;
    }
    const float m = static_cast<float>(mu);
    const float s =
        static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(C) + kLayerNormEps));
    float* yr = y.data + n * y.ld;
    for (std::int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - m) * s * w[c] + b[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward_reference(MatrixView dx, std::span<float> dw, std::span<float> db,
                                  ConstMatrixView dy, ConstMatrixView x, std::span<const float> w,
                                  std::span<const float> mean, std::span<const float> rstd) {
  check_backward(dx, dw, db, dy, x, w, mean, rstd);
  const std::int64_t N = x.rows, C = x.cols;
  for (std::int64_t n = 0; n < N; ++n) {
    const float* xr = x.data + n * x.ld;
    const float* dyr = dy.data + n * dy.ld;
    float* dxr = dx.data + n * dx.ld;
    const float m = mean[n], s = rstd[n];
    // mean_c(g) and mean_c(g ⊙ x̂), g = dy ⊙ w
    double g_sum = 0.0, gx_sum = 0.0;
    for (std::int64_t c = 0; c < C; ++c) {
      const float xhat = (xr[c] - m) * s;
      const float g = dyr[c] * w[c];
      g_sum += g;
      gx_sum += static_cast<double>(g) * xhat;
      dw[c] += dyr[c] * xhat;
      db[c] += dyr[c];
    }
    const float g_mean = static_cast<float>(g_sum / static_cast<double>(C));
    const float gx_mean = static_cast<float>(gx_sum / static_cast<double>(C));
    for (std::int64_t c = 0; c < C; ++c) {
      const float xhat = (xr[c] - m) * s;
      dxr[c] += s * (dyr[c] * w[c] - g_mean - xhat * gx_mean);
    }
  }
}

// ---- the sharded LayerNorm's phases (layernorm.hpp) ------------------------------------

void layernorm_shard_forward_sums(ConstMatrixView x, std::span<double> sums) {
  const std::int64_t N = x.rows, C = x.cols;
  MESHTP_CHECK(static_cast<std::int64_t>(sums.size()) >= 2 * N,
               "layernorm_shard_forward_sums: {} sums for {} rows (2·N needed)", sums.size(), N);
  if (simhooks::charge_bytes(op_costs::bytes(N * C, op_costs::kLayerNormForwardTouches))) return;
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < N; ++n) {
    const kernels::RowSums m = k.moments(x.data + n * x.ld, C);
    sums[static_cast<std::size_t>(n)] = m.first;
    sums[static_cast<std::size_t>(N + n)] = m.second;
  }
}

void layernorm_shard_forward_apply(MatrixView y, std::span<float> mean, std::span<float> rstd,
                                   ConstMatrixView x, std::span<const float> w,
                                   std::span<const float> b, std::span<const double> sums,
                                   std::int64_t c_global) {
  if (simhooks::values_meaningless()) return;  // charged in phase 1
  const std::int64_t N = x.rows, C = x.cols;
  const auto& k = kernels::fast();
  const double inv_c = 1.0 / static_cast<double>(c_global);
  for (std::int64_t n = 0; n < N; ++n) {
    const double mu = sums[static_cast<std::size_t>(n)] * inv_c;
    const double var = std::max(sums[static_cast<std::size_t>(N + n)] * inv_c - mu * mu, 0.0);
    mean[n] = static_cast<float>(mu);
    rstd[n] = static_cast<float>(1.0 / std::sqrt(var + kLayerNormEps));
    k.layernorm_row_apply(y.data + n * y.ld, x.data + n * x.ld, C, w.data(), b.data(), mean[n],
                          rstd[n]);
  }
}

void layernorm_shard_backward_sums(std::span<double> sums, std::span<float> dw,
                                   std::span<float> db, ConstMatrixView dy, ConstMatrixView x,
                                   std::span<const float> w, std::span<const float> mean,
                                   std::span<const float> rstd) {
  const std::int64_t N = x.rows, C = x.cols;
  MESHTP_CHECK(static_cast<std::int64_t>(sums.size()) >= 2 * N,
               "layernorm_shard_backward_sums: {} sums for {} rows (2·N needed)", sums.size(), N);
  if (simhooks::charge_bytes(op_costs::bytes(N * C, op_costs::kLayerNormBackwardTouches))) return;
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < N; ++n) {
    const kernels::RowSums r =
        k.layernorm_row_backward_sums(dy.data + n * dy.ld, x.data + n * x.ld, C, w.data(),
                                      mean[n], rstd[n], dw.data(), db.data());
    sums[static_cast<std::size_t>(n)] = r.first;
    sums[static_cast<std::size_t>(N + n)] = r.second;
  }
}

void layernorm_shard_backward_apply(MatrixView dx, ConstMatrixView dy, ConstMatrixView x,
                                    std::span<const float> w, std::span<const float> mean,
                                    std::span<const float> rstd, std::span<const double> sums,
                                    std::int64_t c_global) {
  if (simhooks::values_meaningless()) return;  // charged in phase 1
  const std::int64_t N = x.rows, C = x.cols;
  const auto& k = kernels::fast();
  const double inv_c = 1.0 / static_cast<double>(c_global);
  for (std::int64_t n = 0; n < N; ++n) {
    k.layernorm_row_backward_apply(
        dx.data + n * dx.ld, dy.data + n * dy.ld, x.data + n * x.ld, C, w.data(), mean[n], rstd[n],
        static_cast<float>(sums[static_cast<std::size_t>(n)] * inv_c),
        static_cast<float>(sums[static_cast<std::size_t>(N + n)] * inv_c));
  }
}

}  // namespace meshtp
