#include "ops/linear.hpp"

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"
#include "ops/kernels.hpp"
#include "tensor/gemm.hpp"

namespace meshtp {

void linear_forward(MatrixView y, ConstMatrixView x, ConstMatrixView w, std::span<const float> b) {
  const std::int64_t N = x.rows, K = x.cols, M = w.rows;
  MESHTP_CHECK(w.cols == K && y.rows == N && y.cols == M,
               "linear_forward shapes: x ({}x{}) · W ({}x{})ᵀ → y ({}x{}); expected W (Mx{}) "
               "and y ({}xM)",
               N, K, w.rows, w.cols, y.rows, y.cols, K, N);
  MESHTP_CHECK(b.empty() || static_cast<std::int64_t>(b.size()) == M,
               "linear_forward bias has {} values, expected M={}", b.size(), M);
  if (b.empty()) {
    gemm(x, Trans::kNo, w, Trans::kYes, y);
    return;
  }
  // Broadcast b into y, then accumulate the product on top of it: one pass over y. Simulated
  // build, charged mode: the time instead of the work (core/simulation.hpp).
  {
    const ScopedSpan span("bias", SpanKind::kCompute);
    if (!simhooks::charge_bytes(op_costs::bytes(N * M, op_costs::kBiasForwardTouches))) {
      for (std::int64_t n = 0; n < N; ++n) {
        float* row = y.data + n * y.ld;
        for (std::int64_t m = 0; m < M; ++m) row[m] = b[static_cast<std::size_t>(m)];
      }
    }
  }
  gemm(x, Trans::kNo, w, Trans::kYes, y, 1.0f, 1.0f);
}

void linear_backward_data(MatrixView dx, ConstMatrixView dy, ConstMatrixView w) {
  MESHTP_CHECK(dy.cols == w.rows && dx.rows == dy.rows && dx.cols == w.cols,
               "linear_backward_data shapes: dy ({}x{}) · W ({}x{}) → dx ({}x{})", dy.rows, dy.cols,
               w.rows, w.cols, dx.rows, dx.cols);
  gemm(dy, Trans::kNo, w, Trans::kNo, dx, 1.0f, 1.0f);
}

void linear_backward_weight(MatrixView dw, std::span<float> db, ConstMatrixView dy,
                            ConstMatrixView x) {
  const std::int64_t N = dy.rows, M = dy.cols;
  MESHTP_CHECK(x.rows == N && dw.rows == M && dw.cols == x.cols,
               "linear_backward_weight shapes: dy ({}x{})ᵀ · x ({}x{}) → dW ({}x{})", N, M, x.rows,
               x.cols, dw.rows, dw.cols);
  MESHTP_CHECK(db.empty() || static_cast<std::int64_t>(db.size()) == M,
               "linear_backward_weight bias gradient has {} values, expected M={}", db.size(), M);
  gemm(dy, Trans::kYes, x, Trans::kNo, dw, 1.0f, 1.0f);
  if (!db.empty()) add_bias_grad(db, dy);
}

void add_bias(MatrixView y, std::span<const float> b) {
  const ScopedSpan span("bias", SpanKind::kCompute);
  MESHTP_CHECK(static_cast<std::int64_t>(b.size()) == y.cols,
               "add_bias: bias has {} values for {} columns", b.size(), y.cols);
  if (simhooks::charge_bytes(op_costs::bytes(y.rows * y.cols, op_costs::kBiasForwardTouches)))
    return;
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < y.rows; ++n) {
    float* row = y.data + n * y.ld;
    k.add(row, row, b.data(), y.cols);
  }
}

void add_bias_grad(std::span<float> db, ConstMatrixView dy) {
  const ScopedSpan span("bias", SpanKind::kCompute);
  MESHTP_CHECK(static_cast<std::int64_t>(db.size()) == dy.cols,
               "add_bias_grad: {} outputs for {} columns", db.size(), dy.cols);
  if (simhooks::charge_bytes(op_costs::bytes(dy.rows * dy.cols, op_costs::kBiasBackwardTouches)))
    return;
  // Row by row, so the inner loop is contiguous and vectorises.
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < dy.rows; ++n) k.add(db.data(), db.data(), dy.data + n * dy.ld, dy.cols);
}

void linear_backward(MatrixView dx, MatrixView dw, std::span<float> db, ConstMatrixView dy,
                     ConstMatrixView x, ConstMatrixView w) {
  linear_backward_data(dx, dy, w);
  linear_backward_weight(dw, db, dy, x);
}

}  // namespace meshtp
