// The residual stream of a block stack (model::Stack) between the global
// [b, s, h] (or [b·s, h]) tensor every rank passes and this rank's chunked local block
// (placements: parallel/activation_shard.hpp).
#pragma once

#include <cstdint>

#include "layout/model_shape.hpp"
#include "parallel/activation_shard.hpp"
#include "parallel/chunked.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::model {

struct StreamGeometry {
  layout::ModelShape shape;  // batch, seq, hidden of the [b, s, h] stream
  parallel::ActivationShard shard;
  parallel::ChunkedLayout layout;
};

// local = this rank's block of `global`; throws naming the shape if it is not [b, s, h].
void scatter_stream(const StreamGeometry& g, const mesh::DeviceMesh& mesh, const Tensor& global,
                    Tensor& local);
// The global [b, s, h] tensor from every rank's block. Collective over the mesh.
Tensor gather_stream(const StreamGeometry& g, const mesh::DeviceMesh& mesh, const Tensor& local);

}  // namespace meshtp::model
