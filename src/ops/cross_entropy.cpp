#include "ops/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"
#include "ops/embedding.hpp"
#include "ops/kernels.hpp"

namespace meshtp {
namespace {

void check_targets(const char* fn, ConstMatrixView logits, std::span<const std::int32_t> targets) {
  MESHTP_CHECK(static_cast<std::int64_t>(targets.size()) == logits.rows,
               "{}: {} targets for {} rows of logits", fn, targets.size(), logits.rows);
  MESHTP_CHECK(logits.cols > 0, "{}: logits have no classes (V=0)", fn);
  for (std::size_t n = 0; n < targets.size(); ++n) {
    MESHTP_CHECK(targets[n] >= 0 && targets[n] < logits.cols,
                 "{}: target {} of row {} is outside the classes [0, {})", fn, targets[n], n,
                 logits.cols);
  }
}

void check_backward(MatrixView dlogits, ConstMatrixView logits, std::span<const float> lse,
                    std::span<const std::int32_t> targets) {
  check_targets("cross_entropy_backward", logits, targets);
  MESHTP_CHECK(dlogits.rows == logits.rows && dlogits.cols == logits.cols,
               "cross_entropy_backward: dlogits is {}x{}, logits {}x{}", dlogits.rows, dlogits.cols,
               logits.rows, logits.cols);
  MESHTP_CHECK(static_cast<std::int64_t>(lse.size()) == logits.rows,
               "cross_entropy_backward: lse has {} values, expected N={}", lse.size(), logits.rows);
}

}  // namespace

double cross_entropy_forward(std::span<float> lse, ConstMatrixView logits,
                             std::span<const std::int32_t> targets) {
  const ScopedSpan span("lm_head", SpanKind::kCompute);
  check_targets("cross_entropy_forward", logits, targets);
  const std::int64_t N = logits.rows, V = logits.cols;
  MESHTP_CHECK(static_cast<std::int64_t>(lse.size()) == N,
               "cross_entropy_forward: lse has {} slots, expected N={}", lse.size(), N);
  // Simulated build, charged mode: the time instead of the work (core/simulation.hpp).
  if (simhooks::charge_bytes(op_costs::bytes(N * V, op_costs::kCrossEntropyForwardTouches)))
    return 0.0;
  const auto& k = kernels::fast();
  double total = 0.0;
  for (std::int64_t n = 0; n < N; ++n) {
    const float* row = logits.data + n * logits.ld;
    const float mx = k.max_of(row, V);
    const double l = mx + std::log(k.sum_exp(row, V, mx));
    lse[n] = static_cast<float>(l);
    total += l - row[targets[n]];
  }
  return N == 0 ? 0.0 : total / static_cast<double>(N);
}

void cross_entropy_backward(MatrixView dlogits, ConstMatrixView logits, std::span<const float> lse,
                            std::span<const std::int32_t> targets, float dloss) {
  const ScopedSpan span("lm_head", SpanKind::kCompute);
  check_backward(dlogits, logits, lse, targets);
  const std::int64_t N = logits.rows, V = logits.cols;
  if (N == 0 ||
      simhooks::charge_bytes(op_costs::bytes(N * V, op_costs::kCrossEntropyBackwardTouches))) {
    return;
  }
  const float g = dloss / static_cast<float>(N);
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < N; ++n) {
    float* drow = dlogits.data + n * dlogits.ld;
    k.scaled_exp(drow, logits.data + n * logits.ld, V, lse[n], g, true);
    drow[targets[n]] -= g;
  }
}

double cross_entropy_forward_reference(std::span<float> lse, ConstMatrixView logits,
                                       std::span<const std::int32_t> targets) {
  check_targets("cross_entropy_forward", logits, targets);
  const std::int64_t N = logits.rows, V = logits.cols;
  MESHTP_CHECK(static_cast<std::int64_t>(lse.size()) == N,
               "cross_entropy_forward: lse has {} slots, expected N={}", lse.size(), N);
  double total = 0.0;
  for (std::int64_t n = 0; n < N; ++n) {
    const float* row = logits.data + n * logits.ld;
    const float mx = *std::max_element(row, row + V);
    double sum = 0.0;
    for (std::int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx);  // float exp, double sum
    const double l = mx + std::log(sum);
    lse[n] = static_cast<float>(l);
    total += l - row[targets[n]];
  }
  return N == 0 ? 0.0 : total / static_cast<double>(N);
}

