// A stack of L GPT blocks under 2D-GeMM tensor parallelism (model/gemm2d_block.hpp) on a
// mesh (Nr, Nc), with its parameters, activations and gradients. The public interface
// mirrors model::Stack's so a training loop (model::Gpt) switches with little code:
//
//   Gemm2dStack stack(mesh, {.block = {.batch = b, .seq = s, .hidden = h, .heads = a,
//                                      .algo = Algorithm::kMeshSlice, .slices = 2},
//                            .layers = L});
//   stack.init(seed) / stack.load(file); stack.set_input(x); stack.forward();
//   stack.set_grad_output(dy); stack.zero_grads(); stack.backward();
//
// The residual stream is [Shard(0), Shard(1)]: rank (c0, c1) holds rows
// [c0·n/Nr, (c0+1)·n/Nr) × columns [c1·h/Nc, (c1+1)·h/Nc) of the global [b·s, h]
// (stream_shard() = {chunks 1, row_parts Nr, row_index c0, col_parts Nc, col_index c1}).
// Parameters use the same names, global shapes and init as model::Stack (params.hpp); only
// their shard kinds differ (gemm2d_param_shard), so checkpoints move between layouts.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mesh/device_mesh.hpp"
#include "model/stream_io.hpp"
#include "model/gemm2d_block.hpp"
#include "model/layer_blocks.hpp"
#include "model/params.hpp"
#include "parallel/activation_shard.hpp"
#include "parallel/chunked.hpp"
#include "tensor/safetensors.hpp"

namespace meshtp::model {

struct Gemm2dStackConfig {
  Gemm2dBlockConfig block;
  int layers = 1;
  // A pipeline stage's share of a deeper model: its blocks are the model's first_layer …
  // first_layer+layers−1 (names and init as in the whole model of model_layers; 0: layers).
  int first_layer = 0;
  int model_layers = 0;
  int init_layers() const { return model_layers > 0 ? model_layers : layers; }
};

class Gemm2dStack {
 public:
  // Validates (same verdict on every rank), then allocates everything.
  Gemm2dStack(const mesh::DeviceMesh& mesh, const Gemm2dStackConfig& config);
  Gemm2dStack(const Gemm2dStack&) = delete;
  Gemm2dStack& operator=(const Gemm2dStack&) = delete;
  ~Gemm2dStack();

  const Gemm2dStackConfig& config() const { return config_; }
  const mesh::DeviceMesh& mesh() const { return *mesh_; }
  const Gemm2dBlockPlans& plans() const { return blocks_.front().plans(); }

  // ---- parameters (local shards, table order) ----------------------------------------
  const std::vector<ParamEntry>& param_table() const { return table_; }
  int num_params() const { return static_cast<int>(table_.size()); }
  Tensor& value(int p) { return values_.at(static_cast<std::size_t>(p)); }
  Tensor& grad(int p) { return grads_.at(static_cast<std::size_t>(p)); }
  const Tensor& value(int p) const { return values_.at(static_cast<std::size_t>(p)); }
  const Tensor& grad(int p) const { return grads_.at(static_cast<std::size_t>(p)); }
  int replicas(int p) const;
  bool decays(int p) const { return table_.at(static_cast<std::size_t>(p)).shape.size() == 2; }
  void zero_grads();

  void init(std::uint64_t seed);
  void load(const SafetensorsFile& file);
  std::map<std::string, Tensor> gather_values() const;  // collective
  std::map<std::string, Tensor> gather_grads() const;   // collective

  // ---- activations ([nl, hl] local blocks) ----------------------------------------------
  parallel::ChunkedLayout stream_layout() const;
  parallel::ActivationShard stream_shard() const;
  parallel::ChunkedMatrix input();
  parallel::ChunkedMatrix output();
  parallel::ChunkedMatrix grad_output();
  parallel::ChunkedMatrix grad_input();

  void set_input(const Tensor& global);
  void set_grad_output(const Tensor& global);
  Tensor gather_output() const;      // global [b, s, h], collective
  Tensor gather_grad_input() const;  // global [b, s, h], collective

  void forward();
  // Parameter gradients +=; on_layer_done(i) runs once block i's gradients are final.
  void backward(const std::function<void(int layer)>& on_layer_done = {});

  // ZeRO-3: as Stack::set_before_layer and Stack::rebind.
  void set_before_layer(std::function<void(int layer, bool backward)> hook) {
    before_layer_ = std::move(hook);
  }
  void rebind(int layer);

 private:
  StreamGeometry stream_geometry() const;
  void forward_layer(int i);
  std::function<void(int layer, bool backward)> before_layer_;

  const mesh::DeviceMesh* mesh_;
  Gemm2dStackConfig config_;
  LayerBlocks<Gemm2dBlock> blocks_;
  std::vector<ParamEntry> table_;
  std::vector<Tensor> values_, grads_;
  std::unique_ptr<Gemm2dBlockWorkspace> workspace_;
  std::vector<Tensor> streams_;  // x_0 … x_L
  Tensor dstream_[2];
};

}  // namespace meshtp::model
