#include "model/stack.hpp"

#include <fmt/format.h>

#include <array>

#include "core/error.hpp"
#include "core/simulation.hpp"
#include "core/stats.hpp"
#include "model/stream_io.hpp"

namespace meshtp::model {
StackBlock::StackBlock(const mesh::DeviceMesh& mesh, const layout::ModelShape& shape,
                       const Shards& shards, const std::vector<int>& expert_mesh,
                       const comm::Communicator* fold)
    : mesh_(&mesh), shards_(shards) {
  if (!expert_mesh.empty()) {
    const comm::Communicator& over = fold != nullptr ? *fold : mesh.comm();
    MESHTP_CHECK(expert_mesh.at(0) * expert_mesh.at(1) == over.size(),
                 "the experts' mesh ep={} × etp={} = {} ranks, but they fold onto {} ({} of "
                 "them)",
                 expert_mesh[0], expert_mesh[1], expert_mesh[0] * expert_mesh[1],
                 fold != nullptr ? "the tensor-parallel × context-parallel group"
                                 : "the tensor-parallel mesh",
                 over.size());
    expert_mesh_ = std::make_unique<mesh::DeviceMesh>(
        mesh.is_alone() ? mesh::DeviceMesh::alone(expert_mesh, over.rank())
                        : mesh::DeviceMesh(over, expert_mesh));
  }
  const auto table = block_param_table(0, shape);
  for (std::size_t p = 0; p < shards.size(); ++p) {  // an absent slot: an empty span
    MESHTP_CHECK(!parallel::on_expert_mesh(shards[p]) || expert_mesh_,
                 "parameter {} lies on the experts' mesh, but the block has none", table[p].name);
    local_[p] = present(table[p]) ? parallel::local_shape(shards[p], table[p].shape,
                                                          param_mesh(static_cast<int>(p)).shape(),
                                                          table[p].kv_heads)
                                  : Shape{0};
  }
}

void StackBlock::bind(std::span<const std::span<float>> values,
                      std::span<const std::span<float>> grads) {
  MESHTP_CHECK(values.size() == kBlockParams && grads.size() == kBlockParams,
               "bind: {} values and {} gradients, expected {}", values.size(), grads.size(),
               static_cast<int>(kBlockParams));
  for (std::size_t p = 0; p < kBlockParams; ++p) {
    const auto want = static_cast<std::size_t>(numel(local_[p]));
    // Empty gradients: ZeRO ≥ 2 binds a block's accumulators only for its backward
    // (train/zero.hpp); its forward runs without them.
    MESHTP_CHECK(values[p].size() == want && (grads[p].size() == want || grads[p].empty()),
                 "bind: parameter {} has {} values / {} gradients, its shard has {}", p,
                 values[p].size(), grads[p].size(), want);
    p_[p] = values[p];
    g_[p] = grads[p];
  }
  copies_stale_ = true;
  bound();
}

void StackBlock::keep_compute_copies(std::span<const int> params, device::Backend& backend) {
  copies_backend_ = &backend;
  for (const int p : params) {
    const auto i = static_cast<std::size_t>(p);
    copies_[i] = backend.alloc(numel(local_[i]), Element::kBF16);
  }
  copies_stale_ = true;
}

namespace {
// A parameter's local shard as a matrix: [rows, cols] of a 2-D shape, else one row.
std::pair<std::int64_t, std::int64_t> matrix_shape(const Shape& s) {
  const std::int64_t rows = s.size() == 2 ? s[0] : 1;
  return {rows, numel(s) / std::max<std::int64_t>(rows, 1)};
}
}  // namespace

View StackBlock::gemm_weight(int p) const {
  const auto i = static_cast<std::size_t>(p);
  const auto [rows, cols] = matrix_shape(local_[i]);
  if (!copies_[i].empty()) return copies_[i].view(rows, cols);
  return View::packed(p_[i].data(), Element::kF32, rows, cols);
}

void StackBlock::refresh_compute_copies() {
  if (copies_backend_ == nullptr || !copies_stale_) return;
  for (std::size_t i = 0; i < kBlockParams; ++i) {
    if (copies_[i].empty()) continue;
    const auto [rows, cols] = matrix_shape(local_[i]);
    copies_backend_->copy(copies_[i].view(rows, cols),
                          View::packed(p_[i].data(), Element::kF32, rows, cols));
  }
  copies_stale_ = false;
}

void validate(const StackConfig& c, const std::vector<int>& mesh_shape) {
  MESHTP_CHECK(c.stack_layers() >= 1, "layers={} must be at least 1", c.stack_layers());
  MESHTP_CHECK(c.first_layer >= 0 && c.first_layer + c.stack_layers() <= c.block.shape.layers,
               "blocks {} … {} are not layers of a {}-layer model", c.first_layer,
               c.first_layer + c.stack_layers() - 1, c.block.shape.layers);
  if (layout::is_gemm2d(c.block.layout.strategy)) {
    MESHTP_CHECK(c.block.layout.cp == 1,
                 "cp={}: context parallelism runs on the ATP blocks (strategies atp, megatron, "
                 "tp1d), not the 2D-GeMM blocks ({})",
                 c.block.layout.cp, c.block.layout.strategy);
    if (const auto field = c.block.shape.non_gpt_field()) {
      fail("{}: the 2D-GeMM blocks ({}) run GPT layers only; the Llama family runs on the ATP "
           "blocks (strategies atp, megatron, tp1d)",
           *field, c.block.layout.strategy);
    }
    plan_gemm2d_block(c.block, mesh_shape);
  } else {
    validate_atp_block(c.block, mesh_shape);
  }
}

namespace {

const StackConfig& validated(const StackConfig& c, const std::vector<int>& mesh_shape) {
  validate(c, mesh_shape);
  return c;
}

// Each layer's kind (model/layer_blocks.hpp): 1 for a mixture of experts' MoE layers, 0 for
// the rest (model-wide layer indices: a pipeline stage's stack starts at first_layer).
std::vector<int> layer_kinds(const StackConfig& c) {
  std::vector<int> kinds;
  for (int l = 0; l < c.stack_layers(); ++l) {
    kinds.push_back(c.block.shape.moe_layer(c.first_layer + l) ? 1 : 0);
  }
  return kinds;
}

}  // namespace

// Everything is validated before anything is allocated.
Stack::Stack(const mesh::DeviceMesh& mesh, const StackConfig& config)
    : mesh_(&mesh),
      config_(validated(config, mesh.shape())),
      layers_(config.stack_layers()),
      backend_(config.block.backend != nullptr ? config.block.backend : &cpu_backend()),
      table_(stack_param_table(layers_, config.block.shape, config.first_layer)),
      blocks_(layer_kinds(config), config.block.layout.recompute,
              [&](int kind) -> std::unique_ptr<StackBlock> {
                if (layout::is_gemm2d(config.block.layout.strategy)) {
                  return std::make_unique<Gemm2dBlock>(mesh, config.block);
                }
                // A MoE model's dense layers: GPT blocks of the same sizes.
                BlockConfig layer = config.block;
                if (kind == 0) layer.shape = layer.shape.without_experts();
                return std::make_unique<Block>(mesh, layer);
              }) {
  std::int64_t ln_size = 0;
  // The table holds the present slots only (params.hpp): parameter p is slot slot_[p] of
  // block layer_[p].
  for (int l = 0; l < layers_; ++l) {
    const auto entries = block_param_table(config.first_layer + l, config.block.shape);
    for (int k = 0; k < kBlockParams; ++k) {
      if (!present(entries[static_cast<std::size_t>(k)])) continue;
      slot_.push_back(k);
      layer_.push_back(l);
    }
  }
  MESHTP_CHECK(slot_.size() == table_.size(), "stack: {} slots for {} parameters", slot_.size(),
               table_.size());
  for (std::size_t p = 0; p < table_.size(); ++p) {
    const StackBlock& b = param_block(static_cast<int>(p));
    const int k = slot_[p];
    table_[p].shard = b.param_shard(k);
    local_shapes_.push_back(b.local_shape(k));
    values_.push_back(alloc(numel(b.local_shape(k))));
    grads_.push_back(alloc(numel(b.local_shape(k))));
    backend_->zero(values_.back());
    backend_->zero(grads_.back());
    ln_offset_.push_back(ln_size);
    if (b.partial_grad(k)) ln_size += numel(b.local_shape(k));
  }
  if (ln_size > 0) ln_partial_ = alloc(ln_size);
  for (std::size_t p = 0; p < table_.size(); ++p) {
    const StackBlock& b = param_block(static_cast<int>(p));
    if (!b.replica_grad(slot_[p]) || !replica_part_.empty()) continue;
    // One layer's partial gradient at a time, the copies' sum, and each local element's
    // share of the gradient norm (1/copies): the same for every layer.
    // Only the k and v rows (global rows h …) have copies: q's h·h elements are each held once.
    const ParamEntry& e = table_[p];
    const std::int64_t q = e.shape[1] * e.shape[1];
    replica_part_ = alloc(numel(b.local_shape(slot_[p])));
    replica_sum_ = Tensor({numel(e.shape) - q});
    replica_sum_.fill(0.0f);
    parallel::for_each_local(
        e.shard, e.shape, mesh.shape(), mesh.coords(),
        [&](std::int64_t, std::int64_t g) {
          if (g >= q) replica_sum_[g - q] += 1.0f;
        },
        e.kv_heads);
    mesh.comm().all_reduce(replica_sum_.values());
    replica_norm_weight_ = Tensor(b.local_shape(slot_[p]));
    parallel::for_each_local(
        e.shard, e.shape, mesh.shape(), mesh.coords(),
        [&](std::int64_t l, std::int64_t g) {
          replica_norm_weight_[l] = g >= q ? 1.0f / replica_sum_[g - q] : 1.0f;
        },
        e.kv_heads);
  }

  for (int l = 0; l < layers_; ++l) rebind(l);
  // One workspace serves every layer: a dense layer's holds everything a MoE layer's does.
  int widest = 0;
  for (int l = 0; l < layers_; ++l) {
    if (blocks_.kind(l) == 0) widest = l;
  }
  workspace_ = blocks_.of_layer(widest).make_workspace();
  const std::int64_t stream = stream_layout().size();
  for (int l = 0; l <= layers_; ++l) {
    streams_.push_back(alloc(stream));
    backend_->zero(streams_.back());
  }
  for (device::Array& d : dstream_) {
    d = alloc(stream);
    backend_->zero(d);
  }
}

Stack::~Stack() = default;

device::Array Stack::alloc(std::int64_t count) const {
  return backend_->alloc(count, Element::kF32);
}

void Stack::rebind(int l) {
  std::vector<std::span<float>> v(kBlockParams), g(kBlockParams);  // absent slots: empty
  for (std::size_t p = 0; p < table_.size(); ++p) {
    if (layer_[p] != l) continue;
    const auto k = static_cast<std::size_t>(slot_[p]);
    v[k] = device::floats(values_[p]);
    const bool partial = blocks_.of_layer(l).partial_grad(slot_[p]);
    g[k] = partial ? device::floats(ln_partial_)
                         .subspan(static_cast<std::size_t>(ln_offset_[p]),
                                  static_cast<std::size_t>(grads_[p].count()))
                   : device::floats(grads_[p]);
    if (blocks_.of_layer(l).replica_grad(slot_[p])) {
      g[k] = device::floats(replica_part_);  // summed over the copies after the backward
    }
  }
  blocks_.bind(l, std::move(v), std::move(g));
}

int Stack::replicas(int p) const {
  int r = 1;
  const mesh::DeviceMesh& on = param_mesh(p);
  for (const int dim : parallel::replicated_dims(table_.at(static_cast<std::size_t>(p)).shard)) {
    r *= on.size(dim);
  }
  return r;
}

const Tensor* Stack::norm_weight(int p) const {
  return param_block(p).replica_grad(slot_.at(static_cast<std::size_t>(p))) ? &replica_norm_weight_
                                                                      : nullptr;
}

// Layer i's copied elements: every copy's partial gradient summed over the mesh (each global
// k and v element once, in a buffer of the global KV rows), the sum added to every copy; the
// q rows, each held once, take their own part.
void Stack::sum_replicas(int i) {
  for (std::size_t p = 0; p < table_.size(); ++p) {
    if (layer_[p] != i || !param_block(static_cast<int>(p)).replica_grad(slot_[p])) continue;
    // On the host: a layer's few KV rows, gathered by their global index (for_each_local).
    const ParamEntry& e = table_[p];
    const std::vector<float> part = backend_->download(replica_part_);
    const std::int64_t q = e.shape[1] * e.shape[1];
    replica_sum_.fill(0.0f);
    parallel::for_each_local(
        e.shard, e.shape, mesh_->shape(), mesh_->coords(),
        [&](std::int64_t l, std::int64_t g) {
          if (g >= q) replica_sum_[g - q] += part[static_cast<std::size_t>(l)];
        },
        e.kv_heads);
    mesh_->comm().all_reduce(replica_sum_.values());
    if (grads_[p].empty()) continue;  // ZeRO ≥ 2 without accumulators here: nothing to add to
    device::edit_on_host(*backend_, grads_[p], [&](std::span<float> grad) {
      parallel::for_each_local(
          e.shard, e.shape, mesh_->shape(), mesh_->coords(),
          [&](std::int64_t l, std::int64_t g) {
            const auto u = static_cast<std::size_t>(l);
            grad[u] += g >= q ? replica_sum_[g - q] : part[u];
          },
          e.kv_heads);
    });
  }
}

int Stack::first_of_kind(int kind) const {
  int l = 0;
  while (blocks_.kind(l) != kind) ++l;
  return l;
}

const mesh::DeviceMesh& Stack::param_mesh(int p) const {
  return param_block(p).param_mesh(slot_.at(static_cast<std::size_t>(p)));
}

int Stack::grad_layer(int p) const {
  const auto u = static_cast<std::size_t>(p);
  return param_block(p).partial_grad(slot_.at(u)) ? -1 : layer_.at(u);
}

void Stack::zero_grads() {
  for (device::Array& g : grads_) backend_->zero(g);
}

void Stack::init(std::uint64_t seed) {
  for (int p = 0; p < num_params(); ++p) {
    const ParamEntry& e = table_[static_cast<std::size_t>(p)];
    const mesh::DeviceMesh& on = param_mesh(p);
    device::edit_on_host(*backend_, value(p), [&](std::span<float> local) {
      parallel::for_each_local(
          e.shard, e.shape, on.shape(), on.coords(),
          [&](std::int64_t l, std::int64_t g) {
            local[static_cast<std::size_t>(l)] =
                init_value(e, seed, static_cast<int>(config_.block.shape.layers), g);
          },
          e.kv_heads);
    });
  }
  parameters_changed();
}

void Stack::parameters_changed() {
  blocks_.for_each([](StackBlock& b) { b.parameters_changed(); });
}

void Stack::load(const SafetensorsFile& file) {
  // Check everything first: a bad file changes nothing.
  for (const ParamEntry& e : table_) require(file, e.name, e.shape);
  for (int p = 0; p < num_params(); ++p) {
    const ParamEntry& e = table_[static_cast<std::size_t>(p)];
    device::edit_on_host(*backend_, value(p), [&](std::span<float> local) {
      parallel::scatter_param(e.shard, file.tensors.at(e.name), param_mesh(p), local, e.kv_heads);
    });
  }
  parameters_changed();
}

std::map<std::string, Tensor> Stack::gather(const std::vector<device::Array>& local) const {
  std::map<std::string, Tensor> out;
  for (int p = 0; p < num_params(); ++p) {
    const ParamEntry& e = table_[static_cast<std::size_t>(p)];
    out.emplace(e.name, device::read_on_host(*backend_, local[static_cast<std::size_t>(p)],
                                             [&](std::span<const float> shard) {
                                               return parallel::gather_param(e.shard, shard,
                                                                             e.shape, param_mesh(p),
                                                                             e.kv_heads);
                                             }));
  }
  return out;
}

std::map<std::string, Tensor> Stack::gather_values() const { return gather(values_); }
std::map<std::string, Tensor> Stack::gather_grads() const { return gather(grads_); }

void Stack::save(const std::string& path) const {
  const auto tensors = gather_values();
  int ok = 1;
  std::string reason;
  if (mesh_->rank() == 0) {
    try {
      save_safetensors(path, tensors,
                       {{"format", "meshtp-block-stack"},
                        {"hidden", std::to_string(config_.block.shape.hidden)},
                        {"heads", std::to_string(config_.block.shape.heads)},
                        {"layers", std::to_string(layers_)}});
    } catch (const Error& e) {
      ok = 0;
      reason = e.what();
    }
  }
  mesh_->comm().broadcast(std::span<int>(&ok, 1), 0);
  if (mesh_->rank() == 0 && !ok) throw Error(reason);
  MESHTP_CHECK(ok, "saving {} failed on rank 0", path);
}

parallel::ChunkedLayout Stack::stream_layout() const { return blocks_.front().stream_layout(); }
parallel::ActivationShard Stack::stream_shard() const { return blocks_.front().stream_shard(); }

namespace {
parallel::ChunkedMatrix chunked(const device::Array& a, const parallel::ChunkedLayout& layout) {
  return {static_cast<float*>(a.data()), layout};
}
}  // namespace

parallel::ChunkedMatrix Stack::input() { return chunked(streams_.front(), stream_layout()); }
parallel::ChunkedMatrix Stack::output() { return chunked(streams_.back(), stream_layout()); }
parallel::ChunkedMatrix Stack::grad_output() { return chunked(dstream_[0], stream_layout()); }
parallel::ChunkedMatrix Stack::grad_input() {
  // backward ping-pongs between the two buffers, one swap per layer.
  return chunked(dstream_[layers_ % 2], stream_layout());
}

StreamGeometry Stack::stream_geometry() const {
  return {.shape = config_.block.shape, .shard = stream_shard(), .layout = stream_layout()};
}

void Stack::scatter_into(const Tensor& global, device::Array& local) {
  Tensor block({local.count()});
  scatter_stream(stream_geometry(), *mesh_, global, block);
  backend_->upload(local, block.values());
}
Tensor Stack::gather_from(const device::Array& local) const {
  return device::read_on_host(*backend_, local, [&](std::span<const float> block) {
    return gather_stream(stream_geometry(), *mesh_,
                         Tensor({local.count()}, {block.begin(), block.end()}));
  });
}
void Stack::set_input(const Tensor& global) { scatter_into(global, streams_.front()); }
void Stack::set_grad_output(const Tensor& global) { scatter_into(global, dstream_[0]); }
Tensor Stack::gather_output() const { return gather_from(streams_.back()); }
Tensor Stack::gather_grad_input() const { return gather_from(dstream_[layers_ % 2]); }

void Stack::forward() {
  // Folded in a simulated run with --fold-layers (core/simulation.hpp): the layers of one kind
  // are the repeated work (dense and MoE layers differ).
  std::array<RepeatedWork, 2> layers;
  for (int i = 0; i < layers_; ++i) {
    if (before_layer_) before_layer_(i, false);
    layers[static_cast<std::size_t>(blocks_.kind(i))].run([&] { forward_layer(i); });
  }
}

void Stack::forward_layer(int i) {
  const parallel::ChunkedLayout l = stream_layout();
  const auto u = static_cast<std::size_t>(i);
  blocks_.at(i).forward(chunked(streams_[u + 1], l), chunked(streams_[u], l), *workspace_);
}

void Stack::backward(const std::function<void(int layer)>& on_layer_done) {
  const parallel::ChunkedLayout l = stream_layout();
  if (!ln_partial_.empty()) backend_->zero(ln_partial_);
  std::array<RepeatedWork, 2> layers;  // per kind, as in forward
  for (int i = layers_ - 1; i >= 0; --i) {
    const int k = layers_ - 1 - i;  // dy in dstream_[k % 2], dx into the other
    if (before_layer_) before_layer_(i, true);
    RepeatedWork& repeated = layers[static_cast<std::size_t>(blocks_.kind(i))];
    repeated.run([&] {
      // Folded, the block that runs is the one whose forward ran (and saved its input): the
      // first layer of its kind.
      const int b = repeated.folded() ? first_of_kind(blocks_.kind(i)) : i;
      if (blocks_.full()) forward_layer(b);  // recomputation (model/layer_blocks.hpp)
      if (!replica_part_.empty()) backend_->zero(replica_part_);
      blocks_.at(b).backward(chunked(dstream_[(k + 1) % 2], l), chunked(dstream_[k % 2], l),
                             *workspace_);
      if (!replica_part_.empty()) sum_replicas(b);
    });
    if (on_layer_done) on_layer_done(i);
  }
  if (!ln_partial_.empty()) {
    // Sequence parallelism: each rank summed the LayerNorm gradients over its own tokens.
    mesh_->dim_comm(0).all_reduce(device::floats(ln_partial_));
    for (std::size_t p = 0; p < table_.size(); ++p) {
      if (!param_block(static_cast<int>(p)).partial_grad(slot_[p])) continue;
      const std::int64_t n = grads_[p].count();
      backend_->add(grads_[p].view(1, n), ln_partial_.view(ln_offset_[p], 1, n, n));
    }
  }
}

}  // namespace meshtp::model
