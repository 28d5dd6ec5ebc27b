#include "parallel/layernorm_sharded.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/trace.hpp"
#include "ops/layernorm.hpp"

namespace meshtp::parallel {
namespace {

bool serial(const comm::Communicator* group) { return group == nullptr || group->size() == 1; }

void check_shapes(const char* fn, std::int64_t rows, std::int64_t cols, std::int64_t c_global,
                  const comm::Communicator* group, std::size_t scratch) {
  const int p = serial(group) ? 1 : group->size();
  MESHTP_CHECK(cols * p == c_global, "{}: {} local features × {} ranks != hidden={}", fn, cols,
               p, c_global);
  MESHTP_CHECK(static_cast<std::int64_t>(scratch) >= 2 * rows,
               "{}: scratch holds {} doubles, needs 2·N = {}", fn, scratch, 2 * rows);
}

}  // namespace

void layernorm_sharded_forward(MatrixView y, std::span<float> mean, std::span<float> rstd,
                               ConstMatrixView x, std::span<const float> w,
                               std::span<const float> b, std::int64_t c_global,
                               const comm::Communicator* group, std::span<double> scratch) {
  const ScopedSpan span("layernorm", SpanKind::kCompute);
  if (serial(group)) {
    MESHTP_CHECK(x.cols == c_global, "layernorm: {} features held, hidden={}", x.cols, c_global);
    layernorm_forward(y, mean, rstd, x, w, b);
    return;
  }
  const std::int64_t N = x.rows, C = x.cols;
  check_shapes("layernorm_sharded_forward", N, C, c_global, group, scratch.size());
  MESHTP_CHECK(y.rows == N && y.cols == C && static_cast<std::int64_t>(w.size()) == C &&
                   static_cast<std::int64_t>(b.size()) == C &&
                   static_cast<std::int64_t>(mean.size()) == N &&
                   static_cast<std::int64_t>(rstd.size()) == N,
               "layernorm_sharded_forward: y {}x{}, x {}x{}, w {}, b {}, mean {}, rstd {}",
               y.rows, y.cols, N, C, w.size(), b.size(), mean.size(), rstd.size());
  double* s1 = scratch.data();
  double* s2 = scratch.data() + N;
  for (std::int64_t n = 0; n < N; ++n) {
    const float* xr = x.data + n * x.ld;
    double a = 0.0, q = 0.0;
    for (std::int64_t c = 0; c < C; ++c) {
      a += xr[c];
      q += static_cast<double>(xr[c]) * xr[c];
    }
    s1[n] = a;
    s2[n] = q;
  }
  group->all_reduce(scratch.first(static_cast<std::size_t>(2 * N)));
  const double inv_c = 1.0 / static_cast<double>(c_global);
  for (std::int64_t n = 0; n < N; ++n) {
    const double mu = s1[n] * inv_c;
    const double var = std::max(s2[n] * inv_c - mu * mu, 0.0);
    const float m = static_cast<float>(mu);
    const float s = static_cast<float>(1.0 / std::sqrt(var + kLayerNormEps));
    const float* xr = x.data + n * x.ld;
    float* yr = y.data + n * y.ld;
    for (std::int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - m) * s * w[c] + b[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_sharded_backward(MatrixView dx, std::span<float> dw, std::span<float> db,
                                ConstMatrixView dy, ConstMatrixView x, std::span<const float> w,
                                std::span<const float> mean, std::span<const float> rstd,
                                std::int64_t c_global, const comm::Communicator* group,
                                std::span<double> scratch) {
  const ScopedSpan span("layernorm", SpanKind::kCompute);
  if (serial(group)) {
    MESHTP_CHECK(x.cols == c_global, "layernorm: {} features held, hidden={}", x.cols, c_global);
    layernorm_backward(dx, dw, db, dy, x, w, mean, rstd);
    return;
  }
  const std::int64_t N = x.rows, C = x.cols;
  check_shapes("layernorm_sharded_backward", N, C, c_global, group, scratch.size());
  MESHTP_CHECK(dx.rows == N && dx.cols == C && dy.rows == N && dy.cols == C &&
                   static_cast<std::int64_t>(dw.size()) == C &&
                   static_cast<std::int64_t>(db.size()) == C &&
                   static_cast<std::int64_t>(w.size()) == C,
               "layernorm_sharded_backward: dx {}x{}, dy {}x{}, x {}x{}, w {}, dw {}, db {}",
               dx.rows, dx.cols, dy.rows, dy.cols, N, C, w.size(), dw.size(), db.size());
  double* t1 = scratch.data();
  double* t2 = scratch.data() + N;
  for (std::int64_t n = 0; n < N; ++n) {
    const float* xr = x.data + n * x.ld;
    const float* dyr = dy.data + n * dy.ld;
    const float m = mean[n], s = rstd[n];
    double g_sum = 0.0, gx_sum = 0.0;
    for (std::int64_t c = 0; c < C; ++c) {
      const float xhat = (xr[c] - m) * s;
      const float g = dyr[c] * w[c];
      g_sum += g;
      gx_sum += static_cast<double>(g) * xhat;
      dw[c] += dyr[c] * xhat;
      db[c] += dyr[c];
    }
    t1[n] = g_sum;
    t2[n] = gx_sum;
  }
  group->all_reduce(scratch.first(static_cast<std::size_t>(2 * N)));
  const double inv_c = 1.0 / static_cast<double>(c_global);
  for (std::int64_t n = 0; n < N; ++n) {
    const float* xr = x.data + n * x.ld;
    const float* dyr = dy.data + n * dy.ld;
    float* dxr = dx.data + n * dx.ld;
    const float m = mean[n], s = rstd[n];
    const float g_mean = static_cast<float>(t1[n] * inv_c);
    const float gx_mean = static_cast<float>(t2[n] * inv_c);
    for (std::int64_t c = 0; c < C; ++c) {
      const float xhat = (xr[c] - m) * s;
      dxr[c] += s * (dyr[c] * w[c] - g_mean - xhat * gx_mean);
    }
  }
}

}  // namespace meshtp::parallel
