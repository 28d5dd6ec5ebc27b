#include "parallel/vocab_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"
#include "ops/kernels.hpp"
#include "tensor/gemm.hpp"

namespace meshtp::parallel {
namespace {

void check_tokens(std::span<const std::int32_t> tokens, std::int64_t n, const VocabShard& s,
                  const char* what) {
  MESHTP_CHECK(static_cast<std::int64_t>(tokens.size()) == n,
               "vocab-parallel: {} {} for {} rows", tokens.size(), what, n);
  for (const std::int32_t t : tokens) {
    MESHTP_CHECK(t >= 0 && t < s.vocab_real, "vocab-parallel: {} id {} is outside [0, {})", what,
                 t, s.vocab_real);
  }
}

bool mine(std::int32_t token, const VocabShard& s) {
  return token >= s.begin && token < s.begin + s.rows;
}

}  // namespace

VocabShard make_vocab_shard(std::int64_t vocab_real, const comm::Communicator& group) {
  MESHTP_CHECK(vocab_real > 0, "vocab size {} must be positive", vocab_real);
  const std::int64_t t = group.size();
  VocabShard s;
  s.vocab_real = vocab_real;
  s.vocab = (vocab_real + t - 1) / t * t;
  s.rows = s.vocab / t;
  s.begin = group.rank() * s.rows;
  return s;
}

void vocab_embedding_forward(MatrixView out, std::span<const std::int32_t> tokens,
                             ConstMatrixView wte_local, const VocabShard& shard,
                             const comm::Communicator& group) {
  const ScopedSpan span("embedding", SpanKind::kCompute);
  check_tokens(tokens, out.rows, shard, "token");
  MESHTP_CHECK(wte_local.rows == shard.rows && wte_local.cols == out.cols && out.contiguous(),
               "vocab embedding: wte shard {}x{} and output {}x{} do not match {} rows",
               wte_local.rows, wte_local.cols, out.rows, out.cols, shard.rows);
  const auto group_sum = [&] {
    group.all_reduce(std::span<float>(out.data, static_cast<std::size_t>(out.rows * out.cols)));
  };
  // Simulated build, charged mode: the time instead of the work (core/simulation.hpp); the
  // all-reduce still runs.
  if (simhooks::charge_bytes(
          op_costs::bytes(out.rows * out.cols, op_costs::kEmbeddingForwardTouches))) {
    return group_sum();
  }
  const auto row_bytes = static_cast<std::size_t>(out.cols) * sizeof(float);
  for (std::int64_t n = 0; n < out.rows; ++n) {
    float* dst = &out(n, 0);
    if (mine(tokens[n], shard)) {
      std::memcpy(dst, &wte_local(tokens[n] - shard.begin, 0), row_bytes);
    } else {
      std::memset(dst, 0, row_bytes);
    }
  }
  group_sum();
}

void vocab_embedding_backward(MatrixView dwte_local, ConstMatrixView dout,
                              std::span<const std::int32_t> tokens, const VocabShard& shard) {
  const ScopedSpan span("embedding", SpanKind::kCompute);
  check_tokens(tokens, dout.rows, shard, "token");
  if (simhooks::charge_bytes(
          op_costs::bytes(dout.rows * dout.cols, op_costs::kEmbeddingBackwardTouches))) {
    return;
  }
  for (std::int64_t n = 0; n < dout.rows; ++n) {
    if (!mine(tokens[n], shard)) continue;
    float* dst = &dwte_local(tokens[n] - shard.begin, 0);
    kernels::fast().add(dst, dst, &dout(n, 0), dout.cols);
  }
}

double vocab_cross_entropy_forward(MatrixView logits, std::span<float> lse, ConstMatrixView x,
                                   ConstMatrixView wte_local,
                                   std::span<const std::int32_t> targets, const VocabShard& shard,
                                   const comm::Communicator& group, std::span<float> stats) {
  const ScopedSpan span("lm_head", SpanKind::kCompute);
  const std::int64_t n = x.rows;
  check_tokens(targets, n, shard, "target");
  MESHTP_CHECK(logits.rows == n && logits.cols == shard.rows &&
                   static_cast<std::int64_t>(lse.size()) == n &&
                   static_cast<std::int64_t>(stats.size()) >= 3 * n,
               "vocab cross-entropy: buffers do not match {} rows of {} local logits", n,
               shard.rows);
  gemm(x, Trans::kNo, wte_local, Trans::kYes, logits);
  // Charged mode: the softmax statistics' time, their two all-reduces still run.
  if (simhooks::charge_bytes(
          op_costs::bytes(n * shard.rows, op_costs::kCrossEntropyForwardTouches))) {
    group.all_reduce(stats.subspan(0, static_cast<std::size_t>(n)), comm::ReduceOp::kMax);
    group.all_reduce(stats.subspan(static_cast<std::size_t>(n), static_cast<std::size_t>(2 * n)));
    return 0.0;
  }
  // Padded vocabulary entries are not tokens: −∞ logits, zero probability.
  const std::int64_t real_here = std::clamp<std::int64_t>(shard.vocab_real - shard.begin, 0, shard.rows);
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  std::span<float> row_max = stats.subspan(0, static_cast<std::size_t>(n));
  std::span<float> sums = stats.subspan(static_cast<std::size_t>(n), static_cast<std::size_t>(2 * n));
  const auto& k = kernels::fast();
  for (std::int64_t r = 0; r < n; ++r) {
    float* row = &logits(r, 0);
    std::fill(row + real_here, row + shard.rows, kMinusInf);
    row_max[r] = k.max_of(row, shard.rows);
  }
  group.all_reduce(row_max, comm::ReduceOp::kMax);
  for (std::int64_t r = 0; r < n; ++r) {
    const double z = k.sum_exp(&logits(r, 0), real_here, row_max[r]);
    sums[2 * r] = static_cast<float>(z);
    sums[2 * r + 1] = mine(targets[r], shard) ? logits(r, targets[r] - shard.begin) : 0.0f;
  }
  group.all_reduce(sums);
  double loss = 0.0;
  for (std::int64_t r = 0; r < n; ++r) {
    lse[r] = row_max[r] + std::log(sums[2 * r]);
    loss += static_cast<double>(lse[r]) - sums[2 * r + 1];
  }
  return loss / static_cast<double>(n);
}

void vocab_cross_entropy_backward(MatrixView dx, MatrixView dwte_local, MatrixView logits,
                                  std::span<const float> lse, ConstMatrixView x,
                                  ConstMatrixView wte_local, std::span<const std::int32_t> targets,
                                  const VocabShard& shard, const comm::Communicator& group,
                                  float dloss) {
  const ScopedSpan span("lm_head", SpanKind::kCompute);
  const std::int64_t n = x.rows;
  MESHTP_CHECK(dx.rows == n && dx.cols == x.cols && dx.contiguous(),
               "vocab cross-entropy: dx {}x{} does not match x {}x{}", dx.rows, dx.cols, n,
               x.cols);
  const float scale = dloss / static_cast<float>(n);
  // dlogits = scale·(softmax − onehot), in place of the logits (charged mode: its time).
  if (!simhooks::charge_bytes(
          op_costs::bytes(n * shard.rows, op_costs::kCrossEntropyBackwardTouches))) {
    const auto& k = kernels::fast();
    for (std::int64_t r = 0; r < n; ++r) {
      float* row = &logits(r, 0);
      k.scaled_exp(row, row, shard.rows, lse[r], scale, false);  // exp(−∞) = 0 for padding
      if (mine(targets[r], shard)) logits(r, targets[r] - shard.begin) -= scale;
    }
  }
  gemm(logits, Trans::kNo, wte_local, Trans::kNo, dx);                    // dx = dlogits·wte
  gemm(logits, Trans::kYes, x, Trans::kNo, dwte_local, 1.0f, 1.0f);       // dwte += dlogitsᵀ·x
  group.all_reduce(std::span<float>(dx.data, static_cast<std::size_t>(dx.rows * dx.cols)));
}

}  // namespace meshtp::parallel
