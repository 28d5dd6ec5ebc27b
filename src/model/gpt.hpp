// A GPT language model on one tensor-parallel mesh: token + position embedding, L blocks
// (model/stack.hpp: ATP blocks — any mesh (d1, d2), chunks, sequence parallelism — or 2D-GeMM
// blocks — Cannon, SUMMA, Collective, Wang, MeshSlice),
// a final LayerNorm, an LM head tied to the token embedding, and cross-entropy.
//
//   n = b·s tokens of this data-parallel replica; T = d1·d2 ranks of the TP mesh
//
//   forward:  e[n, h]   = vocab_embedding(tokens) + wpe[position]    all_reduce over T
//             x_0       = e's block in the stream layout              local slice
//             x_L       = stack(x_0)
//             f         = LayerNorm_f(x_L)                            stats over mesh dim 1
//             F[n, h]   = f gathered from the stream                  all_gather over T
//             loss      = CE(F·wteᵀ, targets)                         vocab-parallel
//   backward: the same steps in reverse; the embedding's gradient arrives as the stream's
//             dx, gathered to [n, h] so each rank adds its vocabulary rows.
//
// Parameters: the stack's (model/params.hpp), then
//   wte         [V, h]  rows split over the T ranks (vocab-parallel), V = 256 for bytes
//   wpe         [s, h]  whole on every TP rank (small; its gradient is computed identically)
//   lnf.weight  [h]     like the residual stream's hidden dim (ParamShard::kHidden)
//   lnf.bias    [h]
// The Llama family (layout/model_shape.hpp) on the ATP blocks: position rope has no wpe (the
// blocks rotate q and k), norm rmsnorm makes LayerNorm_f an RMSNorm without lnf.bias, and
// tie_embeddings false gives the last stage its own head lm_head.weight [V, h], vocab-parallel
// as wte (stage 0 keeps wte for the embedding alone).
// Every parameter is created from a seed independent of the mesh, so every layout starts
// from the same global model and computes the same loss.
//
// On the seam (docs/seam.md): the parameters, gradients and activations are arrays of the
// stack's backend (GptConfig::layout's blocks: BlockConfig::backend, set by GptConfig::backend;
// the CPU's when null), and forward and backward run every op through it and every collective
// over the mesh's groups, which must move its memory. Tokens and targets stay on the host
// (the backend's vocabulary ops take host ids); the loss comes back to the host.
//
// Pipeline stages (the plan's pp·virtual_stages = S stages, GptConfig::stage = s): the object
// holds blocks [s·L/S, (s+1)·L/S) under their global names; stage 0 also the embeddings
// (wte, wpe), stage S−1 the final LayerNorm and the head — which reuses wte (tied), so with
// S > 1 two stages hold wte and their gradients must be summed between them (the trainer
// does). A stage after the first takes its input stream from `in` (this rank's block of the
// residual stream, stream_floats() floats), one before the last hands its output to `out`;
// backward the same with the gradients (dout, din).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "layout/plan.hpp"
#include "mesh/device_mesh.hpp"
#include "model/stack.hpp"
#include "parallel/vocab_parallel.hpp"
#include "tensor/safetensors.hpp"

