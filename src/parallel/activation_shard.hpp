// Global activations ↔ one rank's chunked block of them: how inputs are handed to the
// tensor-parallel layers and how their outputs are checked or saved.
//
//   global  [n, K] row-major (a [b, s, h] tensor seen as [b·s, h])
//   chunks  c: chunk i is rows [i·nc, (i+1)·nc), nc = n/c (whole sequences)
//   rows of every chunk are split into row_parts blocks; this rank holds block row_index
//   columns are split into col_parts blocks; this rank holds block col_index
//
//   local row (i, r), r < nc/row_parts  ↔  global row i·nc + row_index·nc/row_parts + r
//
// so the local block is chunk-major (chunked.hpp, one piece). The residual stream [R, S(1)]
// on mesh (d1, d2) is {c, 1, 0, d2, c1}; with sequence parallelism on (N, 1) it is
// {c, N, c0, 1, 0}: every chunk's rows split over mesh dim 0, as the all-gather expects.
#pragma once

#include <cstdint>

#include "comm/communicator.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::parallel {

struct ActivationShard {
  int chunks = 1;
  int row_parts = 1;
  int row_index = 0;
  int col_parts = 1;
  int col_index = 0;
};

// Throws unless a [rows, cols] global splits evenly this way.
void check_activation_shard(std::int64_t rows, std::int64_t cols, const ActivationShard& s);

// local ([n/row_parts, K/col_parts]) = this rank's block of global.
void slice_activation(ConstMatrixView global, const ActivationShard& s, MatrixView local);

// The global [rows, cols] tensor from every rank's block: an all_gather over `comm` (every
// rank passes its own shard description). Ranks holding the same block must hold the same
// values; the lowest rank's copy is used. Collective; every rank returns the result.
Tensor gather_activation(const comm::Communicator& comm, ConstMatrixView local,
                         std::int64_t rows, std::int64_t cols, const ActivationShard& s);
// The same into `out` (the global [rows, cols]), for a caller that keeps the buffer. When the
// block is the whole matrix (one row part, one column part: every rank holds all of it, as
// the residual stream on a mesh (N, 1) without sequence parallelism) it is a copy of local,
// with no communication.
void gather_activation_into(const comm::Communicator& comm, ConstMatrixView local,
                            MatrixView out, const ActivationShard& s);

}  // namespace meshtp::parallel
