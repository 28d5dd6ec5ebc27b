// Attention core benchmark (`meshtp bench attention`): the fused causal attention
// (ops/flash_attention.hpp) against today's attention (ops/attention.hpp, the T×T
// probabilities saved for the backward) in the same process, on the same inputs, interleaved
// so load drift hits both alike.
//
//   validate   the fused forward's out and backward's dqkv against today's (for grouped-query
//              attention, today's on the KV heads repeated, its dK, dV summed over each group):
//              max relative error ≤ 1e-4, or the benchmark throws. Without the baseline
//              (--no-baseline: a T×T buffer that would not fit) the check runs on the first
//              check_seq tokens of each sequence.
//   time       forward and backward, each a median over iterations
//   memory     each variant's working buffers beyond the inputs and outputs they share (qkv,
//              dout, out, dqkv), as the tensor ledger counts them (tensor/memory.hpp): today's
//              att (B·NH·T²) and backward scratch (T²); the fused op's lse (B·NH·T) and tiles
//
// One thread of BLAS (MESHTP_BLAS_THREADS), like a rank of the runtime.
#pragma once

#include <cstdint>

namespace meshtp::bench {

struct AttentionBenchOptions {
  std::int64_t batch = 1, seq = 2048, heads = 8, kv_heads = 8, head_dim = 64;
  std::int64_t block_q = 64, block_k = 256;  // the fused op's tiles
  bool baseline = true;                      // time today's attention too
  std::int64_t check_seq = 256;              // tokens validated when baseline is false
  double target_seconds = 2.0;               // per variant, forward + backward
  int min_iterations = 3;
};

struct AttentionVariant {
  double forward_s = 0, backward_s = 0;  // medians
  std::int64_t working_bytes = 0;        // the variant's buffers beyond the shared ones
  std::int64_t peak_bytes = 0;           // tensor peak while it ran, shared buffers included
  double flops = 0;                      // the products it ran, forward + backward (gemm ledger)
};

struct AttentionBenchSample {
  AttentionVariant fused, today;  // today: zeros without the baseline
  int iterations = 0;
  double max_relative_error = 0;  // of the validation (out and dqkv)
  std::int64_t checked_seq = 0;   // tokens per sequence the validation ran on
  std::int64_t shared_bytes = 0;  // qkv, dout, out, dqkv of the fused op's shapes
};

// Throws meshtp::Error for bad sizes (naming them) or a fused result that differs from
// today's.
AttentionBenchSample run_attention_bench(const AttentionBenchOptions& o);

}  // namespace meshtp::bench
