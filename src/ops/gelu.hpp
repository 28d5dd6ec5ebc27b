// GeLU, tanh approximation (GPT-2; PyTorch nn.GELU(approximate='tanh')), elementwise.
//
//   N  rows, D  columns (any 2D view of the activations, e.g. (B·T, 4C))
//
//   forward : y  = ½·x·(1 + tanh(u)),   u = √(2/π)·(x + 0.044715·x³)
//   backward: dx += dy · gelu'(x)
//             gelu'(x) = ½·(1 + tanh(u)) + ½·x·(1 − tanh²(u))·√(2/π)·(1 + 3·0.044715·x²)
//
// The backward needs the forward's input x (not y), so the forward must not overwrite x
// when the caller trains; y and x may alias otherwise (each element is read before written).
// tanh is computed from vector_math_impl.hpp's exp_approx (absolute error ≤ 2.5e-7).
#pragma once

#include "tensor/tensor.hpp"

namespace meshtp {

// y = gelu(x)
void gelu_forward(MatrixView y, ConstMatrixView x);

// dx += dy ⊙ gelu'(x)
void gelu_backward(MatrixView dx, ConstMatrixView x, ConstMatrixView dy);

}  // namespace meshtp
