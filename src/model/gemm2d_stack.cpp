#include "model/gemm2d_stack.hpp"

#include "model/stream_io.hpp"

#include "core/error.hpp"

namespace meshtp::model {

Gemm2dStack::Gemm2dStack(const mesh::DeviceMesh& mesh, const Gemm2dStackConfig& config)
    : mesh_(&mesh),
      config_(config),
      blocks_(config.layers, config.block.recompute,
              [&] { return std::make_unique<Gemm2dBlock>(mesh, config.block); }) {
  MESHTP_CHECK(config.layers >= 1, "layers={} must be at least 1", config.layers);
  table_ = stack_param_table(config.layers, config.block.hidden, config.first_layer);
  for (std::size_t p = 0; p < table_.size(); ++p) {
    ParamEntry& e = table_[p];
    e.shard = gemm2d_param_shard(plans(), static_cast<int>(p % kBlockParams));
    const Shape local = parallel::local_shape(e.shard, e.shape, mesh.shape());
    values_.emplace_back(local);
    grads_.emplace_back(local);
  }
  for (int l = 0; l < config.layers; ++l) rebind(l);
  workspace_ = std::make_unique<Gemm2dBlockWorkspace>(blocks_.front());
  const std::int64_t stream = stream_layout().size();
  for (int l = 0; l <= config.layers; ++l) streams_.emplace_back(Shape{stream});
  dstream_[0] = Tensor({stream});
  dstream_[1] = Tensor({stream});
}

Gemm2dStack::~Gemm2dStack() = default;

void Gemm2dStack::rebind(int l) {
  std::vector<std::span<float>> v, g;
  for (int k = 0; k < kBlockParams; ++k) {
    const auto p = static_cast<std::size_t>(l * kBlockParams + k);
    v.push_back(values_[p].values());
    g.push_back(grads_[p].values());
  }
  blocks_.bind(l, std::move(v), std::move(g));
}

int Gemm2dStack::replicas(int p) const {
  int r = 1;
  for (const int dim : parallel::replicated_dims(table_.at(static_cast<std::size_t>(p)).shard)) {
    r *= mesh_->size(dim);
  }
  return r;
}

void Gemm2dStack::zero_grads() {
  for (Tensor& g : grads_) g.fill(0.0f);
}

void Gemm2dStack::init(std::uint64_t seed) {
  for (int p = 0; p < num_params(); ++p) {
    const ParamEntry& e = table_[static_cast<std::size_t>(p)];
    const std::span<float> local = value(p).values();
    parallel::for_each_local(
        e.shard, e.shape, mesh_->shape(), mesh_->coords(), [&](std::int64_t l, std::int64_t g) {
          local[static_cast<std::size_t>(l)] = init_value(e, seed, config_.init_layers(), g);
        });
  }
}

void Gemm2dStack::load(const SafetensorsFile& file) {
  for (const ParamEntry& e : table_) require(file, e.name, e.shape);
  for (int p = 0; p < num_params(); ++p) {
    const ParamEntry& e = table_[static_cast<std::size_t>(p)];
    parallel::scatter_param(e.shard, file.tensors.at(e.name), *mesh_, value(p).values());
  }
}

std::map<std::string, Tensor> Gemm2dStack::gather_values() const {
  std::map<std::string, Tensor> out;
  for (int p = 0; p < num_params(); ++p) {
    const ParamEntry& e = table_[static_cast<std::size_t>(p)];
    out.emplace(e.name, parallel::gather_param(e.shard, value(p).values(), e.shape, *mesh_));
  }
  return out;
}

std::map<std::string, Tensor> Gemm2dStack::gather_grads() const {
  std::map<std::string, Tensor> out;
  for (int p = 0; p < num_params(); ++p) {
    const ParamEntry& e = table_[static_cast<std::size_t>(p)];
    out.emplace(e.name, parallel::gather_param(e.shard, grad(p).values(), e.shape, *mesh_));
  }
  return out;
}

parallel::ChunkedLayout Gemm2dStack::stream_layout() const {
  const Gemm2dBlock& b = blocks_.front();
  return {.chunk_rows = b.local_rows(), .cols = b.local_cols(), .chunks = 1, .pieces = 1};
}

parallel::ActivationShard Gemm2dStack::stream_shard() const {
  return {.chunks = 1,
          .row_parts = mesh_->size(0),
          .row_index = mesh_->coord(0),
          .col_parts = mesh_->size(1),
          .col_index = mesh_->coord(1)};
}

parallel::ChunkedMatrix Gemm2dStack::input() { return {streams_.front().data(), stream_layout()}; }
parallel::ChunkedMatrix Gemm2dStack::output() { return {streams_.back().data(), stream_layout()}; }
parallel::ChunkedMatrix Gemm2dStack::grad_output() { return {dstream_[0].data(), stream_layout()}; }
parallel::ChunkedMatrix Gemm2dStack::grad_input() {
  return {dstream_[config_.layers % 2].data(), stream_layout()};
}

StreamGeometry Gemm2dStack::stream_geometry() const {
  return {.batch = config_.block.batch,
          .seq = config_.block.seq,
          .hidden = config_.block.hidden,
          .shard = stream_shard(),
          .layout = stream_layout()};
}

void Gemm2dStack::set_input(const Tensor& global) {
  scatter_stream(stream_geometry(), global, streams_.front());
}
void Gemm2dStack::set_grad_output(const Tensor& global) {
  scatter_stream(stream_geometry(), global, dstream_[0]);
}
Tensor Gemm2dStack::gather_output() const {
  return gather_stream(stream_geometry(), mesh_->comm(), streams_.back());
}
Tensor Gemm2dStack::gather_grad_input() const {
  return gather_stream(stream_geometry(), mesh_->comm(), dstream_[config_.layers % 2]);
}

void Gemm2dStack::forward() {
  for (int i = 0; i < config_.layers; ++i) {
    if (before_layer_) before_layer_(i, false);
    forward_layer(i);
  }
}

void Gemm2dStack::forward_layer(int i) {
  const parallel::ChunkedLayout l = stream_layout();
  const auto u = static_cast<std::size_t>(i);
  blocks_.at(i).forward(parallel::ChunkedMatrix(streams_[u + 1].data(), l).whole(),
                        parallel::ChunkedMatrix(streams_[u].data(), l).whole(), *workspace_);
}

void Gemm2dStack::backward(const std::function<void(int layer)>& on_layer_done) {
  const parallel::ChunkedLayout l = stream_layout();
  for (int i = config_.layers - 1; i >= 0; --i) {
    const int k = config_.layers - 1 - i;  // dy in dstream_[k % 2], dx into the other
    if (before_layer_) before_layer_(i, true);
    if (blocks_.full()) forward_layer(i);  // recomputation (model/layer_blocks.hpp)
    blocks_.at(i).backward(
        parallel::ChunkedMatrix(dstream_[(k + 1) % 2].data(), l).whole(),
        parallel::ChunkedMatrix(dstream_[k % 2].data(), l).whole(), *workspace_);
    if (on_layer_done) on_layer_done(i);
  }
}

}  // namespace meshtp::model
