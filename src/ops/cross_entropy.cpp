#include "ops/cross_entropy.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"
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

}  // namespace meshtp
