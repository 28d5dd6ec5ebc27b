// What a block stack (model/stack.hpp) needs of a block, and the blocks of a stack.
//
// StackBlock is the one block interface: the ATP block (model/block.hpp: ATP, Megatron, 1D,
// chunks, sequence parallelism) and the 2D-GeMM block (model/gemm2d_block.hpp: Cannon, SUMMA,
// Collective, Wang, MeshSlice) differ only in how their linears and the residual stream are
// sharded; the stack composes either the same way. A block says how each of its kBlockParams
// parameters is sharded (param_shard), holds spans into the stack's storage (bind), and maps
// the stream y = block(x) forward and dx ← dy backward in the layout it names.
//
// LayerBlocks holds one block per layer — or, under full activation recomputation, ONE block
// object per kind of layer serving every layer of that kind: a block's saved activations are
// its members, so L blocks keep L sets and one block keeps one. Each layer's parameter and
// gradient spans are recorded, and at(i) binds layer i's into its kind's block (a few span
// assignments). The kinds: a mixture of experts with moe_every > 1 interleaves MoE layers
// (kind 1) with dense ones (kind 0); every other stack has one kind.
//
//   full recomputation (Chen et al. 2016; Korthikanti et al. 2022 §4), per step:
//     forward   for i in 0 … L−1: at(i).forward(x_{i+1}, x_i)       activations overwritten
//     backward  for i in L−1 … 0: at(i).forward(x_{i+1}, x_i)       the same code on the same
//                                 at(i).backward(dx_i, dx_{i+1})    inputs: bit-identical
//   memory: the L+1 streams x_i plus ONE block's activations, for L−1 extra block forwards.
// The recomputed forward writes x_{i+1} again with the values it already holds (block i+1's
// backward, its only other reader, is done).
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "device/backend.hpp"
#include "layout/model_shape.hpp"
#include "layout/plan.hpp"
#include "mesh/device_mesh.hpp"
#include "model/params.hpp"
#include "parallel/activation_shard.hpp"
#include "parallel/chunked.hpp"

namespace meshtp::model {

// What a block runs, for both kinds: the model's shape (batch: the sequences this block sees,
// a replica's or a microbatch's; layers: the whole model's, for names and init; vocab unused)
// and the layout. The layout's strategy picks the block (model::Stack): ATP blocks for atp,
// megatron and tp1d (chunks, sequence_parallel), 2D-GeMM blocks for the five algorithms (the
// per-linear algorithm, stationary operand and slices); recompute and progress_splits apply to
// both. The mesh is the DeviceMesh the block is built on; layout.mesh is not consulted.
//   progress_splits  GeMMs that may overlap a pending collective are cut into this many panels
//                    with an MPI_Test between them, and the attention core polls between
//                    sequences (1: none; non-blocking collectives then advance only inside
//                    other MPI calls and waits)
//   recompute        (Korthikanti et al. 2022 §4) selective keeps no attention probabilities
//                    per block (one set in the workspace, recomputed from the saved qkv right
//                    before the core's backward); full keeps only each block's input, and the
//                    stack reruns the block's forward before its backward. Gradients are
//                    bit-identical.
//   cp_group         context parallelism (layout.cp > 1; ATP blocks): the layout.cp ranks that
//                    share this rank's other coordinates, this rank's zigzag position among
//                    them its rank (parallel/context_parallel.hpp). The block then holds
//                    local_tokens() = b·s/cp rows: per batch chunk of b/chunks sequences,
//                    chunk-major as the layer's (chunk r of every sequence, then chunk
//                    2·cp−1−r; cp_token_of_row). Null when cp is 1. Not owned.
//   fold_group       a mixture of experts under context parallelism: the d1·d2·cp ranks of
//                    the mesh and the cp group together, ordered r_cp·d1·d2 + this rank's
//                    mesh rank (tensor-parallel ranks fastest). The experts fold onto them
//                    (ep·etp = d1·cp, etp fastest: Megatron-Core's MoE parallel folding) and
//                    the load-balancing loss counts their tokens. Unused when cp is 1. Not
//                    owned.
//   backend          where a block on the seam computes and allocates (docs/seam.md); its
//                    parameters, its input and output streams must be that backend's memory
//                    and its mesh's groups must move it. Null: the CPU. Not owned. Both
//                    blocks run on it; the ATP block's context-parallel core and mixture of
//                    experts compute on host memory, so they refuse another backend.
struct BlockConfig {
  layout::ModelShape shape{};
  layout::Plan layout{};
  const comm::Communicator* cp_group = nullptr;
  const comm::Communicator* fold_group = nullptr;
  device::Backend* backend = nullptr;

