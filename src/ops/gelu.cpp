#include "ops/gelu.hpp"

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"
#include "ops/kernels.hpp"
#include "ops/vector_math_impl.hpp"

namespace meshtp {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // √(2/π)
constexpr float kCubic = 0.044715f;

}  // namespace

void gelu_forward(MatrixView y, ConstMatrixView x) {
  const ScopedSpan span("gelu", SpanKind::kCompute);
  check_same_shape("gelu_forward y vs x", y, x);
  // Simulated build, charged mode: the time instead of the work (core/simulation.hpp).
  if (simhooks::charge_bytes(op_costs::bytes(x.rows * x.cols, op_costs::kGeluForwardTouches)))
    return;
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < x.rows; ++n) k.gelu_forward(y.data + n * y.ld, x.data + n * x.ld, x.cols);
}

void gelu_backward(MatrixView dx, ConstMatrixView x, ConstMatrixView dy) {
  const ScopedSpan span("gelu", SpanKind::kCompute);
  check_same_shape("gelu_backward dx vs x", dx, x);
  check_same_shape("gelu_backward dy vs x", dy, x);
  if (simhooks::charge_bytes(op_costs::bytes(x.rows * x.cols, op_costs::kGeluBackwardTouches)))
    return;
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < x.rows; ++n) {
    k.gelu_backward(dx.data + n * dx.ld, x.data + n * x.ld, dy.data + n * dy.ld, x.cols);
  }
}

void bias_gelu_forward(MatrixView y, MatrixView pre, std::span<const float> bias) {
  const ScopedSpan span("gelu", SpanKind::kCompute);
  check_same_shape("bias_gelu_forward y vs pre", y, pre);
  MESHTP_CHECK(static_cast<std::int64_t>(bias.size()) == pre.cols,
               "bias_gelu_forward: bias has {} values for {} columns", bias.size(), pre.cols);
  // Fused, but charged as the planner prices it: a bias add and a GeLU.
  if (simhooks::charge_bytes(op_costs::bytes(
          pre.rows * pre.cols, op_costs::kBiasForwardTouches + op_costs::kGeluForwardTouches))) {
    return;
  }
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < pre.rows; ++n) {
    k.bias_gelu_forward(pre.data + n * pre.ld, y.data + n * y.ld, bias.data(), pre.cols);
  }
}

void gelu_forward_reference(MatrixView y, ConstMatrixView x) {
  check_same_shape("gelu_forward y vs x", y, x);
  for (std::int64_t n = 0; n < x.rows; ++n) {
    const float* xr = x.data + n * x.ld;
    float* yr = y.data + n * y.ld;
    for (std::int64_t d = 0; d < x.cols; ++d) {
      const float v = xr[d];
      const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
      yr[d] = 0.5f * v * (1.0f + detail::tanh_approx(u));
    }
  }
}

void gelu_backward_reference(MatrixView dx, ConstMatrixView x, ConstMatrixView dy) {
  check_same_shape("gelu_backward dx vs x", dx, x);
  check_same_shape("gelu_backward dy vs x", dy, x);
  for (std::int64_t n = 0; n < x.rows; ++n) {
    const float* xr = x.data + n * x.ld;
    const float* dyr = dy.data + n * dy.ld;
    float* dxr = dx.data + n * dx.ld;
    for (std::int64_t d = 0; d < x.cols; ++d) {
      const float v = xr[d];
      const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
      const float th = detail::tanh_approx(u);
      const float du_dx = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
      const float grad = 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du_dx;
      dxr[d] += dyr[d] * grad;
    }
  }
}

}  // namespace meshtp
