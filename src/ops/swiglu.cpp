#include "ops/swiglu.hpp"

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"
#include "ops/vector_math_impl.hpp"

namespace meshtp {
namespace {

// Reads + writes per output element (swiglu.hpp).
constexpr double kSwigluForwardTouches = 3, kSwigluBackwardTouches = 7;

std::int64_t check_swiglu(const char* fn, ConstMatrixView y, ConstMatrixView x) {
  MESHTP_CHECK(x.cols > 0 && x.cols % 2 == 0,
               "{}: x is {}x{}: its width is not 2·F (gate and up packed as [a | b])", fn, x.rows,
               x.cols);
  MESHTP_CHECK(y.rows == x.rows && y.cols == x.cols / 2,
               "{}: output is {}x{}, expected {}x{} (half of x's {} columns)", fn, y.rows, y.cols,
               x.rows, x.cols / 2, x.cols);
  return x.cols / 2;
}

inline float sigmoid(float a) { return 1.0f / (1.0f + detail::exp_approx(-a)); }

}  // namespace

void swiglu_forward(MatrixView y, ConstMatrixView x) {
  const ScopedSpan span("swiglu", SpanKind::kCompute);
  const std::int64_t F = check_swiglu("swiglu_forward", y, x);
  if (simhooks::charge_bytes(op_costs::bytes(x.rows * F, kSwigluForwardTouches))) return;
  for (std::int64_t n = 0; n < x.rows; ++n) {
    const float* a = x.data + n * x.ld;
    const float* b = a + F;
    float* yr = y.data + n * y.ld;
    for (std::int64_t f = 0; f < F; ++f) yr[f] = a[f] * sigmoid(a[f]) * b[f];
  }
}

void swiglu_backward(MatrixView dx, ConstMatrixView x, ConstMatrixView dy) {
  const ScopedSpan span("swiglu", SpanKind::kCompute);
  const std::int64_t F = check_swiglu("swiglu_backward", dy, x);
  MESHTP_CHECK(dx.rows == x.rows && dx.cols == x.cols, "swiglu_backward: dx is {}x{}, x is {}x{}",
               dx.rows, dx.cols, x.rows, x.cols);
  if (simhooks::charge_bytes(op_costs::bytes(x.rows * F, kSwigluBackwardTouches))) return;
  for (std::int64_t n = 0; n < x.rows; ++n) {
    const float* a = x.data + n * x.ld;
    const float* b = a + F;
    const float* dyr = dy.data + n * dy.ld;
    float* da = dx.data + n * dx.ld;
    float* db = da + F;
    for (std::int64_t f = 0; f < F; ++f) {
      const float s = sigmoid(a[f]), silu = a[f] * s;
      da[f] += dyr[f] * b[f] * s * (1.0f + a[f] * (1.0f - s));
      db[f] += dyr[f] * silu;
    }
  }
}

}  // namespace meshtp
