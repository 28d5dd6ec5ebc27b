#include "model/gpt.hpp"

#include "core/error.hpp"
#include "core/parse.hpp"
#include "ops/residual.hpp"
#include "parallel/activation_shard.hpp"
#include "parallel/layernorm_sharded.hpp"
#include "parallel/param_shard.hpp"
#include "tensor/gemm.hpp"

namespace meshtp::model {

int pipeline_stages(const layout::Plan& plan) { return plan.pp * plan.virtual_stages; }
int stage_layers(const GptConfig& config) {
  return config.shape.layers / pipeline_stages(config.layout);
}

void validate(const GptConfig& config, const std::vector<int>& tp_mesh_shape) {
  config.shape.validate("model");
  MESHTP_CHECK(config.shape.vocab > 0, "model: vocab={} must be positive", config.shape.vocab);
  const layout::Plan& p = config.layout;
  p.validate();
  const int stages = pipeline_stages(p);
  MESHTP_CHECK(config.shape.layers % stages == 0,
               "layers={} do not split into pp={} × virtual_stages={} = {} pipeline stages of "
               "equal depth: make pp·virtual_stages divide the layers",
               config.shape.layers, p.pp, p.virtual_stages, stages);
  MESHTP_CHECK(config.stage >= 0 && config.stage < stages,
               "model: pipeline stage {} is not one of the plan's {}", config.stage, stages);
  MESHTP_CHECK(tp_mesh_shape == std::vector<int>(p.mesh.begin(), p.mesh.end()),
               "model: the plan's mesh {}x{} is not the tensor-parallel mesh {}", p.mesh[0],
               p.mesh[1], format_mesh_shape(tp_mesh_shape));
  validate(stack_config(config), tp_mesh_shape);
}

StackConfig stack_config(const GptConfig& c) {
  return {.block = {.shape = c.shape,
                    .layout = c.layout,
                    .cp_group = c.cp_group,
                    .fold_group = c.fold_group,
                    .backend = c.backend},
          .first_layer = c.stage * stage_layers(c),
          .layers = stage_layers(c)};
}

std::unique_ptr<Stack> make_stack(const mesh::DeviceMesh& tp_mesh, const GptConfig& config) {
  validate(config, tp_mesh.shape());
  return std::make_unique<Stack>(tp_mesh, stack_config(config));
}

Gpt::Gpt(const mesh::DeviceMesh& tp_mesh, const GptConfig& config)
    : mesh_(&tp_mesh), config_(config) {
  stack_ = make_stack(tp_mesh, config_);
  be_ = &stack_->backend();
  const std::vector<ParamEntry>& table = stack_->param_table();
  stack_params_ = static_cast<int>(table.size());
  vocab_ = parallel::make_vocab_shard(config_.shape.vocab, tp_mesh.comm());
  const std::int64_t h = config_.shape.hidden, n = local_tokens();
  if (config_.layout.cp > 1) {  // the global token of each local row (model/layer_blocks.hpp)
    const BlockConfig& block = stack_config(config_).block;
    for (std::int64_t r = 0; r < n; ++r) {
      token_of_row_.push_back(cp_token_of_row(block, config_.cp_group->rank(), r));
    }
  }
  for (const ParamEntry& e : table) {
    names_.push_back(e.name);
    shapes_.push_back(e.shape);
  }
  // The family (layout/model_shape.hpp): RoPE has no wpe, RMSNorm no lnf.bias, an untied
  // head its own lm_head (the last stage's, vocab-parallel like wte).
  const layout::ModelShape& m = config_.shape;
  const bool tied = m.tie_embeddings, learned = m.position == layout::Position::kLearned;
  if (has_embedding() || (has_head() && tied)) extras_.push_back(kWte);
  if (has_embedding() && learned) extras_.push_back(kWpe);
  if (has_head()) extras_.push_back(kLnfWeight);
  if (has_head() && m.norm == layout::Norm::kLayerNorm) extras_.push_back(kLnfBias);
  if (has_head() && !tied) extras_.push_back(kHead);
  const char* extra_names[kExtras] = {"wte", "wpe", "lnf.weight", "lnf.bias", "lm_head.weight"};
  const Shape lnf_local = parallel::local_shape(parallel::ParamShard::kHidden, {h}, tp_mesh.shape());
  const Shape global[kExtras] = {
      {config_.shape.vocab, h}, {config_.shape.seq, h}, {h}, {h}, {config_.shape.vocab, h}};
  const Shape local[kExtras] = {
      {vocab_.rows, h}, {config_.shape.seq, h}, lnf_local, lnf_local, {vocab_.rows, h}};
  for (const int e : extras_) {
    names_.push_back(extra_names[e]);
    shapes_.push_back(global[e]);
    local_[e] = local[e];
    values_[e] = alloc(numel(local[e]));
    grads_[e] = alloc(numel(local[e]));
    be_->zero(values_[e]);
    be_->zero(grads_[e]);
  }
  if (has_head() && saved_operand_element() != Element::kF32) {
    head_copy_ = alloc(vocab_.rows * h, saved_operand_element());
  }
  tokens_.resize(static_cast<std::size_t>(n));
  targets_.resize(static_cast<std::size_t>(n));
  if (has_embedding()) embedded_ = alloc(n * h);
  if (has_embedding() || has_head()) dfinal_full_ = alloc(n * h);
  if (!has_head()) return;
  for (device::Array& partial : lnf_partial_) partial = alloc(numel(lnf_local));
  const parallel::ChunkedLayout stream = stack_->stream_layout();
  final_ln_ = alloc(stream.rows() * stream.cols);
  final_full_ = alloc(n * h);
  logits_ = alloc(n * vocab_.rows);
  ln_mean_ = alloc(stream.rows());
  ln_rstd_ = alloc(stream.rows());
  ln_sums_ = alloc(device::norm_sum_count(config_.shape.norm, stream.rows()), Element::kF64);
  lse_ = alloc(n);
  ce_stats_ = alloc(3 * n);
}

device::Array Gpt::alloc(std::int64_t count, Element type) const { return be_->alloc(count, type); }

View Gpt::matrix(const device::Array& a, std::int64_t rows) const {
  return a.empty() ? View{} : a.view(rows, config_.shape.hidden);
}
View Gpt::vector(const device::Array& a) const { return a.empty() ? View{} : a.view(1, a.count()); }

View Gpt::head_weight() {
  const View fp32 = matrix(values_[head()], vocab_.rows);
  if (head_copy_.empty()) return fp32;
  const View copy = head_copy_.view(vocab_.rows, config_.shape.hidden);
  if (head_copy_stale_) be_->copy(copy, fp32);
  head_copy_stale_ = false;
  return copy;
}

std::int64_t Gpt::stream_floats() const {
  return stack_->stream_layout().size();
}

const comm::Communicator* Gpt::stream_group() const {
  const bool split = mesh::is_shard(stack_->stream_shard().spec[1], 2) && mesh_->size(1) > 1;
  return split ? &mesh_->dim_comm(1) : nullptr;
}

device::Array& Gpt::value(int p) { return extra(p) < 0 ? stack_->value(p) : values_[extra(p)]; }
device::Array& Gpt::grad(int p) { return extra(p) < 0 ? stack_->grad(p) : grads_[extra(p)]; }
const Shape& Gpt::local_shape(int p) const {
  return extra(p) < 0 ? stack_->local_shape(p) : local_[extra(p)];
}
device::Array Gpt::zeroed(int p) const {
  device::Array a = alloc(numel(local_shape(p)));
  be_->zero(a);
  return a;
}

int Gpt::replicas(int p) const {
  switch (extra(p)) {
    case kWte:  // tied: stages 0 and S−1
      return pipeline_stages(config_.layout) > 1 && config_.shape.tie_embeddings ? 2 : 1;
    case kHead: return 1;
    case kWpe: return mesh_->size();
    case kLnfWeight:
    case kLnfBias: {
      int r = 1;
      for (const int d : parallel::replicated_dims(parallel::ParamShard::kHidden)) {
        r *= mesh_->size(d);
      }
      return r;
    }
    default: return stack_->replicas(p);
  }
}

bool Gpt::decays(int p) const {
  const int e = extra(p);
  if (e < 0) return stack_->decays(p);
  return e == kWte || e == kWpe || e == kHead;
}

void Gpt::zero_grads() {
  stack_->zero_grads();
  for (device::Array& g : grads_) {
    if (!g.empty()) be_->zero(g);
  }
}

void Gpt::init(std::uint64_t seed) {
  stack_->init(seed);
  const std::int64_t h = config_.shape.hidden;
  const ParamEntry wte = wte_entry(config_.shape.vocab, h);
  const ParamEntry wpe = wpe_entry(config_.shape.seq, h);
  const ParamEntry head = head_entry(config_.shape.vocab, h);
  if (!has_embedding() && !has_head()) return;
  for (const auto& [e, entry] : {std::pair{kWte, &wte}, std::pair{kHead, &head}}) {
    if (values_[e].empty()) continue;  // a stage that does not hold it
    device::edit_on_host(*be_, values_[e], [&](std::span<float> w) {
      for (std::int64_t r = 0; r < vocab_.rows; ++r) {
        const std::int64_t row = vocab_.begin + r;
        for (std::int64_t c = 0; c < h; ++c) {
          w[static_cast<std::size_t>(r * h + c)] =
              row < config_.shape.vocab
                  ? init_value(*entry, seed, config_.shape.layers, row * h + c)
                  : 0.0f;
        }
      }
    });
  }
  if (!values_[kWpe].empty()) {
    device::edit_on_host(*be_, values_[kWpe], [&](std::span<float> w) {
      for (std::size_t g = 0; g < w.size(); ++g) {
        w[g] = init_value(wpe, seed, config_.shape.layers, static_cast<std::int64_t>(g));
      }
    });
  }
  for (const int e : {kLnfWeight, kLnfBias}) {  // empty unless this stage has the head
    if (values_[e].empty()) continue;
    device::edit_on_host(*be_, values_[e], [&](std::span<float> w) {
      std::fill(w.begin(), w.end(), e == kLnfWeight ? 1.0f : 0.0f);
    });
  }
}

void Gpt::load(const std::map<std::string, Tensor>& global, const std::string& source) {
  // Check every tensor first, so a bad file changes nothing.
  for (int p = 0; p < num_params(); ++p) {
    const auto it = global.find(name(p));
    MESHTP_CHECK(it != global.end(), "missing tensor '{}' in {}", name(p), source);
    MESHTP_CHECK(it->second.shape() == global_shape(p), "tensor '{}' in {} has shape {}, expected {}",
                 name(p), source, to_string(it->second.shape()), to_string(global_shape(p)));
  }
  for (int p = 0; p < num_params(); ++p) scatter_value(p, global.at(name(p)));
}

Tensor Gpt::gather_value(int p) {
  return device::read_on_host(*be_, value(p),
                              [&](std::span<const float> local) { return gather(p, local); });
}

void Gpt::scatter_value(int p, const Tensor& global) {
  device::edit_on_host(*be_, value(p), [&](std::span<float> local) { scatter(p, global, local); });
  parameters_changed();
}

Tensor Gpt::gather(int p, std::span<const float> local) const {
  const int e = extra(p);
  if (e < 0) {
    const ParamEntry& entry = stack_->param_table().at(static_cast<std::size_t>(p));
    return parallel::gather_param(entry.shard, local, global_shape(p), stack_->param_mesh(p),
                                  entry.kv_heads);
  }
  if (e == kWpe) return Tensor(global_shape(p), {local.begin(), local.end()});
  if (e == kWte || e == kHead) {
    Tensor padded({vocab_.vocab, config_.shape.hidden});
    mesh_->comm().all_gather(local, padded.values());
    padded.reshape({vocab_.vocab * config_.shape.hidden});
    Tensor out({config_.shape.vocab, config_.shape.hidden},
               std::vector<float>(padded.data(),
                                  padded.data() + config_.shape.vocab * config_.shape.hidden));
    return out;
  }
  return parallel::gather_param(parallel::ParamShard::kHidden, local, global_shape(p), *mesh_);
}

void Gpt::scatter(int p, const Tensor& global, std::span<float> local) const {
  MESHTP_CHECK(global.shape() == global_shape(p), "parameter '{}': global shape {}, expected {}",
               name(p), to_string(global.shape()), to_string(global_shape(p)));
  const int e = extra(p);
  if (e < 0) {
    const ParamEntry& entry = stack_->param_table().at(static_cast<std::size_t>(p));
    parallel::scatter_param(entry.shard, global, stack_->param_mesh(p), local, entry.kv_heads);
  } else if (e == kWpe) {
    MESHTP_CHECK(static_cast<std::int64_t>(local.size()) == global.numel(),
                 "parameter '{}': {} local floats for {}", name(p), local.size(), global.numel());
    meshtp::copy(global.values(), local);
  } else if (e == kWte || e == kHead) {
    const std::int64_t h = config_.shape.hidden;
    for (std::int64_t r = 0; r < vocab_.rows; ++r) {
      for (std::int64_t c = 0; c < h; ++c) {
        const std::int64_t row = vocab_.begin + r;
        local[static_cast<std::size_t>(r * h + c)] =
            row < config_.shape.vocab ? global.at({row, c}) : 0.0f;
      }
    }
  } else {
    parallel::scatter_param(parallel::ParamShard::kHidden, global, *mesh_, local);
  }
}

namespace {

// A pipeline stage's stream in or out: `from` into `to`, both the backend's memory.
void copy_stream(device::Backend& be, std::span<const float> from, std::span<float> to,
                 const char* what) {
  MESHTP_CHECK(from.size() == to.size(), "pipeline stage: {} of {} floats, expected {}", what,
               from.size(), to.size());
  const auto n = static_cast<std::int64_t>(to.size());
  be.copy(View::packed(to.data(), Element::kF32, 1, n),
          View::packed(const_cast<float*>(from.data()), Element::kF32, 1, n));
}

View whole(const parallel::ChunkedMatrix& m) {
  const MatrixView v = m.whole();
  return {v.data, Element::kF32, v.rows, v.cols, v.ld};
}

}  // namespace

double Gpt::forward(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
                    std::span<const float> in, std::span<float> out) {
  const std::int64_t n = config_.shape.batch * config_.shape.seq, h = config_.shape.hidden;
  MESHTP_CHECK(static_cast<std::int64_t>(tokens.size()) == n &&
                   static_cast<std::int64_t>(targets.size()) == n,
               "model forward: {} tokens and {} targets for batch {} × seq {}", tokens.size(),
               targets.size(), config_.shape.batch, config_.shape.seq);
  if (token_of_row_.empty()) {
    std::copy(tokens.begin(), tokens.end(), tokens_.begin());
    std::copy(targets.begin(), targets.end(), targets_.begin());
  } else {  // context parallelism: this rank's zigzag rows
    for (std::size_t r = 0; r < token_of_row_.size(); ++r) {
      tokens_[r] = tokens[static_cast<std::size_t>(token_of_row_[r])];
      targets_[r] = targets[static_cast<std::size_t>(token_of_row_[r])];
    }
  }
  const parallel::ActivationShard shard = stack_->stream_shard();
  const std::int64_t rows = static_cast<std::int64_t>(tokens_.size());

  if (has_embedding()) {
    const View embedded = embedded_.view(rows, h);
    parallel::vocab_embedding_forward(*be_, embedded, tokens_, matrix(values_[kWte], vocab_.rows),
                                      vocab_, mesh_->comm());
    // Every sequence's rows += wpe (the position embedding, whole on every rank; none with
    // RoPE, which the blocks apply); under context parallelism row by row, at its position.
    const View wpe = matrix(values_[kWpe], config_.shape.seq);
    if (!token_of_row_.empty() && !values_[kWpe].empty()) {
      for (std::size_t r = 0; r < token_of_row_.size(); ++r) {
        const View x = embedded.row_band(static_cast<std::int64_t>(r), 1);
        be_->residual(x, x, wpe.row_band(token_of_row_[r] % config_.shape.seq, 1));
      }
    }
    for (std::int64_t b = 0; b < (values_[kWpe].empty() || !token_of_row_.empty()
                                      ? 0
                                      : config_.shape.batch);
         ++b) {
      const View sequence = embedded.row_band(b * config_.shape.seq, config_.shape.seq);
      be_->residual(sequence, sequence, wpe);
    }
    parallel::slice_activation(*be_, embedded, shard, *mesh_, whole(stack_->input()));
  } else {
    copy_stream(*be_, in, stack_->input().span(), "input");
  }
  stack_->forward();
  if (!has_head()) {
    copy_stream(*be_, stack_->output().span(), out, "output");
    return 0.0;
  }

  const View x_last = whole(stack_->output());
  const View final_ln = final_ln_.view(x_last.rows, x_last.cols);
  const bool layer_norm = config_.shape.norm == layout::Norm::kLayerNorm;
  parallel::norm_sharded_forward(
      *be_, config_.shape.norm, final_ln, layer_norm ? ln_mean_.view(1, x_last.rows) : View{},
      ln_rstd_.view(1, x_last.rows), x_last, vector(values_[kLnfWeight]), vector(values_[kLnfBias]),
      h, stream_group(), ln_sums_.view(1, ln_sums_.count()));
  parallel::gather_activation_into(*be_, *mesh_, final_ln, final_full_.view(rows, h), shard);
  return parallel::vocab_cross_entropy_forward(
      *be_, logits_.view(rows, vocab_.rows), lse_.view(1, rows), final_full_.view(rows, h),
      head_weight(), targets_, vocab_, mesh_->comm(), ce_stats_.view(1, ce_stats_.count()));
}

void Gpt::backward(float dloss, const std::function<void(int layer)>& on_layer_done,
                   std::span<const float> dout, std::span<float> din) {
  const parallel::ActivationShard shard = stack_->stream_shard();
  if (has_head()) {
    head_backward(dloss);
  } else {
    copy_stream(*be_, dout, stack_->grad_output().span(), "gradient");
  }
  // A mixture of experts' load-balancing losses are weighted as the loss is: L = dloss·(CE +
  // aux). Under context parallelism dloss also averages over the cp ranks (each holds 1/cp of
  // the tokens, its CE their mean), but one aux spans the whole tp·cp group and each rank's
  // backward gives its own tokens' share of its gradient, summed over cp: hence ·cp.
  stack_->set_aux_weight(static_cast<double>(dloss) * config_.layout.cp);
  stack_->backward(on_layer_done);
  if (!has_embedding()) {
    copy_stream(*be_, stack_->grad_input().span(), din, "input gradient");
    return;
  }
  // dfinal_full_ is free again: it takes the embedding's gradient, gathered.
  const std::int64_t h = config_.shape.hidden, rows = static_cast<std::int64_t>(tokens_.size());
  const View dembedded = dfinal_full_.view(rows, h);
  parallel::gather_activation_into(*be_, *mesh_, whole(stack_->grad_input()), dembedded, shard);
  parallel::vocab_embedding_backward(*be_, matrix(grads_[kWte], vocab_.rows), dembedded, tokens_,
                                     vocab_);
  if (grads_[kWpe].empty()) return;
  const View dwpe = matrix(grads_[kWpe], config_.shape.seq);
  if (!token_of_row_.empty()) {  // context parallelism: row by row
    for (std::size_t r = 0; r < token_of_row_.size(); ++r) {
      be_->add(dwpe.row_band(token_of_row_[r] % config_.shape.seq, 1),
               dembedded.row_band(static_cast<std::int64_t>(r), 1));
    }
    return;
  }
  for (std::int64_t b = 0; b < config_.shape.batch; ++b) {
    be_->add(dwpe, dembedded.row_band(b * config_.shape.seq, config_.shape.seq));
  }
}

// The loss's gradient back to the stack's output: cross-entropy, the gather, LayerNorm_f.
void Gpt::head_backward(float dloss) {
  const std::int64_t h = config_.shape.hidden, rows = static_cast<std::int64_t>(tokens_.size());
  const parallel::ActivationShard shard = stack_->stream_shard();
  const View dfull = dfinal_full_.view(rows, h);
  parallel::vocab_cross_entropy_backward(*be_, dfull, matrix(grads_[head()], vocab_.rows),
                                         logits_.view(rows, vocab_.rows), lse_.view(1, rows),
                                         final_full_.view(rows, h), head_weight(), targets_, vocab_,
                                         mesh_->comm(), dloss);
  // final_ln_ now holds this rank's block of ∂L/∂f.
  const View dx_last = whole(stack_->grad_output());
  const View dfinal = final_ln_.view(dx_last.rows, dx_last.cols);
  parallel::slice_activation(*be_, dfull, shard, *mesh_, dfinal);
  be_->zero(dx_last);
  // When the stream's rows are split over mesh dim 0 (sequence parallelism, the 2D GeMM
  // stack) each rank normalises only its own tokens: LayerNorm_f's parameter gradients are
  // partial sums over mesh dim 0.
  const bool rows_split = mesh::is_shard(shard.spec[0], 1) && mesh_->size(0) > 1;
  const device::Array* dw = &grads_[kLnfWeight];
  const device::Array* db = &grads_[kLnfBias];
  if (rows_split) {
    for (device::Array& partial : lnf_partial_) be_->zero(partial);
    dw = &lnf_partial_[0];
    db = &lnf_partial_[1];
  }
  const bool layer_norm = config_.shape.norm == layout::Norm::kLayerNorm;
  parallel::norm_sharded_backward(
      *be_, config_.shape.norm, dx_last, vector(*dw), layer_norm ? vector(*db) : View{}, dfinal,
      whole(stack_->output()), vector(values_[kLnfWeight]),
      layer_norm ? ln_mean_.view(1, dx_last.rows) : View{}, ln_rstd_.view(1, dx_last.rows), h,
      stream_group(), ln_sums_.view(1, ln_sums_.count()));
  if (rows_split) {
    for (int k = 0; k < (rms() ? 1 : 2); ++k) {
      mesh_->dim_comm(0).all_reduce(device::floats(lnf_partial_[k]));
      be_->add(vector(grads_[kLnfWeight + k]), vector(lnf_partial_[k]));
    }
  }
}

}  // namespace meshtp::model
