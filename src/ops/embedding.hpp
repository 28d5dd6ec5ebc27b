// Token + position embedding (GPT-2's wte + wpe).
//
//   B     batch (or one chunk of it)
//   T     sequence length, T ≤ maxT
//   C     channels (hidden size)
//   V     vocabulary size
//   maxT  rows of the position table
//
//   tokens: (B,T) int32, row-major     wte: (V,C)     wpe: (maxT,C)     out: (B·T, C)
//
//   forward : out[(b,t),:] = wte[tokens[b,t],:] + wpe[t,:]
//   backward: dwte[tokens[b,t],:] += dout[(b,t),:]      (a token seen twice gets both)
//             dwpe[t,:]           += Σ_b dout[(b,t),:]
//
// Token ids are checked against [0, V) on entry, once per call, before anything is written.
#pragma once

#include <cstdint>
#include <span>

#include "tensor/tensor.hpp"

namespace meshtp {

// out[(b,t),:] = wte[tokens[b,t],:] + wpe[t,:]
void embedding_forward(MatrixView out, std::span<const std::int32_t> tokens, std::int64_t B,
                       std::int64_t T, ConstMatrixView wte, ConstMatrixView wpe);

// dwte[tokens[b,t],:] += dout[(b,t),:],   dwpe[t,:] += Σ_b dout[(b,t),:]
void embedding_backward(MatrixView dwte, MatrixView dwpe, ConstMatrixView dout,
                        std::span<const std::int32_t> tokens, std::int64_t B, std::int64_t T);

// A vocabulary shard of the token table: wte_shard holds rows [begin, begin + wte_shard.rows).
//   forward   out[n,:] = wte_shard[t_n − begin,:] for a token in the shard, else 0 (the caller
//             sums out over the shards: the vocabulary-parallel embedding)
//   backward  dwte_shard[t_n − begin,:] += dout[n,:] for the tokens in the shard
// Tokens are the caller's to check. Charged in the simulated build (core/simulation.hpp).
// Whether token falls in the vocabulary shard [begin, begin + rows).
inline bool in_vocab_shard(std::int32_t token, std::int64_t begin, std::int64_t rows) {
  return token >= begin && token < begin + rows;
}
void embedding_shard_forward(MatrixView out, std::span<const std::int32_t> tokens,
                             ConstMatrixView wte_shard, std::int64_t begin);
void embedding_shard_backward(MatrixView dwte_shard, ConstMatrixView dout,
                              std::span<const std::int32_t> tokens, std::int64_t begin);

}  // namespace meshtp
