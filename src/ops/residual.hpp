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

}  // namespace meshtp
