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
// The products run as meshtp::gemm on strided views of qkv (leading dim 3·C'), so no head is
// copied, and skip what the causal mask zeroes: query rows go in blocks [r0, r1) of 64 (one
// block when T < 128), and block r needs keys [0, r1) only —
//   S[r0:r1, 0:r1] = scale·Q[r0:r1]·K[0:r1]ᵀ      O[r0:r1]  = P[r0:r1, 0:r1]·V[0:r1]
//   dP[r0:r1, 0:r1] = dO[r0:r1]·V[0:r1]ᵀ          dV[0:r1] += P[r0:r1, 0:r1]ᵀ·dO[r0:r1]
//   dQ[r0:r1] += scale·dS·K[0:r1]                 dK[0:r1] += scale·dSᵀ·Q[r0:r1]
// so the products cost Σ_r (r1−r0)·r1 instead of T² per head: (T² + 64·T)/2 for T a multiple
// of 64, e.g. 56% of T² at T = 512, 75% at T = 128. att still holds the whole T×T matrix
// (zeros above the diagonal). FLOP rates elsewhere keep counting the full 12·b·s²·h.
// The softmax rows are the fast kernels' (kernels.hpp: exp within 1.2e-7 relative).
// attention_{forward,backward}_reference are the full-product, scalar-softmax originals.
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

void attention_forward_reference(MatrixView out, std::span<float> att, ConstMatrixView qkv,
                                 std::int64_t B, std::int64_t T, std::int64_t NH);
void attention_backward_reference(MatrixView dqkv, std::span<float> scratch, ConstMatrixView dout,
                                  ConstMatrixView qkv, std::span<const float> att, std::int64_t B,
                                  std::int64_t T, std::int64_t NH);

}  // namespace meshtp
