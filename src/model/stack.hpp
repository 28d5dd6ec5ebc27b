// A stack of L GPT blocks on one mesh, with its parameters, activations and gradients: what
// a training loop builds. One composition for every strategy: the blocks are ATP blocks
// (model/block.hpp: atp, megatron, tp1d; chunks, sequence parallelism) or 2D-GeMM blocks
// (model/gemm2d_block.hpp: every linear a Cannon, SUMMA, Collective, Wang or MeshSlice GeMM),
// behind one interface (model/layer_blocks.hpp); model::make_stack picks them from a plan.
//
//   Stack stack(mesh, StackConfig{.block = {.shape = {.batch = b, .seq = s, .hidden = h,
//                                                     .heads = a, .layers = L},
//                                           .layout = {.chunks = c}}});
//   Stack stack(mesh, StackConfig{.block = {.shape = …,
//                                           .layout = {.strategy = Strategy::kMeshSlice}}});
//   stack.init(seed);                          // or stack.load(load_safetensors(path))
//   stack.set_input(x);                        // global [b, s, h] (or [b·s, h]), every rank
//   stack.forward();                           // stack.output(): this rank's block of y
//   stack.set_grad_output(dy);                 // or write stack.grad_output() directly
//   stack.zero_grads(); stack.backward();      // stack.grad_input(): this rank's block of dx
//   for (int p = 0; p < stack.num_params(); ++p)  // local shards, e.g. for train::AdamW:
//     refs.push_back({name, &stack.value(p), &stack.grad(p), stack.decays(p),
//                     stack.replicas(p)});        //   replicas get identical gradients
//   stack.save(path);                          // global tensors, any mesh can load them
//
// Activations between blocks are the residual stream in the block's stream layout
// ([R, S(1)] on mesh (d1, d2), token rows under sequence parallelism, [S(0), S(1)] for the
// 2D GeMMs); stream_shard() says which block of the global [b·s, h] this rank holds. The L+1
// streams are kept (each block's input is saved for its backward); one BlockWorkspace serves every
// block.
//
// Parameters are one array per local shard (values, and grads alike) in the blocks' backend's
// memory (BlockConfig::backend, the CPU's when null: docs/seam.md), as are the streams and
// every buffer; they are named, shaped and initialised alike under every strategy (params.hpp;
// only their shard kinds differ), so checkpoints move between layouts. What the host computes
// once (init, load, gathering, the global tensors in and out) it computes on a host copy
// (device::edit_on_host); a forward and backward run on the backend alone. Under sequence
// parallelism the LayerNorm gradients are partial sums over mesh dim 0 (each rank saw its own
// tokens), so backward accumulates them in one separate buffer and all-reduces it once at the
// end, before adding into grads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mesh/device_mesh.hpp"
#include "model/stream_io.hpp"
#include "model/block.hpp"
#include "model/gemm2d_block.hpp"
#include "model/layer_blocks.hpp"
#include "model/params.hpp"
#include "tensor/safetensors.hpp"

namespace meshtp::model {

// The blocks of one config (model/layer_blocks.hpp): ATP blocks or 2D-GeMM blocks, as
// block.layout.strategy says. A pipeline stage holds a share of a deeper model: its blocks
// are the model's first_layer … first_layer+layers−1 of block.shape.layers (names and init
// as in the whole model); layers 0: all of them.
struct StackConfig {
  BlockConfig block{};
  int first_layer = 0;
  int layers = 0;
  int stack_layers() const { return layers > 0 ? layers : static_cast<int>(block.shape.layers); }
};

// Throws meshtp::Error naming the value unless the stack runs on a mesh of this shape.
void validate(const StackConfig& config, const std::vector<int>& mesh_shape);

class Stack {
 public:
  // Validates (same verdict on every rank), then allocates everything. Collective only in
  // the sense that every rank of the mesh must build the same stack.
  Stack(const mesh::DeviceMesh& mesh, const StackConfig& config);
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  ~Stack();

  const mesh::DeviceMesh& mesh() const { return *mesh_; }
  const StackBlock& block() const { return blocks_.front(); }
  // Where the parameters, streams and buffers live and every op runs.
  device::Backend& backend() const { return *backend_; }

  // ---- parameters (local shards, table order) ----------------------------------------
  const std::vector<ParamEntry>& param_table() const { return table_; }
  int num_params() const { return static_cast<int>(table_.size()); }
  // fp32 arrays of backend(), local_shape(p) elements (a gradient may be swapped for an
  // empty array or another of that size: ZeRO, below).
  device::Array& value(int p) { return values_.at(static_cast<std::size_t>(p)); }
  device::Array& grad(int p) { return grads_.at(static_cast<std::size_t>(p)); }
  const device::Array& value(int p) const { return values_.at(static_cast<std::size_t>(p)); }
  const device::Array& grad(int p) const { return grads_.at(static_cast<std::size_t>(p)); }
  const Shape& local_shape(int p) const { return local_shapes_.at(static_cast<std::size_t>(p)); }
  // Ranks holding a copy of each element of parameter p (its replicated mesh dims' sizes).
  int replicas(int p) const;
  // The mesh parameter p is sharded on (StackBlock::param_mesh): the attention's, or the
  // experts' own for a mixture of experts' weights.
  const mesh::DeviceMesh& param_mesh(int p) const;
  // Whether parameter p lies on the experts' own mesh (a mixture of experts' expert weights).
  bool on_expert_mesh(int p) const {
    return parallel::on_expert_mesh(table_.at(static_cast<std::size_t>(p)).shard);
  }
  // The block of parameter p's layer (its kind's: model/layer_blocks.hpp).
  const StackBlock& param_block(int p) const {
    return blocks_.of_layer(layer_.at(static_cast<std::size_t>(p)));
  }
  // The first layer of a kind (model/layer_blocks.hpp), which exists.
  int first_of_kind(int kind) const;
  // The layer after whose backward parameter p's gradient is final (backward's
  // on_layer_done argument), or -1: only once backward returns (sequence parallelism's
  // LayerNorm partials).
  int grad_layer(int p) const;
  // Each local element's share of the global gradient norm where parameter p holds copies of
  // some elements (StackBlock::replica_grad: 1/copies on the mesh, one tensor for every
  // layer), else null (every element counts 1/replicas(p)).
  const Tensor* norm_weight(int p) const;
  // Weight decay applies to the matrices only (not LayerNorm parameters, not biases): every
  // tensor of 2 or more dims (the experts' weights are [E, ·, ·]).
  bool decays(int p) const { return table_.at(static_cast<std::size_t>(p)).shape.size() >= 2; }
  void zero_grads();