namespace meshtp::model {

// meshtp trains byte-level models: 256 token ids.
inline constexpr std::int64_t kByteVocab = 256;

struct GptConfig {
  // batch: sequences per data-parallel replica; seq: the position table's length; vocab: the
  // real vocabulary (padded internally to a multiple of T).
  layout::ModelShape shape{
      .batch = 1, .seq = 64, .hidden = 64, .heads = 4, .layers = 2, .vocab = kByteVocab};
  // The layout this model runs (layout/plan.hpp): its mesh is the TP mesh, its strategy picks
  // the block stack — ATP blocks (atp, megatron, tp1d: chunks, sequence parallelism) or every
  // linear a 2D GeMM (MeshSlice §2.3) with the plan's per-linear algorithm, stationary
  // operand and slices. dp is the trainer's.
  layout::Plan layout{};
  int stage = 0;            // which of the plan's pp·virtual_stages pipeline stages
  // Context parallelism (layout.cp > 1): the cp ranks sharing this rank's other coordinates
  // (BlockConfig::cp_group); not owned. The model then runs this rank's zigzag share of every
  // sequence (Megatron-Core's get_batch_on_this_cp_rank): forward still takes the replica's
  // whole b·s tokens and picks rows cp_token_of_row of them; the loss is the mean over those
  // b·s/cp tokens (the trainer averages it over cp as over dp).
  const comm::Communicator* cp_group = nullptr;
  // A mixture of experts under context parallelism: the stage's tensor-parallel × context-
  // parallel ranks the experts fold onto (BlockConfig::fold_group); not owned.
  const comm::Communicator* fold_group = nullptr;
  // Where the model's arrays live and its ops run (BlockConfig::backend); null: the CPU.
  device::Backend* backend = nullptr;
};

// Pipeline stages of a plan (pp·virtual_stages) and the blocks of one of them.
int pipeline_stages(const layout::Plan& plan);
int stage_layers(const GptConfig& config);

// Throws meshtp::Error naming the value unless `config` runs on a TP mesh of this shape: the
// plan's mesh must be it, its pipeline stages must divide the layers.
void validate(const GptConfig& config, const std::vector<int>& tp_mesh_shape);

// The block stack of this config's pipeline stage (vocab unused): ATP blocks or 2D GeMM
// blocks per config.layout.strategy. Validates first (same verdict on every rank).
StackConfig stack_config(const GptConfig& config);
std::unique_ptr<Stack> make_stack(const mesh::DeviceMesh& tp_mesh, const GptConfig& config);

class Gpt {
 public:
  Gpt(const mesh::DeviceMesh& tp_mesh, const GptConfig& config);
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  const GptConfig& config() const { return config_; }
  const mesh::DeviceMesh& mesh() const { return *mesh_; }
  device::Backend& backend() const { return *be_; }

  void init(std::uint64_t seed);
  // Global tensors by name (as saved); throws naming a missing tensor or a wrong shape.
  void load(const std::map<std::string, Tensor>& global, const std::string& source);

  // tokens, targets: the replica's b·s ids, identical on every rank of the TP mesh.
  // Returns the mean loss (identical on every rank); 0 on a pipeline stage before the last.
  // in/out: the stream entering/leaving a pipeline stage (see above; empty otherwise), in
  // the backend's memory.
  double forward(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
                 std::span<const float> in = {}, std::span<float> out = {});
  // Gradients += ∂(dloss·loss)/∂θ for the last forward. on_layer_done(i) runs once block i
  // (of this object's blocks) has final gradients (see Stack::backward), for data-parallel
  // overlap; the embedding and final LayerNorm gradients are final when backward returns.
  // dout/din: the stream's gradient leaving/entering a pipeline stage.
  void backward(float dloss = 1.0f, const std::function<void(int layer)>& on_layer_done = {},
                std::span<const float> dout = {}, std::span<float> din = {});
  void zero_grads();

  // ZeRO-3 (train/zero.hpp): see Stack::set_before_layer and Stack::rebind (i: this
  // object's block index).
  void set_before_layer(const std::function<void(int layer, bool backward)>& hook) {
    stack_->set_before_layer(hook);
  }
  void rebind(int layer) { stack_->rebind(layer); }
  // The parameters' values were written in place (an optimizer step): the blocks' bf16
  // compute copies (model/layer_blocks.hpp) are made again before they next run. init, load
  // and scatter_value say so themselves.
  void parameters_changed() {
    stack_->parameters_changed();
    head_copy_stale_ = true;
  }

  // ---- pipeline stage ------------------------------------------------------------------
  bool has_embedding() const { return config_.stage == 0; }
  bool has_head() const { return config_.stage + 1 == pipeline_stages(config_.layout); }
  int first_layer() const { return config_.stage * stage_layers(config_); }
  std::int64_t stream_floats() const;  // floats of `in`/`out`
  // Parameter p is the tied token embedding (held by stages 0 and S−1).
  bool is_tied_embedding(int p) const {
    return extra(p) == kWte && config_.shape.tie_embeddings;
  }

