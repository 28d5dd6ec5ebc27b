// Residual connection, elementwise over any 2D view.
//
//   N  rows, C  columns
//
//   forward : y   = a + b                a, b, y: (N,C)
//   backward: da += dy,   db += dy
//
// y may alias a or b (x = x + f(x) in place is the usual call).
#pragma once

#include "tensor/tensor.hpp"

namespace meshtp {

// y = a + b
void residual_forward(MatrixView y, ConstMatrixView a, ConstMatrixView b);

// da += dy,  db += dy
void residual_backward(MatrixView da, MatrixView db, ConstMatrixView dy);

// d = dy: the residual's backward when the branch's input gradient starts here (a block's
// x_mid and x: dy is handed on and the branch's backward adds to it). One read and one write
// per element (op_costs kResidualBackwardTouches).
void residual_backward_copy(MatrixView d, ConstMatrixView dy);

// acc += x: one input's half of residual_backward, for a sum whose other input needs no
// gradient here (e.g. the position embedding's gradient, summed over the batch).
void residual_accumulate(MatrixView acc, ConstMatrixView x);

// The naive loop the fast (kernels.hpp) residual_forward is tested against.
void residual_forward_reference(MatrixView y, ConstMatrixView a, ConstMatrixView b);

}  // namespace meshtp
