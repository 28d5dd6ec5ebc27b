#include "ops/embedding.hpp"

#include <cstring>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"
#include "ops/kernels.hpp"

namespace meshtp {
namespace {

// Shapes and token range, checked before any write.
void check_embedding(const char* fn, ConstMatrixView out, std::span<const std::int32_t> tokens,
                     std::int64_t B, std::int64_t T, ConstMatrixView wte, ConstMatrixView wpe) {
  MESHTP_CHECK(B >= 0 && T >= 0 && static_cast<std::int64_t>(tokens.size()) == B * T,
               "{}: {} tokens, expected B·T = {}·{} = {}", fn, tokens.size(), B, T, B * T);
  MESHTP_CHECK(out.rows == B * T && out.cols == wte.cols && wpe.cols == wte.cols,
               "{}: activations {}x{}, wte {}x{}, wpe {}x{}; expected (B·T={})xC with one C", fn,
               out.rows, out.cols, wte.rows, wte.cols, wpe.rows, wpe.cols, B * T);
  MESHTP_CHECK(T <= wpe.rows, "{}: sequence length T={} exceeds the {} position embeddings", fn, T,
               wpe.rows);
  const std::int64_t V = wte.rows;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    MESHTP_CHECK(tokens[i] >= 0 && tokens[i] < V,
                 "{}: token {} at position {} is outside the vocabulary [0, {})", fn, tokens[i], i,
                 V);
  }
}

}  // namespace

void embedding_forward(MatrixView out, std::span<const std::int32_t> tokens, std::int64_t B,
                       std::int64_t T, ConstMatrixView wte, ConstMatrixView wpe) {
  const ScopedSpan span("embedding", SpanKind::kCompute);
  check_embedding("embedding_forward", out, tokens, B, T, wte, wpe);
  const std::int64_t C = out.cols;
  // Simulated build, charged mode: the time instead of the work (core/simulation.hpp).
  if (simhooks::charge_bytes(op_costs::bytes(B * T * C, op_costs::kEmbeddingForwardTouches)))
    return;
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < T; ++t) {
      const float* tok = wte.data + tokens[b * T + t] * wte.ld;
      const float* pos = wpe.data + t * wpe.ld;
      float* o = out.data + (b * T + t) * out.ld;
      for (std::int64_t c = 0; c < C; ++c) o[c] = tok[c] + pos[c];
    }
  }
}

void embedding_backward(MatrixView dwte, MatrixView dwpe, ConstMatrixView dout,
                        std::span<const std::int32_t> tokens, std::int64_t B, std::int64_t T) {
  const ScopedSpan span("embedding", SpanKind::kCompute);
  check_embedding("embedding_backward", dout, tokens, B, T, dwte, dwpe);
  const std::int64_t C = dout.cols;
  if (simhooks::charge_bytes(op_costs::bytes(B * T * C, op_costs::kEmbeddingBackwardTouches)))
    return;
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < T; ++t) {
      const float* d = dout.data + (b * T + t) * dout.ld;
      float* tok = dwte.data + tokens[b * T + t] * dwte.ld;
      float* pos = dwpe.data + t * dwpe.ld;
      for (std::int64_t c = 0; c < C; ++c) {
        tok[c] += d[c];
        pos[c] += d[c];
      }
    }
  }
}


// ---- a vocabulary shard (embedding.hpp) -------------------------------------------------

void embedding_shard_forward(MatrixView out, std::span<const std::int32_t> tokens,
                             ConstMatrixView wte_shard, std::int64_t begin) {
  MESHTP_CHECK(static_cast<std::int64_t>(tokens.size()) == out.rows && wte_shard.cols == out.cols,
               "embedding_shard_forward: {} tokens for {} rows, table {} wide, output {}",
               tokens.size(), out.rows, wte_shard.cols, out.cols);
  if (simhooks::charge_bytes(
          op_costs::bytes(out.rows * out.cols, op_costs::kEmbeddingForwardTouches))) {
    return;
  }
  const auto row_bytes = static_cast<std::size_t>(out.cols) * sizeof(float);
  for (std::int64_t n = 0; n < out.rows; ++n) {
    float* dst = out.data + n * out.ld;
    const std::int32_t t = tokens[static_cast<std::size_t>(n)];
    if (in_vocab_shard(t, begin, wte_shard.rows)) {
      std::memcpy(dst, wte_shard.data + (t - begin) * wte_shard.ld, row_bytes);
    } else {
      std::memset(dst, 0, row_bytes);
    }
  }
}

void embedding_shard_backward(MatrixView dwte_shard, ConstMatrixView dout,
                              std::span<const std::int32_t> tokens, std::int64_t begin) {
  MESHTP_CHECK(static_cast<std::int64_t>(tokens.size()) == dout.rows &&
                   dwte_shard.cols == dout.cols,
               "embedding_shard_backward: {} tokens for {} rows, table {} wide, gradient {}",
               tokens.size(), dout.rows, dwte_shard.cols, dout.cols);
  if (simhooks::charge_bytes(
          op_costs::bytes(dout.rows * dout.cols, op_costs::kEmbeddingBackwardTouches))) {
    return;
  }
  const auto& k = kernels::fast();
  for (std::int64_t n = 0; n < dout.rows; ++n) {
    const std::int32_t t = tokens[static_cast<std::size_t>(n)];
    if (!in_vocab_shard(t, begin, dwte_shard.rows)) continue;
    float* dst = dwte_shard.data + (t - begin) * dwte_shard.ld;
    k.add(dst, dst, dout.data + n * dout.ld, dout.cols);
  }
}
}  // namespace meshtp