  // The token rows this rank's block holds: b·s, or its share b·s/cp.
  std::int64_t local_tokens() const { return shape.batch * shape.seq / layout.cp; }
};

// Context parallelism's row order: the global token (sequence·s + position) that local row r
// of rank `cp_rank` holds (chunk-major zigzag within each of the layout's batch chunks).
std::int64_t cp_token_of_row(const BlockConfig& config, int cp_rank, std::int64_t r);

// Buffers a block needs only while it runs; one workspace serves every block of a stack.
class BlockWorkspaceBase {
 public:
  virtual ~BlockWorkspaceBase() = default;
};

class StackBlock {
 public:
  using Shards = std::array<parallel::ParamShard, kBlockParams>;
  // shards[p]: how parameter p (BlockParam order) of a block of this model (its table:
  // model/params.hpp block_param_table) lies on the mesh. expert_mesh: the shape (ep, etp) of
  // the experts' own mesh over the same ranks (parallel::on_expert_mesh kinds), for a
  // mixture-of-experts block; empty otherwise. fold: the ranks the experts fold onto when
  // they are more than the mesh's (context parallelism: BlockConfig::fold_group), null for
  // the mesh's own. Collective over mesh (or fold) when expert_mesh is not empty.
  StackBlock(const mesh::DeviceMesh& mesh, const layout::ModelShape& shape, const Shards& shards,
             const std::vector<int>& expert_mesh = {}, const comm::Communicator* fold = nullptr);
  virtual ~StackBlock() = default;
  StackBlock(const StackBlock&) = delete;
  StackBlock& operator=(const StackBlock&) = delete;

  parallel::ParamShard param_shard(int p) const { return shards_.at(static_cast<std::size_t>(p)); }
  // The mesh parameter p is sharded on: the attention's, or the experts' own.
  const mesh::DeviceMesh& param_mesh(int p) const {
    return parallel::on_expert_mesh(param_shard(p)) ? *expert_mesh_ : *mesh_;
  }
  const Shape& local_shape(int p) const { return local_.at(static_cast<std::size_t>(p)); }
  // The residual stream's local layout and which block of the global [b·s, h] it is.
  virtual parallel::ChunkedLayout stream_layout() const = 0;
  virtual parallel::ActivationShard stream_shard() const = 0;
  // Whether parameter slot k's gradient is a partial sum over mesh dim 0 (sequence
  // parallelism: each rank saw its own tokens — the LayerNorms', and a MoE layer's router and
  // output bias); the stack all-reduces them once per backward.
  virtual bool partial_grad(int k) const { (void)k; return false; }
  // Whether parameter slot k holds copies of some global elements on several ranks (a
  // grouped-query QKV weight with fewer KV heads than head blocks: parallel/param_shard.hpp),
  // each copy's gradient only its own query heads' share: the stack sums the copies after
  // the block's backward, so every copy holds the whole gradient.
  virtual bool replica_grad(int k) const { (void)k; return false; }
  // The weight ∂L/∂aux a mixture-of-experts block's backward gives its load-balancing loss
  // (the training loss's scale); dense blocks ignore it.
  void set_aux_weight(double weight) { aux_weight_ = weight; }
  virtual std::unique_ptr<BlockWorkspaceBase> make_workspace() const = 0;

  // Parameter and gradient storage, kBlockParams spans each in BlockParam order, sized as
  // local_shape(p); throws naming the parameter otherwise.
  void bind(std::span<const std::span<float>> values, std::span<const std::span<float>> grads);
  // The bound parameters' values were written in place (an optimizer step, an init, a load):
  // the bf16 compute copies are made again before the block next runs.
  void parameters_changed() { copies_stale_ = true; }

  // y = block(x)   x, y: stream_layout(); y must not alias x; x untouched until backward.
  virtual void forward(const parallel::ChunkedMatrix& y, const parallel::ChunkedMatrix& x,
                       BlockWorkspaceBase& ws) = 0;
  // dx = ∂L/∂x given dy = ∂L/∂y (dx may alias dy); parameter gradients +=.
  virtual void backward(const parallel::ChunkedMatrix& dx, const parallel::ChunkedMatrix& dy,
                        BlockWorkspaceBase& ws) = 0;

