#include "ops/rmsnorm.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"
#include "ops/kernels.hpp"

namespace meshtp {
namespace {

std::int64_t count(auto span) { return static_cast<std::int64_t>(span.size()); }

void check_rms(const char* fn, ConstMatrixView y, ConstMatrixView x, std::int64_t g_size,
               std::int64_t r_size) {
  MESHTP_CHECK(x.cols > 0, "{}: x is {}x{}: an empty last dim (C=0)", fn, x.rows, x.cols);
  MESHTP_CHECK(y.rows == x.rows && y.cols == x.cols, "{}: output is {}x{}, x is {}x{}", fn, y.rows,
               y.cols, x.rows, x.cols);
  MESHTP_CHECK(g_size == x.cols, "{}: weight g has {} values, expected C={}", fn, g_size, x.cols);
  MESHTP_CHECK(r_size == x.rows, "{}: r has {} values, expected N={}", fn, r_size, x.rows);
}

void check_sums(const char* fn, std::int64_t sums, std::int64_t N, std::int64_t c_local,
                std::int64_t c_global) {
  MESHTP_CHECK(sums == N, "{}: {} sums for {} rows (N needed)", fn, sums, N);
  MESHTP_CHECK(c_global >= c_local, "{}: c_global={} is less than the local features {}", fn,
               c_global, c_local);
}

// One row of each phase: y = x·r ⊙ g from Σx²; Σ h·x̂ (and dg); dx += r·(h − x̂·mean(h⊙x̂)).
void forward_row(float* y, float* r, const float* x, std::int64_t C, const float* g, double sumsq,
                 std::int64_t c_global, float eps) {
  const float rn = static_cast<float>(
      1.0 / std::sqrt(sumsq / static_cast<double>(c_global) + static_cast<double>(eps)));
  *r = rn;
  for (std::int64_t c = 0; c < C; ++c) y[c] = x[c] * rn * g[c];
}

double backward_row_sum(const float* dy, const float* x, std::int64_t C, const float* g, float rn,
                        float* dg) {
  double s = 0.0;
  for (std::int64_t c = 0; c < C; ++c) {
    const float xhat = x[c] * rn;
    s += static_cast<double>(dy[c] * g[c]) * xhat;
    dg[c] += dy[c] * xhat;
  }
  return s;
}

void backward_row_apply(float* dx, const float* dy, const float* x, std::int64_t C, const float* g,
                        float rn, double sum, std::int64_t c_global) {
  const float hx_mean = static_cast<float>(sum / static_cast<double>(c_global));
  for (std::int64_t c = 0; c < C; ++c) dx[c] += rn * (dy[c] * g[c] - x[c] * rn * hx_mean);
}

void check_eps(const char* fn, float eps) {
  MESHTP_CHECK(eps > 0 && std::isfinite(eps), "{}: eps={} must be positive", fn, eps);
}

}  // namespace

void rmsnorm_shard_forward_sums(ConstMatrixView x, std::span<double> sums) {
  const std::int64_t N = x.rows, C = x.cols;
  check_sums("rmsnorm_shard_forward_sums", count(sums), N, C, C);
  if (simhooks::charge_bytes(op_costs::bytes(N * C, op_costs::kLayerNormForwardTouches))) return;
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < N; ++n) sums[n] = k.moments(x.data + n * x.ld, C).second;
}

void rmsnorm_shard_forward_apply(MatrixView y, std::span<float> r, ConstMatrixView x,
                                 std::span<const float> g, std::span<const double> sums,
                                 std::int64_t c_global, float eps) {
  constexpr const char* kFn = "rmsnorm_forward";
  check_rms(kFn, y, x, count(g), count(r));
  check_sums(kFn, count(sums), x.rows, x.cols, c_global);
  check_eps(kFn, eps);
  if (simhooks::values_meaningless()) return;  // phase 1 charged the op
  for (std::int64_t n = 0; n < x.rows; ++n) {
    forward_row(y.data + n * y.ld, &r[n], x.data + n * x.ld, x.cols, g.data(), sums[n], c_global,
                eps);
  }
}

