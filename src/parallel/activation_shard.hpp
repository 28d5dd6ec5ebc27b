// Global activations ↔ one rank's chunked block of them: how inputs are handed to the
// tensor-parallel layers and how their outputs are checked or saved.
//
//   global  [n, K] row-major (a [b, s, h] tensor seen as [b·s, h]), viewed as [c, n/c, K]:
//           c chunks of whole sequences, chunk i = rows [i·nc, (i+1)·nc)
//   spec    one placement per mesh dim (mesh/placement.hpp) of that 3-D view
//
// The local block of the view is [c, nc/row parts, K/col parts] row-major, which is exactly
// the chunk-major layout the layers use (chunked.hpp, one piece). On mesh (d1, d2):
//   ATP residual stream          [R, S(2)]      features over mesh dim 1
//   with sequence parallelism    [S(1), R]      every chunk's rows over mesh dim 0 (N, 1)
//   2D GeMM stream (c = 1)       [S(1), S(2)]   tokens over mesh rows, features over columns
//   heads scattered over d1·d2   [S(2), S(2)]   feature block c0·d2 + c1
// Slicing is local; gathering is mesh::redistribute to [R, R] (an all_gather over each
// sharding mesh dim).
#pragma once

#include <cstdint>

#include "core/view.hpp"
#include "device/backend.hpp"
#include "mesh/device_mesh.hpp"
#include "mesh/placement.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::parallel {

struct ActivationShard {
  int chunks = 1;
  mesh::ShardingSpec spec;  // of the view [chunks, rows/chunks, cols]
};

// On the seam (docs/seam.md): slicing is the backend's copy_blocks; gathering is one all-gather
// of the packed blocks over the group of the mesh dims that shard (dim_comm(d), or the whole
// mesh when both do), each block then copied to its place. The group must move the backend's
// memory. out and global: rows × cols; local: the block, contiguous for a gather.
void slice_activation(device::Backend& backend, const View& global, const ActivationShard& s,
                      const mesh::DeviceMesh& mesh, const View& local);
void gather_activation_into(device::Backend& backend, const mesh::DeviceMesh& mesh,
                            const View& local, const View& out, const ActivationShard& s);

// The host forms: the above on the CPU backend.
// local ([n/row parts, K/col parts]) = this rank's block of global.
void slice_activation(ConstMatrixView global, const ActivationShard& s,
                      const mesh::DeviceMesh& mesh, MatrixView local);

// The global [rows, cols] tensor from every rank's block. Collective over the mesh; every
// rank returns the result. When no mesh dim of size > 1 shards it, a copy of local.
Tensor gather_activation(const mesh::DeviceMesh& mesh, ConstMatrixView local, std::int64_t rows,
                         std::int64_t cols, const ActivationShard& s);
// The same into `out` (the global [rows, cols]), for a caller that keeps the buffer.
void gather_activation_into(const mesh::DeviceMesh& mesh, ConstMatrixView local, MatrixView out,
                            const ActivationShard& s);

}  // namespace meshtp::parallel
