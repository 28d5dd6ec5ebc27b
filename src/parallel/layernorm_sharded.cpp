#include "parallel/layernorm_sharded.hpp"

#include "core/error.hpp"
#include "core/trace.hpp"
#include "ops/layernorm.hpp"
#include "ops/rmsnorm.hpp"
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
  // Σx and Σx² per row over the local features (double lanes), summed over the feature shards,
  // then the statistics and y (ops/layernorm.hpp's two phases; charged in the simulated build).
  const std::span<double> sums = scratch.first(static_cast<std::size_t>(2 * N));
  layernorm_shard_forward_sums(x, sums);
  group->all_reduce(sums);
  layernorm_shard_forward_apply(y, mean, rstd, x, w, b, sums, c_global);
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
  // Σ g and Σ g·x̂ per row (g = dy⊙w) over the local features, summed over the feature
  // shards, then dx (ops/layernorm.hpp's two phases).
  const std::span<double> sums = scratch.first(static_cast<std::size_t>(2 * N));
  layernorm_shard_backward_sums(sums, dw, db, dy, x, w, mean, rstd);
  group->all_reduce(sums);
  layernorm_shard_backward_apply(dx, dy, x, w, mean, rstd, sums, c_global);
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

void rmsnorm_sharded_forward(MatrixView y, std::span<float> r, ConstMatrixView x,
                             std::span<const float> g, std::int64_t c_global,
                             const comm::Communicator* group, std::span<double> scratch) {
  if (serial(group)) {
    MESHTP_CHECK(x.cols == c_global, "rmsnorm: {} features held, hidden={}", x.cols, c_global);
    rmsnorm_forward(y, r, x, g);
    return;
  }
  const ScopedSpan span("rmsnorm", SpanKind::kCompute);
  MESHTP_CHECK(x.cols * group->size() == c_global &&
                   static_cast<std::int64_t>(scratch.size()) >= x.rows,
               "rmsnorm_sharded_forward: {} local features × {} ranks != hidden={}, or scratch of {} "
               "doubles < N={}",
               x.cols, group->size(), c_global, scratch.size(), x.rows);
  const std::span<double> sums = scratch.first(static_cast<std::size_t>(x.rows));
  rmsnorm_shard_forward_sums(x, sums);
  group->all_reduce(sums);
  rmsnorm_shard_forward_apply(y, r, x, g, sums, c_global);
}

void rmsnorm_sharded_backward(MatrixView dx, std::span<float> dg, ConstMatrixView dy,
                              ConstMatrixView x, std::span<const float> g,
                              std::span<const float> r, std::int64_t c_global,
                              const comm::Communicator* group, std::span<double> scratch) {
  if (serial(group)) {
    MESHTP_CHECK(x.cols == c_global, "rmsnorm: {} features held, hidden={}", x.cols, c_global);
    rmsnorm_backward(dx, dg, dy, x, g, r);
    return;
  }
  const ScopedSpan span("rmsnorm", SpanKind::kCompute);
  MESHTP_CHECK(x.cols * group->size() == c_global &&
                   static_cast<std::int64_t>(scratch.size()) >= x.rows,
               "rmsnorm_sharded_backward: {} local features × {} ranks != hidden={}, or scratch of {} "
               "doubles < N={}",
               x.cols, group->size(), c_global, scratch.size(), x.rows);
  const std::span<double> sums = scratch.first(static_cast<std::size_t>(x.rows));
  rmsnorm_shard_backward_sums(sums, dg, dy, x, g, r);
  group->all_reduce(sums);
  rmsnorm_shard_backward_apply(dx, dy, x, g, r, sums, c_global);
}

void norm_sharded_forward(bool rms, MatrixView y, std::span<float> mean, std::span<float> rstd,
                          ConstMatrixView x, std::span<const float> w, std::span<const float> b,
                          std::int64_t c_global, const comm::Communicator* group,
                          std::span<double> scratch) {
  if (rms) {
    rmsnorm_sharded_forward(y, rstd, x, w, c_global, group, scratch);
  } else {
    layernorm_sharded_forward(y, mean, rstd, x, w, b, c_global, group, scratch);
  }
}

void norm_sharded_backward(bool rms, MatrixView dx, std::span<float> dw, std::span<float> db,
                           ConstMatrixView dy, ConstMatrixView x, std::span<const float> w,
                           std::span<const float> mean, std::span<const float> rstd,
                           std::int64_t c_global, const comm::Communicator* group,
                           std::span<double> scratch) {
  if (rms) {
    rmsnorm_sharded_backward(dx, dw, dy, x, w, rstd, c_global, group, scratch);
  } else {
    layernorm_sharded_backward(dx, dw, db, dy, x, w, mean, rstd, c_global, group, scratch);
  }
}

void residual_norm_sharded_forward(bool rms, MatrixView sum, MatrixView y, std::span<float> mean,
                                   std::span<float> rstd, ConstMatrixView a, ConstMatrixView b,
                                   std::span<const float> w, std::span<const float> bias,
                                   std::int64_t c_global, const comm::Communicator* group,
                                   std::span<double> scratch) {
  if (!rms) {
    residual_layernorm_sharded_forward(sum, y, mean, rstd, a, b, w, bias, c_global, group,
                                       scratch);
    return;
  }
  residual_forward(sum, a, b);
  rmsnorm_sharded_forward(y, rstd, sum, w, c_global, group, scratch);
}

}  // namespace meshtp::parallel