  // ---- parameters: local shards -------------------------------------------------------
  int num_params() const { return static_cast<int>(names_.size()); }
  const std::string& name(int p) const { return names_.at(static_cast<std::size_t>(p)); }
  const Shape& global_shape(int p) const { return shapes_.at(static_cast<std::size_t>(p)); }
  const Shape& local_shape(int p) const;
  // fp32 arrays of backend() (Stack::value): a caller may swap one for an empty array or
  // another of local_shape(p)'s size (ZeRO), and rebind the block before it runs.
  device::Array& value(int p);
  device::Array& grad(int p);
  // A zeroed fp32 array of parameter p's local size, of the model's backend.
  device::Array zeroed(int p) const;
  int replicas(int p) const;  // TP ranks holding a copy of each element
  // A mixture of experts' expert weights (Stack::on_expert_mesh): under context parallelism
  // folded over tp·cp, their gradients reduce over dp alone (train/zero.hpp).
  bool on_expert_mesh(int p) const { return extra(p) < 0 && stack_->on_expert_mesh(p); }
  // Per local element, its share of the global gradient norm where p holds copies of some
  // elements (replicated KV heads: Stack::norm_weight), else null (1/replicas(p) each).
  const Tensor* norm_weight(int p) const { return extra(p) < 0 ? stack_->norm_weight(p) : nullptr; }
  // The block whose backward completes p's gradient (Stack::grad_layer); -1 for the
  // embedding, the final LayerNorm and what the stack completes only at the end.
  int grad_layer(int p) const { return extra(p) < 0 ? stack_->grad_layer(p) : -1; }
  bool decays(int p) const;   // weight decay: matrices yes, LayerNorm parameters and biases no

  // The global tensor of parameter p assembled from `local` shards laid out like it (its
  // value, gradient, or an optimizer moment), on the host. Collective over the TP mesh.
  Tensor gather(int p, std::span<const float> local) const;
  // This rank's block of a global tensor of parameter p, on the host.
  void scatter(int p, const Tensor& global, std::span<float> local) const;
  // The same for the parameter's value itself, wherever it lives.
  Tensor gather_value(int p);
  void scatter_value(int p, const Tensor& global);

 private:
  enum Extra { kWte, kWpe, kLnfWeight, kLnfBias, kHead, kExtras };
  // The head's weight: wte (tied) or lm_head.
  Extra head() const { return config_.shape.tie_embeddings ? kWte : kHead; }
  bool rms() const { return config_.shape.norm == layout::Norm::kRmsNorm; }
  // The Extra of parameter p, or −1 for the stack's.
  int extra(int p) const {
    return p < stack_params_ ? -1 : extras_.at(static_cast<std::size_t>(p - stack_params_));
  }
  const comm::Communicator* stream_group() const;               // LayerNorm group, or null
  void head_backward(float dloss);
  // The token rows this rank runs: b·s, or under context parallelism b·s/cp.
  std::int64_t local_tokens() const { return stack_config(config_).block.local_tokens(); }

  device::Array alloc(std::int64_t count, Element type = Element::kF32) const;
  // Views of an extra's array: [rows, h] for wte, wpe and the head, 1 × h for lnf; empty
  // where this stage does not hold it.
  View matrix(const device::Array& a, std::int64_t rows) const;
  View vector(const device::Array& a) const;
  // The head's weight as its GeMMs read it: its bf16 compute copy (a last stage built under
  // bf16, as the blocks' weights: model/layer_blocks.hpp), made again here if the values
  // changed since; else the fp32 value.
  View head_weight();

  const mesh::DeviceMesh* mesh_;
  GptConfig config_;
  std::unique_ptr<Stack> stack_;
  device::Backend* be_;  // the stack's
  int stack_params_ = 0;
  std::vector<int> extras_;  // the Extras this stage holds, in parameter order
  parallel::VocabShard vocab_;
  std::vector<std::string> names_;
  std::vector<Shape> shapes_;
  Shape local_[kExtras];
  device::Array values_[kExtras], grads_[kExtras];
  device::Array head_copy_;  // bf16 [V/T, h], or empty
  bool head_copy_stale_ = true;

  // Activations and workspace in the backend, sized once.
  std::vector<std::int32_t> tokens_, targets_;
  std::vector<std::int64_t> token_of_row_;  // context parallelism: local row → global token
  device::Array embedded_;    // [n, h]: the embedding, later the gathered dx of the stream
  device::Array final_ln_;    // stream block of LayerNorm_f's output, later its gradient
  device::Array final_full_;  // [n, h] gathered F
  device::Array dfinal_full_;
  device::Array logits_;  // [n, V/T]
  device::Array ln_mean_, ln_rstd_, lse_, ce_stats_;
  device::Array ln_sums_;         // fp64: the sharded norm's statistics in flight
  device::Array lnf_partial_[2];  // sequence parallelism: LayerNorm_f's partial gradients
};

}  // namespace meshtp::model
