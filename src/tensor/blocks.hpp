// Equal chunks of a tensor along one dim: the pack / unpack steps around collectives.
//
// A tensor of shape [.., D, ..] seen along dim d is [outer, D, inner] with
// outer = Π shape[:d] and inner = Π shape[d+1:]. Chunk c of n takes rows
// [c·D/n, (c+1)·D/n) of the middle dim: `outer` runs of (D/n)·inner contiguous values.
//
//   pack_chunks   [x0 | x1 | … | xn-1] laid end to end, chunk c contiguous at c·numel/n:
//                 the send layout of reduce_scatter and all_to_all.
//   unpack_chunks the inverse: n contiguous chunks (as all_gather delivers them) → the tensor
//                 whose chunk c along d is the c-th piece.
//
// D must be divisible by n; the error names the dim and both sizes. In the simulated build's
// charged mode large ones move nothing (core/simulation.hpp's skip_values).
#pragma once

#include <span>

#include "tensor/tensor.hpp"

namespace meshtp {

// Throws unless tensor dim `dim` (size `size`) splits into `parts` equal chunks.
void check_divisible(const Shape& shape, int dim, int parts);

Tensor chunk(const Tensor& t, int dim, int parts, int index);
void pack_chunks(const Tensor& t, int dim, int parts, std::span<float> out);
Tensor unpack_chunks(std::span<const float> in, const Shape& chunk_shape, int dim, int parts);

// Writes `part` as chunk `index` of `parts` along `dim` of `whole` (the inverse of chunk()).
void write_chunk(Tensor& whole, int dim, int parts, int index, const Tensor& part);

}  // namespace meshtp