 protected:
  virtual void bound() {}  // after bind: hand the spans on (ATP's linears keep their own)

  // bf16 compute copies of the GeMM weights (Megatron-LM's bf16 weights beside the fp32
  // masters its optimizer updates): a block that stores its GeMM operands in bf16 keeps, for
  // each parameter in `params`, a bf16 array of its backend rounded from the fp32 value once
  // after each bind or parameters_changed() — not in every GeMM that reads it (the GPU
  // rounded a weight into scratch per call: 6 bytes a parameter, a third of a 2048-token
  // forward GeMM's time on an H100). A GeMM multiplies the rounded weight either way, so the
  // step is the same bit for bit. Not under ZeRO-3, which keeps a block's weights whole only
  // while it runs (a copy per block would outlive them).
  void keep_compute_copies(std::span<const int> params, device::Backend& backend);
  // Parameter p as the GeMMs read it, [rows, cols] of local_shape(p): its bf16 copy, or the
  // fp32 value where it has none.
  View gemm_weight(int p) const;
  // Rounds the values into the copies if they changed since (forward and backward call it
  // first: a backward may follow a rebind with no forward, ZeRO-3's).
  void refresh_compute_copies();

  const mesh::DeviceMesh* mesh_;
  std::unique_ptr<mesh::DeviceMesh> expert_mesh_;  // (ep, etp) over mesh_'s (or fold's) ranks, or null
  std::array<std::span<float>, kBlockParams> p_{}, g_{};
  double aux_weight_ = 0.0;

 private:
  Shards shards_;
  std::array<Shape, kBlockParams> local_;
  device::Backend* copies_backend_ = nullptr;
  std::array<device::Array, kBlockParams> copies_{};
  bool copies_stale_ = true;
};

class LayerBlocks {
 public:
  using Spans = std::vector<std::span<float>>;
  // kinds[i]: layer i's kind (0 or 1); make(kind) builds one block of a kind, once per layer,
  // or under full recomputation once per kind present.
  LayerBlocks(std::vector<int> kinds, layout::Recompute recompute,
              const std::function<std::unique_ptr<StackBlock>(int kind)>& make)
      : full_(recompute == layout::Recompute::kFull), kinds_(std::move(kinds)) {
    for (std::size_t l = 0; l < kinds_.size(); ++l) {
      const int k = kinds_[l];
      if (!full_) {
        blocks_.push_back(make(k));
      } else if (of_kind_[static_cast<std::size_t>(k)] < 0) {
        of_kind_[static_cast<std::size_t>(k)] = static_cast<int>(blocks_.size());
        blocks_.push_back(make(k));
      }
    }
    values_.resize(kinds_.size());
    grads_.resize(kinds_.size());
  }
  void bind(int layer, Spans values, Spans grads) {
    const auto u = static_cast<std::size_t>(layer);
    values_[u] = std::move(values);
    grads_[u] = std::move(grads);
    if (!full_) blocks_[u]->bind(values_[u], grads_[u]);
  }
  bool full() const { return full_; }
  // Every block object (one under full recomputation).
  template <class F> void for_each(F&& f) {
    for (auto& b : blocks_) f(*b);
  }
  const StackBlock& front() const { return *blocks_.front(); }
  int kind(int layer) const { return kinds_.at(static_cast<std::size_t>(layer)); }
  // The block object that runs layer i (its kind's under full recomputation), unbound: for
  // what a block says of its parameters (shards, shapes) and its workspace.
  const StackBlock& of_layer(int layer) const { return *blocks_[index(layer)]; }
  // Layer i's block, its parameters bound.
  StackBlock& at(int layer) {
    const auto u = static_cast<std::size_t>(layer);
    StackBlock& b = *blocks_[index(layer)];
    if (full_) b.bind(values_[u], grads_[u]);
    return b;
  }

 private:
  std::size_t index(int layer) const {
    const auto u = static_cast<std::size_t>(layer);
    return full_ ? static_cast<std::size_t>(of_kind_[static_cast<std::size_t>(kinds_.at(u))]) : u;
  }
  bool full_;
  std::vector<int> kinds_;
  std::array<int, 2> of_kind_{-1, -1};  // full recomputation: each kind's block
  std::vector<std::unique_ptr<StackBlock>> blocks_;
  std::vector<Spans> values_, grads_;
};

}  // namespace meshtp::model
