// What the seam tests of the model share (block_seam_test, gpt_seam_test, and the GPU's
// gpu_seam_test): every mesh of the world with a device mesh over the inverted stand-in, and
// the Llama family's fields on a shape.
#pragma once

#include <cstdint>
#include <vector>

#include "../parallel/mesh2d.hpp"
#include "comm/communicator.hpp"
#include "inverted_device.hpp"
#include "layout/model_shape.hpp"
#include "mesh/device_mesh.hpp"

namespace meshtp::testing {

// f(shape, host mesh, device mesh, stand-in) for every mesh of this world size: the device
// mesh over host-staged groups of the stand-in's memory. Returns the cases f says it ran.
template <class F>
int on_every_mesh(F&& f) {
  const auto world = comm::Communicator::world();
  InvertedBackend stand_in;
  const auto staged = comm::Communicator::host_staged(world, stand_in.memory);
  int ran = 0;
  for (const auto& shape : parallel::meshes2d(world.size())) {
    const mesh::DeviceMesh host_mesh(world, shape), device_mesh(staged, shape);
    ran += f(shape, host_mesh, device_mesh, stand_in);
  }
  return ran;
}

// `shape` as a Llama-family model (layout/model_shape.hpp): grouped-query attention with
// kv_heads KV heads, a SwiGLU MLP of width ffn_hidden, RMSNorm, RoPE and an untied head.
inline layout::ModelShape llama_family(layout::ModelShape shape, std::int64_t kv_heads,
                                       std::int64_t ffn_hidden) {
  shape.kv_heads = kv_heads;
  shape.ffn_hidden = ffn_hidden;
  shape.activation = layout::Activation::kSwiglu;
  shape.norm = layout::Norm::kRmsNorm;
  shape.position = layout::Position::kRope;
  shape.tie_embeddings = false;
  return shape;
}

}  // namespace meshtp::testing
