#include "ops/rope.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"

namespace meshtp {
namespace {

constexpr double kRopeTouches = 3;  // read x, read the table, write x (rope.hpp)

// Rotates every head of x by +angle (sign 1) or −angle (sign −1).
// cos_sin: the table's len × HD values (RopeTable::cos_sin); pos0 its first position, for
// messages (negative: not known).
void rotate(const char* fn, MatrixView x, ConstMatrixView cos_sin, std::int64_t pos0,
            std::int64_t batch, std::int64_t heads, float sign) {
  const ScopedSpan span("rope", SpanKind::kCompute);
  const std::int64_t HD = cos_sin.cols, half = HD / 2;
  MESHTP_CHECK(batch >= 1 && heads >= 1, "{}: batch={} and heads={} must be positive", fn, batch,
               heads);
  MESHTP_CHECK(x.cols == heads * HD,
               "{}: x is {}x{}, expected width heads·HD = {}·{} = {} (the table's head_dim)", fn,
               x.rows, x.cols, heads, HD, heads * HD);
  MESHTP_CHECK(x.rows % batch == 0, "{}: x has {} rows, not B·T for batch B={}", fn, x.rows, batch);
  const std::int64_t T = x.rows / batch;
  MESHTP_CHECK(T <= cos_sin.rows, "{}: {} tokens per sequence, but the table covers {} positions{}",
               fn, T, cos_sin.rows, pos0 >= 0 ? fmt::format(" (from {})", pos0) : std::string());
  if (simhooks::charge_bytes(op_costs::bytes(x.rows * x.cols, kRopeTouches))) return;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t t = 0; t < T; ++t) {
      const float* cs = cos_sin.data + t * cos_sin.ld;
      float* row = x.data + (b * T + t) * x.ld;
      for (std::int64_t h = 0; h < heads; ++h) {
        float* lo = row + h * HD;
        float* hi = lo + half;
        for (std::int64_t i = 0; i < half; ++i) {
          const float c = cs[i], s = sign * cs[half + i];
          const float u = lo[i], v = hi[i];
          lo[i] = u * c - v * s;
          hi[i] = v * c + u * s;
        }
      }
    }
  }
}

}  // namespace

RopeTable rope_table(std::int64_t head_dim, std::int64_t pos0, std::int64_t len, double theta) {
  MESHTP_CHECK(head_dim >= 2 && head_dim % 2 == 0,
               "rope_table: head_dim={} must be even and positive (pairs i, i + HD/2)", head_dim);
  MESHTP_CHECK(len >= 1 && pos0 >= 0,
               "rope_table: len={} must be positive and pos0={} not "
               "negative",
               len, pos0);
  MESHTP_CHECK(std::isfinite(theta) && theta > 1.0, "rope_table: theta={} must be above 1", theta);
  RopeTable t{.pos0 = pos0,
              .len = len,
              .head_dim = head_dim,
              .theta = theta,
              .cos_sin = Tensor({len, head_dim})};
  // Simulated build, charged mode: values no one reads are not written (simulation.hpp).
  if (simhooks::skip_values(static_cast<std::size_t>(len * head_dim) * sizeof(float))) return t;
  const std::int64_t half = head_dim / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    const double freq =
        std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    for (std::int64_t p = 0; p < len; ++p) {
      const double angle = static_cast<double>(pos0 + p) * freq;
      t.cos_sin.data()[p * head_dim + i] = static_cast<float>(std::cos(angle));
      t.cos_sin.data()[p * head_dim + half + i] = static_cast<float>(std::sin(angle));
    }
  }
  return t;
}

void rope_forward(MatrixView x, const RopeTable& table, std::int64_t batch, std::int64_t heads) {
  rotate("rope_forward", x, table.cos_sin.matrix(), table.pos0, batch, heads, 1.0f);
}

void rope_backward(MatrixView dx, const RopeTable& table, std::int64_t batch, std::int64_t heads) {
  rotate("rope_backward", dx, table.cos_sin.matrix(), table.pos0, batch, heads, -1.0f);
}

void rope_forward(MatrixView x, ConstMatrixView cos_sin, std::int64_t batch, std::int64_t heads) {
  rotate("rope_forward", x, cos_sin, -1, batch, heads, 1.0f);
}

void rope_backward(MatrixView dx, ConstMatrixView cos_sin, std::int64_t batch, std::int64_t heads) {
  rotate("rope_backward", dx, cos_sin, -1, batch, heads, -1.0f);
}

}  // namespace meshtp
