// Softmax cross-entropy over logits with integer targets, mean over rows.
//
//   N  rows (tokens: batch·sequence)
//   V  classes (vocabulary)
//
//   logits: (N,V)   targets: (N) int32 in [0, V)   lse: (N)
//
//   forward : lse_n = log Σ_v exp(logits[n,v])                  (saved for the backward)
//             loss  = (1/N) · Σ_n (lse_n − logits[n, targets[n]])
//   backward: dlogits[n,v] += (dloss/N) · (softmax(logits[n])[v] − [v = targets[n]])
//             softmax(logits[n])[v] = exp(logits[n,v] − lse_n)
//
// The backward is the fused softmax + cross-entropy gradient: it never forms the probabilities
// as a tensor. Row sums run in double with the row maximum subtracted first; the exps are the
// fast kernels' (kernels.hpp). A caller that splits the N rows into chunks and wants the mean
// over all of them passes dloss = N_chunk / N_total to each chunk's backward (and weights the
// chunk losses the same way).
#pragma once

#include <cstdint>
#include <span>

#include "tensor/tensor.hpp"

namespace meshtp {

// Returns the mean loss (summed in double, so it is exact to fp64 for the given fp32 logits);
// writes lse[n] = log Σ_v exp(logits[n,v]).
double cross_entropy_forward(std::span<float> lse, ConstMatrixView logits,
                             std::span<const std::int32_t> targets);

// dlogits += (dloss/N)·(softmax(logits) − onehot(targets))
void cross_entropy_backward(MatrixView dlogits, ConstMatrixView logits, std::span<const float> lse,
                            std::span<const std::int32_t> targets, float dloss = 1.0f);

// The naive scalar loops (libm exp) the fast kernels above are tested against.
// Cross-entropy over a vocabulary shard: logits [N, V_local] hold columns [begin, begin +
// V_local) of the vocabulary, whose real tokens end at vocab_real (columns past it are padding:
// −∞, probability 0). Three forward phases with a reduction over the shards between them (the
// vocabulary-parallel head, parallel/vocab_parallel.hpp):
//   1  padding to −∞; row_max[n] = max over local columns                  → max over shards
//   2  sums[2n] = Σ_v exp(logits[n,v] − row_max[n]); sums[2n+1] = the target's logit if it
//      is in the shard, else 0                                              → sum over shards
//   3  lse[n] = row_max[n] + log sums[2n]; returns the mean of lse[n] − target logit
// backward (after phase 3, on the saved lse): logits become dlogits = scale·(softmax − onehot),
// in place. Simulated build, charged mode: phase 1 and the backward charge the op's bytes,
// nothing is computed and phase 3 returns 0.
void cross_entropy_shard_max(MatrixView logits, std::span<float> row_max, std::int64_t begin,
                             std::int64_t vocab_real);
void cross_entropy_shard_sums(std::span<float> sums, ConstMatrixView logits,
                              std::span<const float> row_max,
                              std::span<const std::int32_t> targets, std::int64_t begin,
                              std::int64_t vocab_real);
double cross_entropy_shard_loss(std::span<float> lse, std::span<const float> row_max,
                                std::span<const float> sums);
void cross_entropy_shard_backward(MatrixView logits, std::span<const float> lse,
                                  std::span<const std::int32_t> targets, std::int64_t begin,
                                  float scale);

double cross_entropy_forward_reference(std::span<float> lse, ConstMatrixView logits,
                                       std::span<const std::int32_t> targets);
void cross_entropy_backward_reference(MatrixView dlogits, ConstMatrixView logits,
                                      std::span<const float> lse,
                                      std::span<const std::int32_t> targets, float dloss = 1.0f);

}  // namespace meshtp