  // GPT-2 init (params.hpp), identical global weights on every mesh.
  void init(std::uint64_t seed);
  // Every parameter from a file of global tensors (names and shapes as in the table).
  // Throws "missing tensor 'layers.1.mlp.fc2.bias' in W.safetensors (it has: …)" or a shape
  // mismatch before touching anything; every rank reads the same file, so every rank agrees.
  void load(const SafetensorsFile& file);
  // Global tensors by name; collective over the mesh.
  std::map<std::string, Tensor> gather_values() const;
  std::map<std::string, Tensor> gather_grads() const;
  // Rank 0 writes the global weights (atomically) with hidden/heads/layers metadata; every
  // rank returns once the file is there, or throws if rank 0 failed. Collective.
  void save(const std::string& path) const;

  // ---- activations ---------------------------------------------------------------------
  parallel::ChunkedLayout stream_layout() const;
  parallel::ActivationShard stream_shard() const;
  parallel::ChunkedMatrix input();        // x: fill before forward
  parallel::ChunkedMatrix output();       // y: valid after forward
  parallel::ChunkedMatrix grad_output();  // dy: fill before backward
  parallel::ChunkedMatrix grad_input();   // dx: valid after backward

  // This rank's block of a global [b, s, h] or [b·s, h] tensor (every rank passes the same).
  void set_input(const Tensor& global);
  void set_grad_output(const Tensor& global);
  // The global [b, s, h] tensors, assembled on every rank (collective).
  Tensor gather_output() const;
  Tensor gather_grad_input() const;

  void forward();
  // Parameter gradients +=. on_layer_done(i) runs right after block i's backward, when its
  // gradients are final — except LayerNorm parameters under sequence parallelism, which are
  // completed after the last block — so a data-parallel all-reduce of block i can start
  // while blocks i−1 … 0 compute.
  void backward(const std::function<void(int layer)>& on_layer_done = {});

  // ZeRO-3 (train/zero.hpp): before_layer(i, backward) runs right before block i's parameters
  // are read — its forward, and its backward (with any recomputation); a caller that swapped
  // value(p) of block i for another tensor calls rebind(i) before the block runs again.
  void set_before_layer(std::function<void(int layer, bool backward)> hook) {
    before_layer_ = std::move(hook);
  }
  void rebind(int layer);
  // The values were written in place: every block's bf16 compute copies are made again
  // before it next runs (StackBlock::parameters_changed). init and load say so themselves.
  void parameters_changed();

  // Mixture of experts: the weight ∂L/∂aux the blocks' backward gives their load-balancing
  // losses (the training loss's scale, e.g. 1/(dp·microbatches)); the losses themselves enter
  // only through the gradients (the reported loss is the language model's).
  void set_aux_weight(double weight) {
    blocks_.for_each([&](StackBlock& b) { b.set_aux_weight(weight); });
  }

 private:
  StreamGeometry stream_geometry() const;
  // The global tensors of `local` (parameter shards, table order); a global stream's block
  // into a stream array, and back.
  std::map<std::string, Tensor> gather(const std::vector<device::Array>& local) const;
  void scatter_into(const Tensor& global, device::Array& local);
  Tensor gather_from(const device::Array& local) const;
  void forward_layer(int i);
  std::function<void(int layer, bool backward)> before_layer_;

  const mesh::DeviceMesh* mesh_;
  StackConfig config_;
  int layers_;  // blocks in this stack
  device::Backend* backend_;  // config_.block.backend, or the CPU's
  std::vector<ParamEntry> table_;
  std::vector<int> slot_, layer_;  // parameter p: BlockParam slot, block of this stack
  device::Array alloc(std::int64_t count) const;  // fp32, of backend_
  // Replicated KV heads (StackBlock::replica_grad): the running layer's partial gradient (in
  // the backend), the global sum and 1/copies per local element (on the host).
  device::Array replica_part_;
  Tensor replica_sum_, replica_norm_weight_;
  void sum_replicas(int layer);
  std::vector<device::Array> values_, grads_;
  std::vector<Shape> local_shapes_;
  // Sequence parallelism: the gradients that are partial sums over mesh dim 0 (StackBlock::
  // partial_grad: LayerNorms, a MoE block's router and bias), parameter p at ln_offset_[p].
  device::Array ln_partial_;
  std::vector<std::int64_t> ln_offset_;
  LayerBlocks blocks_;
  std::unique_ptr<BlockWorkspaceBase> workspace_;
  std::vector<device::Array> streams_;  // x_0 … x_L
  device::Array dstream_[2];
};

}  // namespace meshtp::model