void rmsnorm_shard_backward_sums(std::span<double> sums, std::span<float> dg, ConstMatrixView dy,
                                 ConstMatrixView x, std::span<const float> g,
                                 std::span<const float> r) {
  constexpr const char* kFn = "rmsnorm_backward";
  check_rms(kFn, dy, x, count(g), count(r));
  MESHTP_CHECK(count(dg) == x.cols, "{}: dg has {} values, expected C={}", kFn, dg.size(), x.cols);
  check_sums(kFn, count(sums), x.rows, x.cols, x.cols);
  if (simhooks::charge_bytes(
          op_costs::bytes(x.rows * x.cols, op_costs::kLayerNormBackwardTouches))) {
    return;
  }
  for (std::int64_t n = 0; n < x.rows; ++n) {
    sums[n] =
        backward_row_sum(dy.data + n * dy.ld, x.data + n * x.ld, x.cols, g.data(), r[n], dg.data());
  }
}

void rmsnorm_shard_backward_apply(MatrixView dx, ConstMatrixView dy, ConstMatrixView x,
                                  std::span<const float> g, std::span<const float> r,
                                  std::span<const double> sums, std::int64_t c_global) {
  constexpr const char* kFn = "rmsnorm_backward";
  check_rms(kFn, dx, x, count(g), count(r));
  check_rms(kFn, dy, x, count(g), count(r));
  check_sums(kFn, count(sums), x.rows, x.cols, c_global);
  if (simhooks::values_meaningless()) return;
  for (std::int64_t n = 0; n < x.rows; ++n) {
    backward_row_apply(dx.data + n * dx.ld, dy.data + n * dy.ld, x.data + n * x.ld, x.cols,
                       g.data(), r[n], sums[n], c_global);
  }
}

void rmsnorm_forward(MatrixView y, std::span<float> r, ConstMatrixView x, std::span<const float> g,
                     float eps) {
  const ScopedSpan span("rmsnorm", SpanKind::kCompute);
  check_rms("rmsnorm_forward", y, x, count(g), count(r));
  check_eps("rmsnorm_forward", eps);
  if (simhooks::charge_bytes(
          op_costs::bytes(x.rows * x.cols, op_costs::kLayerNormForwardTouches))) {
    return;
  }
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < x.rows; ++n) {
    const float* xr = x.data + n * x.ld;
    forward_row(y.data + n * y.ld, &r[n], xr, x.cols, g.data(), k.moments(xr, x.cols).second,
                x.cols, eps);
  }
}

void rmsnorm_backward(MatrixView dx, std::span<float> dg, ConstMatrixView dy, ConstMatrixView x,
                      std::span<const float> g, std::span<const float> r) {
  constexpr const char* kFn = "rmsnorm_backward";
  const ScopedSpan span("rmsnorm", SpanKind::kCompute);
  check_rms(kFn, dx, x, count(g), count(r));
  check_rms(kFn, dy, x, count(g), count(r));
  MESHTP_CHECK(count(dg) == x.cols, "{}: dg has {} values, expected C={}", kFn, dg.size(), x.cols);
  if (simhooks::charge_bytes(
          op_costs::bytes(x.rows * x.cols, op_costs::kLayerNormBackwardTouches))) {
    return;
  }
  for (std::int64_t n = 0; n < x.rows; ++n) {
    const float *dyr = dy.data + n * dy.ld, *xr = x.data + n * x.ld;
    const double sum = backward_row_sum(dyr, xr, x.cols, g.data(), r[n], dg.data());
    backward_row_apply(dx.data + n * dx.ld, dyr, xr, x.cols, g.data(), r[n], sum, x.cols);
  }
}

}  // namespace meshtp