void cross_entropy_backward_reference(MatrixView dlogits, ConstMatrixView logits,
                                      std::span<const float> lse,
                                      std::span<const std::int32_t> targets, float dloss) {
  check_backward(dlogits, logits, lse, targets);
  const std::int64_t N = logits.rows, V = logits.cols;
  if (N == 0) return;
  const float g = dloss / static_cast<float>(N);
  for (std::int64_t n = 0; n < N; ++n) {
    const float* row = logits.data + n * logits.ld;
    float* drow = dlogits.data + n * dlogits.ld;
    const float l = lse[n];
    for (std::int64_t v = 0; v < V; ++v) drow[v] += g * std::exp(row[v] - l);
    drow[targets[n]] -= g;
  }
}


// ---- a vocabulary shard (cross_entropy.hpp) ---------------------------------------------

namespace {
// The shard's real columns: those below vocab_real.
std::int64_t real_columns(std::int64_t begin, std::int64_t cols, std::int64_t vocab_real) {
  return std::clamp<std::int64_t>(vocab_real - begin, 0, cols);
}
}  // namespace

void cross_entropy_shard_max(MatrixView logits, std::span<float> row_max, std::int64_t begin,
                             std::int64_t vocab_real) {
  const std::int64_t n = logits.rows, cols = logits.cols;
  MESHTP_CHECK(static_cast<std::int64_t>(row_max.size()) == n,
               "cross_entropy_shard_max: {} maxima for {} rows", row_max.size(), n);
  if (simhooks::charge_bytes(op_costs::bytes(n * cols, op_costs::kCrossEntropyForwardTouches))) {
    return;
  }
  const std::int64_t real = real_columns(begin, cols, vocab_real);
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  const auto& k = kernels::fast();
  for (std::int64_t r = 0; r < n; ++r) {
    float* row = logits.data + r * logits.ld;
    std::fill(row + real, row + cols, kMinusInf);
    row_max[static_cast<std::size_t>(r)] = k.max_of(row, cols);
  }
}

void cross_entropy_shard_sums(std::span<float> sums, ConstMatrixView logits,
                              std::span<const float> row_max,
                              std::span<const std::int32_t> targets, std::int64_t begin,
                              std::int64_t vocab_real) {
  const std::int64_t n = logits.rows;
  MESHTP_CHECK(static_cast<std::int64_t>(sums.size()) == 2 * n &&
                   static_cast<std::int64_t>(targets.size()) == n,
               "cross_entropy_shard_sums: {} sums and {} targets for {} rows (2·N and N)",
               sums.size(), targets.size(), n);
  if (simhooks::values_meaningless()) return;  // charged in phase 1
  const std::int64_t real = real_columns(begin, logits.cols, vocab_real);
  const auto& k = kernels::fast();
  for (std::int64_t r = 0; r < n; ++r) {
    const float* row = logits.data + r * logits.ld;
    const auto i = static_cast<std::size_t>(r);
    sums[2 * i] = static_cast<float>(k.sum_exp(row, real, row_max[i]));
    sums[2 * i + 1] = in_vocab_shard(targets[i], begin, logits.cols) ? row[targets[i] - begin] : 0.0f;
  }
}

double cross_entropy_shard_loss(std::span<float> lse, std::span<const float> row_max,
                                std::span<const float> sums) {
  if (simhooks::values_meaningless()) return 0.0;  // charged in phase 1
  double loss = 0.0;
  for (std::size_t r = 0; r < lse.size(); ++r) {
    lse[r] = row_max[r] + std::log(sums[2 * r]);
    loss += static_cast<double>(lse[r]) - sums[2 * r + 1];
  }
  return loss / static_cast<double>(lse.size());
}

void cross_entropy_shard_backward(MatrixView logits, std::span<const float> lse,
                                  std::span<const std::int32_t> targets, std::int64_t begin,
                                  float scale) {
  const std::int64_t n = logits.rows, cols = logits.cols;
  if (simhooks::charge_bytes(op_costs::bytes(n * cols, op_costs::kCrossEntropyBackwardTouches))) {
    return;
  }
  const auto& k = kernels::fast();
  for (std::int64_t r = 0; r < n; ++r) {
    float* row = logits.data + r * logits.ld;
    const auto i = static_cast<std::size_t>(r);
    k.scaled_exp(row, row, cols, lse[i], scale, false);  // exp(−∞) = 0 for padding
    if (in_vocab_shard(targets[i], begin, cols)) row[targets[i] - begin] -= scale;
  }
}
}  // namespace meshtp
