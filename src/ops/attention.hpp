// Causal multi-head self-attention core (no projections: those are linear layers).
//
//   B   batch (or one chunk of it)
//   T   sequence length
//   NH  heads present in this qkv: all of them serially, or a rank's share of them
//   HD  head dim (C/NH of the full model; stays the same when heads are sharded)
//   C'  = NH·HD, the width of q, k, v and of the output here
//
//   qkv: (B·T, 3·C')  row (b,t) = [ q | k | v ], each C' = NH heads of HD contiguous values:
//        q of head h is columns [h·HD, (h+1)·HD), k is C' further, v 2·C' further.
//   out: (B·T, C')    out[(b,t), h·HD + d]  — heads contiguous, as the projection expects.
//   att: (B, NH, T, T) the softmax probabilities, saved by the forward for the backward.
//
// For every (b, h), with Q, K, V the T×HD strided views of head h of batch b:
//   forward : S = scale · Q·Kᵀ                    scale = 1/√HD
//             P = softmax_row(S with S[t,j] = −∞ for j > t)   → att[b,h]   (P[t,j] = 0, j > t)
//             O = P·V                             → out
//   backward: dP  = dO·Vᵀ                         (T×T scratch)
//             dV += Pᵀ·dO
//             dS  = P ⊙ (dP − rowsum(dP ⊙ P))      (softmax backward; 0 where masked)
//             dQ += scale · dS·K
//             dK += scale · dSᵀ·Q
//
// The four products run as meshtp::gemm on strided views of qkv (leading dim 3·C'), so no
// head is copied. They are the full T×T products: the causal half is computed and then
// masked, which keeps the FLOP count equal to the 12·b·s²·h term of SPEC §2.
// The softmax's exp is vector_math_impl.hpp's exp_approx (within 1.2e-7 relative of exp).
#pragma once

#include <cstdint>
#include <span>

#include "tensor/tensor.hpp"

namespace meshtp {

// Number of floats of att the forward writes: B·NH·T·T.
std::int64_t attention_att_size(std::int64_t B, std::int64_t T, std::int64_t NH);
// Number of floats of scratch the backward needs: T·T (one head at a time).
std::int64_t attention_scratch_size(std::int64_t T);

// out = softmax(mask(scale·Q·Kᵀ))·V per (b, h); saves the probabilities in att.
void attention_forward(MatrixView out, std::span<float> att, ConstMatrixView qkv, std::int64_t B,
                       std::int64_t T, std::int64_t NH);

// dqkv += ∂L/∂qkv given dout; att from the forward; scratch ≥ attention_scratch_size(T).
void attention_backward(MatrixView dqkv, std::span<float> scratch, ConstMatrixView dout,
                        ConstMatrixView qkv, std::span<const float> att, std::int64_t B,
                        std::int64_t T, std::int64_t NH);

}  // namespace meshtp
