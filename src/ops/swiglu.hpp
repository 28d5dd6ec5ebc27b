// SwiGLU, the gated activation of Llama's MLP (Shazeer 2020, "GLU Variants", Eq. 6):
// the gate and up projections packed side by side in one (N, 2·F) matrix x = [a | b]:
//
//   N  rows (tokens), F  the MLP width (ffn_hidden, or a rank's share of it)
//
//   forward : y  = silu(a) ⊙ b,   silu(a) = a·σ(a),  σ(a) = 1/(1 + e^(−a))      y: (N, F)
//   backward: da += dy ⊙ b ⊙ silu'(a),   silu'(a) = σ(a)·(1 + a·(1 − σ(a)))
//             db += dy ⊙ silu(a)                                  dx = [da | db]: (N, 2·F)
//
// Packed as [a | b] per rank: a column-parallel gate/up projection gives each rank both
// halves of its own F/tp columns (Megatron-LM's `--swiglu` chunks each rank's fc1 output in
// two the same way). The backward reads x (not y): the forward must not overwrite x.
// Simulated build, charged mode: the bytes each call touches (forward 3 per output element:
// read a, b, write y; backward 7: read a, b, dy, read and write da, db) and no work.
#pragma once

#include "tensor/tensor.hpp"

namespace meshtp {

// y = silu(a) ⊙ b with x = [a | b]
void swiglu_forward(MatrixView y, ConstMatrixView x);

// dx += [dy ⊙ b ⊙ silu'(a) | dy ⊙ silu(a)]
void swiglu_backward(MatrixView dx, ConstMatrixView x, ConstMatrixView dy);

}  // namespace meshtp
