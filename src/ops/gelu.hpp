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
//
// gelu_forward/backward run the fast kernels (kernels.hpp: ½·(1 + tanh u) computed as
// σ(2u), one exp per element, AVX-512 or AVX2 when the CPU has it); the *_reference twins are the
// naive scalar loops (tanh from vector_math_impl.hpp's exp_approx) the tests hold them to.
#pragma once

#include <span>

#include "tensor/tensor.hpp"

namespace meshtp {

// y = gelu(x)
void gelu_forward(MatrixView y, ConstMatrixView x);

// dx += dy ⊙ gelu'(x)
void gelu_backward(MatrixView dx, ConstMatrixView x, ConstMatrixView dy);

// pre += bias (every row), then y = gelu(pre): a linear layer's bias and the GeLU after it in
// one pass. The backward is gelu_backward on pre, then the bias gradient Σ_n dpre[n, :].
void bias_gelu_forward(MatrixView y, MatrixView pre, std::span<const float> bias);

void gelu_forward_reference(MatrixView y, ConstMatrixView x);
void gelu_backward_reference(MatrixView dx, ConstMatrixView x, ConstMatrixView dy);

}  // namespace meshtp
