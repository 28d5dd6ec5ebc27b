#include "parallel/layernorm_sharded.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"
#include "ops/kernels.hpp"
#include "ops/layernorm.hpp"
#include "ops/residual.hpp"

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
  // Simulated build, charged mode: the time instead of the work (core/simulation.hpp), the
  // same bytes as the serial LayerNorm; the statistics' all-reduce still runs.
  const bool charged =
      simhooks::charge_bytes(op_costs::bytes(N * C, op_costs::kLayerNormForwardTouches));
  // Σx and Σx² per row (double lanes), all-reduced with the other feature shards.
  const auto& k = kernels::fast();
  double* s1 = scratch.data();
  double* s2 = scratch.data() + N;
  for (std::int64_t n = 0; n < N && !charged; ++n) {
    const kernels::RowSums m = k.moments(x.data + n * x.ld, C);
    s1[n] = m.first;
    s2[n] = m.second;
  }
  group->all_reduce(scratch.first(static_cast<std::size_t>(2 * N)));
  const double inv_c = 1.0 / static_cast<double>(c_global);
  for (std::int64_t n = 0; n < N && !charged; ++n) {
    const double mu = s1[n] * inv_c;
    const double var = std::max(s2[n] * inv_c - mu * mu, 0.0);
    mean[n] = static_cast<float>(mu);
    rstd[n] = static_cast<float>(1.0 / std::sqrt(var + kLayerNormEps));
    k.layernorm_row_apply(y.data + n * y.ld, x.data + n * x.ld, C, w.data(), b.data(), mean[n],
                          rstd[n]);
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
  const bool charged =
      simhooks::charge_bytes(op_costs::bytes(N * C, op_costs::kLayerNormBackwardTouches));
  // Σ g and Σ g·x̂ per row (g = dy⊙w), all-reduced with the other feature shards.
  const auto& k = kernels::fast();
  double* t1 = scratch.data();
  double* t2 = scratch.data() + N;
  for (std::int64_t n = 0; n < N && !charged; ++n) {
    const kernels::RowSums r =
        k.layernorm_row_backward_sums(dy.data + n * dy.ld, x.data + n * x.ld, C, w.data(),
                                      mean[n], rstd[n], dw.data(), db.data());
    t1[n] = r.first;
    t2[n] = r.second;
  }
  group->all_reduce(scratch.first(static_cast<std::size_t>(2 * N)));
  const double inv_c = 1.0 / static_cast<double>(c_global);
  for (std::int64_t n = 0; n < N && !charged; ++n) {
    k.layernorm_row_backward_apply(dx.data + n * dx.ld, dy.data + n * dy.ld, x.data + n * x.ld, C,
                                   w.data(), mean[n], rstd[n], static_cast<float>(t1[n] * inv_c),
                                   static_cast<float>(t2[n] * inv_c));
  }
}

void residual_layernorm_sharded_forward(MatrixView sum, MatrixView y, std::span<float> mean,
                                        std::span<float> rstd, ConstMatrixView a,
                                        ConstMatrixView b, std::span<const float> w,
                                        std::span<const float> bias, std::int64_t c_global,
                                        const comm::Communicator* group,
                                        std::span<double> scratch) {
  if (serial(group)) {
    MESHTP_CHECK(sum.cols == c_global, "layernorm: {} features held, hidden={}", sum.cols,
                 c_global);
    residual_layernorm_forward(sum, y, mean, rstd, a, b, w, bias);
    return;
  }
  residual_forward(sum, a, b);
  layernorm_sharded_forward(y, mean, rstd, sum, w, bias, c_global, group, scratch);
}

}  // namespace meshtp::parallel
