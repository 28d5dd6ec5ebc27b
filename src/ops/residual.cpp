#include "ops/residual.hpp"

#include "core/error.hpp"
#include "core/trace.hpp"

namespace meshtp {
namespace {

void check_same_shape(const char* what, ConstMatrixView a, ConstMatrixView b) {
  MESHTP_CHECK(a.rows == b.rows && a.cols == b.cols, "{}: a {}x{} view against a {}x{} view", what,
               a.rows, a.cols, b.rows, b.cols);
}

// acc += dy
void accumulate(MatrixView acc, ConstMatrixView dy) {
  for (std::int64_t n = 0; n < dy.rows; ++n) {
    const float* src = dy.data + n * dy.ld;
    float* dst = acc.data + n * acc.ld;
    for (std::int64_t c = 0; c < dy.cols; ++c) dst[c] += src[c];
  }
}

}  // namespace

void residual_forward(MatrixView y, ConstMatrixView a, ConstMatrixView b) {
  const ScopedSpan span("residual", SpanKind::kCompute);
  check_same_shape("residual_forward a vs y", a, y);
  check_same_shape("residual_forward b vs y", b, y);
  for (std::int64_t n = 0; n < y.rows; ++n) {
    const float* ar = a.data + n * a.ld;
    const float* br = b.data + n * b.ld;
    float* yr = y.data + n * y.ld;
    for (std::int64_t c = 0; c < y.cols; ++c) yr[c] = ar[c] + br[c];
  }
}

void residual_backward(MatrixView da, MatrixView db, ConstMatrixView dy) {
  const ScopedSpan span("residual", SpanKind::kCompute);
  check_same_shape("residual_backward da vs dy", da, dy);
  check_same_shape("residual_backward db vs dy", db, dy);
  accumulate(da, dy);
  accumulate(db, dy);
}

void residual_accumulate(MatrixView acc, ConstMatrixView x) {
  const ScopedSpan span("residual", SpanKind::kCompute);
  check_same_shape("residual_accumulate acc vs x", acc, x);
  accumulate(acc, x);
}

}  // namespace meshtp
