// Linear layer with bias, PyTorch nn.Linear convention (weight is [out, in]).
//
//   N  rows of the input (tokens: batch·sequence, or one chunk of them)
//   K  input features  (in)
//   M  output features (out)
//
//   forward : y  = x·Wᵀ + b             x: (N,K)  W: (M,K)  b: (M)  y: (N,M)
//   backward: dx += dy·W                dx: (N,K)
//             dW += dyᵀ·x               dW: (M,K)
//             db += Σ_n dy[n,:]         db: (M)
//
// Every argument is a strided view, so a distributed layer calls these on its local shard
// (a block of W's rows or columns) and the chunked-overlap code on a block of x's rows,
// without copies. Both products go through meshtp::gemm, which counts their FLOPs.
//
// The backward is also offered as its two independent halves, because ATP's overlap starts
// the all-reduce of dx while dW is being computed:
//   linear_backward_data   dx += dy·W
//   linear_backward_weight dW += dyᵀ·x,  db += Σ_n dy[n,:]
//
// An empty bias (b.empty()) means "no bias": y = x·Wᵀ and db is not touched; the row-parallel
// layer uses it so that only one rank adds the bias.
#pragma once

#include <span>

#include "tensor/tensor.hpp"

namespace meshtp {

// y = x·Wᵀ + b
void linear_forward(MatrixView y, ConstMatrixView x, ConstMatrixView w, std::span<const float> b);

// dx += dy·W,  dW += dyᵀ·x,  db += Σ_n dy[n,:]
void linear_backward(MatrixView dx, MatrixView dw, std::span<float> db, ConstMatrixView dy,
                     ConstMatrixView x, ConstMatrixView w);

// dx += dy·W
void linear_backward_data(MatrixView dx, ConstMatrixView dy, ConstMatrixView w);

// dW += dyᵀ·x,  db += Σ_n dy[n,:]   (db may be empty: no bias)
void linear_backward_weight(MatrixView dw, std::span<float> db, ConstMatrixView dy,
                            ConstMatrixView x);

// The bias on its own, for layers whose product runs elsewhere (2D GeMM blocks, chunked
// linears): y[n,:] += b for every row (b.size() == y.cols), and db += Σ_n dy[n,:]
// (db.size() == dy.cols). Simulated build, charged mode: their time instead (core/simulation.hpp).
void add_bias(MatrixView y, std::span<const float> b);
void add_bias_grad(std::span<float> db, ConstMatrixView dy);

}  // namespace meshtp
