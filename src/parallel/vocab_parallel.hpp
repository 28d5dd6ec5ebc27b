// Vocabulary-parallel token embedding, tied LM head and cross-entropy (Megatron-LM §3):
// no rank ever holds the full [tokens, vocab] logits.
//
//   n   tokens of this data-parallel replica (b·s), every rank of the group sees all of them
//   V   vocabulary (possibly padded so the group size T divides it); only the first
//       `vocab_real` entries are real tokens — padded logits are masked to −∞, so padding
//       changes nothing and every layout trains the same model
//   h   hidden size
//   wte [V, h] split by rows over the group: rank t holds rows [t·V/T, (t+1)·V/T) ("local")
//
// Embedding    forward : out[n,:] = Σ_t (wte_t[tok_n − v0_t] if tok_n is in t's rows else 0)
//                        → all_reduce over the group (n·h values)
//              backward: dwte_t[tok_n − v0_t] += dout[n,:] for this rank's tokens (dout is
//                        the complete [n, h] gradient, e.g. gathered from the stream)
// LM head + CE forward : logits_t = x·wte_tᵀ                       [n, V/T] local
//                        m_n = max over the group, z_n = Σ_v exp(l_nv − m_n), and the
//                        target's logit l_n,y: one all_reduce(max) of n, one all_reduce(sum)
//                        of 2n values
//                        loss = (1/n) Σ_n (m_n + log z_n − l_n,y)
//              backward: dlogits_t = scale·(softmax − onehot(y))   scale = dloss/n
//                        dx = Σ_t dlogits_t·wte_t → all_reduce over the group ([n, h])
//                        dwte_t += dlogits_tᵀ·x
#pragma once

#include <cstdint>
#include <span>

#include "comm/communicator.hpp"
#include "core/view.hpp"
#include "device/backend.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::parallel {

struct VocabShard {
  std::int64_t vocab = 0;       // padded V, divisible by the group size
  std::int64_t vocab_real = 0;  // real tokens: [0, vocab_real)
  std::int64_t begin = 0;       // this rank's rows [begin, begin + rows)
  std::int64_t rows = 0;
};

// V padded up to a multiple of the group size, and this rank's rows.
VocabShard make_vocab_shard(std::int64_t vocab_real, const comm::Communicator& group);

// On `backend`'s views (fp32; docs/seam.md), through its vocabulary-shard ops and GeMM; the
// group must move that memory. vocab_cross_entropy_forward returns the mean loss over the n
// rows (identical on every rank), saving the local logits (overwritten by their softmax) and
// per-row log-sum-exp (lse, 1 × n) for the backward; `stats` is fp32 1 × ≥ 3n of scratch.
// The backward overwrites dx with the complete input gradient, adds into dwte_local, and
// consumes the logits.
void vocab_embedding_forward(device::Backend& backend, const View& out,
                             std::span<const std::int32_t> tokens, const View& wte_local,
                             const VocabShard& shard, const comm::Communicator& group);
void vocab_embedding_backward(device::Backend& backend, const View& dwte_local, const View& dout,
                              std::span<const std::int32_t> tokens, const VocabShard& shard);
double vocab_cross_entropy_forward(device::Backend& backend, const View& logits_local,
                                   const View& lse, const View& x, const View& wte_local,
                                   std::span<const std::int32_t> targets, const VocabShard& shard,
                                   const comm::Communicator& group, const View& stats);
void vocab_cross_entropy_backward(device::Backend& backend, const View& dx, const View& dwte_local,
                                  const View& logits_local, const View& lse, const View& x,
                                  const View& wte_local, std::span<const std::int32_t> targets,
                                  const VocabShard& shard, const comm::Communicator& group,
                                  float dloss = 1.0f);

}  // namespace meshtp::parallel
