#include "ops/residual.hpp"

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"
#include "ops/kernels.hpp"

namespace meshtp {
namespace {

// acc += dy, row by row with the fast add.
void accumulate(MatrixView acc, ConstMatrixView dy) {
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < dy.rows; ++n) {
    float* dst = acc.data + n * acc.ld;
    k.add(dst, dst, dy.data + n * dy.ld, dy.cols);
  }
}

}  // namespace

void residual_forward(MatrixView y, ConstMatrixView a, ConstMatrixView b) {
  const ScopedSpan span("residual", SpanKind::kCompute);
  check_same_shape("residual_forward a vs y", a, y);
  check_same_shape("residual_forward b vs y", b, y);
  // Simulated build, charged mode: the time instead of the work (core/simulation.hpp).
  if (simhooks::charge_bytes(op_costs::bytes(y.rows * y.cols, op_costs::kResidualForwardTouches))) {
    return;
  }
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < y.rows; ++n) {
    k.add(y.data + n * y.ld, a.data + n * a.ld, b.data + n * b.ld, y.cols);
  }
}

void residual_backward(MatrixView da, MatrixView db, ConstMatrixView dy) {
  const ScopedSpan span("residual", SpanKind::kCompute);
  check_same_shape("residual_backward da vs dy", da, dy);
  check_same_shape("residual_backward db vs dy", db, dy);
  if (simhooks::charge_bytes(
          op_costs::bytes(dy.rows * dy.cols, op_costs::kResidualBackwardTouches))) {
    return;
  }
  accumulate(da, dy);
  accumulate(db, dy);
}

void residual_backward_copy(MatrixView d, ConstMatrixView dy) {
  const ScopedSpan span("residual", SpanKind::kCompute);
  check_same_shape("residual_backward_copy d vs dy", d, dy);
  if (simhooks::charge_bytes(
          op_costs::bytes(dy.rows * dy.cols, op_costs::kResidualBackwardTouches))) {
    return;
  }
  copy(dy, d);
}

void residual_accumulate(MatrixView acc, ConstMatrixView x) {
  const ScopedSpan span("residual", SpanKind::kCompute);
  check_same_shape("residual_accumulate acc vs x", acc, x);
  if (simhooks::charge_bytes(op_costs::bytes(x.rows * x.cols, op_costs::kResidualForwardTouches))) {
    return;
  }
  accumulate(acc, x);
}

void residual_forward_reference(MatrixView y, ConstMatrixView a, ConstMatrixView b) {
  check_same_shape("residual_forward a vs y", a, y);
  check_same_shape("residual_forward b vs y", b, y);
  for (std::int64_t n = 0; n < y.rows; ++n) {
    for (std::int64_t c = 0; c < y.cols; ++c) y(n, c) = a(n, c) + b(n, c);
  }
}

}  // namespace meshtp
