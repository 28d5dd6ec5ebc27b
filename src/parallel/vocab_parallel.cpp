#include "parallel/vocab_parallel.hpp"

#include "core/error.hpp"
#include "core/trace.hpp"

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

void vocab_embedding_forward(device::Backend& backend, const View& out,
                             std::span<const std::int32_t> tokens, const View& wte_local,
                             const VocabShard& shard, const comm::Communicator& group) {
  const ScopedSpan span("embedding", SpanKind::kCompute);
  check_tokens(tokens, out.rows, shard, "token");
  MESHTP_CHECK(wte_local.rows == shard.rows && wte_local.cols == out.cols && out.contiguous(),
               "vocab embedding: wte shard {}x{} and output {}x{} do not match {} rows",
               wte_local.rows, wte_local.cols, out.rows, out.cols, shard.rows);
  // This shard's rows of the table (zeros for the other tokens), summed over the shards.
  backend.embedding_shard_forward(out, tokens, wte_local, shard.begin);
  group.all_reduce(comm::buffer_of(out), comm::ReduceOp::kSum);
}

void vocab_embedding_backward(device::Backend& backend, const View& dwte_local, const View& dout,
                              std::span<const std::int32_t> tokens, const VocabShard& shard) {
  const ScopedSpan span("embedding", SpanKind::kCompute);
  check_tokens(tokens, dout.rows, shard, "token");
  backend.embedding_shard_backward(dwte_local, dout, tokens, shard.begin);
}

double vocab_cross_entropy_forward(device::Backend& backend, const View& logits, const View& lse,
                                   const View& x, const View& wte_local,
                                   std::span<const std::int32_t> targets, const VocabShard& shard,
                                   const comm::Communicator& group, const View& stats) {
  const ScopedSpan span("lm_head", SpanKind::kCompute);
  const std::int64_t n = x.rows;
  check_tokens(targets, n, shard, "target");
  MESHTP_CHECK(logits.rows == n && logits.cols == shard.rows && lse.rows == 1 && lse.cols == n &&
                   stats.rows == 1 && stats.cols >= 3 * n,
               "vocab cross-entropy: buffers do not match {} rows of {} local logits", n,
               shard.rows);
  backend.gemm(logits, x, Trans::kNo, wte_local, Trans::kYes);
  // The softmax statistics over the shards (ops/cross_entropy.hpp's phases): the row maxima,
  // max-reduced; the exponential sums and the targets' logits, summed; then lse and the loss.
  const View row_max = stats.block(0, 0, 1, n), sums = stats.block(0, n, 1, 2 * n);
  backend.cross_entropy_shard_max(logits, row_max, shard.begin, shard.vocab_real);
  group.all_reduce(comm::buffer_of(row_max), comm::ReduceOp::kMax);
  backend.cross_entropy_shard_sums(sums, logits, row_max, targets, shard.begin, shard.vocab_real);
  group.all_reduce(comm::buffer_of(sums), comm::ReduceOp::kSum);
  return backend.cross_entropy_shard_loss(lse, row_max, sums);
}

void vocab_cross_entropy_backward(device::Backend& backend, const View& dx, const View& dwte_local,
                                  const View& logits, const View& lse, const View& x,
                                  const View& wte_local, std::span<const std::int32_t> targets,
                                  const VocabShard& shard, const comm::Communicator& group,
                                  float dloss) {
  const ScopedSpan span("lm_head", SpanKind::kCompute);
  const std::int64_t n = x.rows;
  MESHTP_CHECK(dx.rows == n && dx.cols == x.cols && dx.contiguous(),
               "vocab cross-entropy: dx {}x{} does not match x {}x{}", dx.rows, dx.cols, n,
               x.cols);
  const float scale = dloss / static_cast<float>(n);
  // dlogits = scale·(softmax − onehot), in place of the logits.
  backend.cross_entropy_shard_backward(logits, lse, targets, shard.begin, scale);
  backend.gemm(dx, logits, Trans::kNo, wte_local, Trans::kNo);               // dx = dlogits·wte
  backend.gemm(dwte_local, logits, Trans::kYes, x, Trans::kNo, 1.0f, 1.0f);  // dwte += dlogitsᵀ·x
  group.all_reduce(comm::buffer_of(dx), comm::ReduceOp::kSum);
}

}  // namespace meshtp::parallel
