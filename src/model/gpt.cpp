#include "model/gpt.hpp"

#include "core/error.hpp"
#include "core/parse.hpp"
#include "ops/residual.hpp"
#include "parallel/activation_shard.hpp"
#include "parallel/layernorm_sharded.hpp"
#include "parallel/param_shard.hpp"

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
  return {.block = {.shape = c.shape, .layout = c.layout, .cp_group = c.cp_group,
                    .fold_group = c.fold_group},
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
    values_[e] = Tensor(local[e]);
    grads_[e] = Tensor(local[e]);
  }
  tokens_.resize(static_cast<std::size_t>(n));
  targets_.resize(static_cast<std::size_t>(n));
  if (has_embedding()) embedded_ = Tensor({n, h});
  if (has_embedding() || has_head()) dfinal_full_ = Tensor({n, h});
  if (!has_head()) return;
  lnf_partial_[0] = Tensor(lnf_local);
  lnf_partial_[1] = Tensor(lnf_local);
  const parallel::ChunkedLayout stream = stack_->stream_layout();
  final_ln_ = Tensor({stream.rows(), stream.cols});
  final_full_ = Tensor({n, h});
  logits_ = Tensor({n, vocab_.rows});
  ln_mean_.resize(static_cast<std::size_t>(stream.rows()));
  ln_rstd_.resize(static_cast<std::size_t>(stream.rows()));
  ln_scratch_.resize(static_cast<std::size_t>(2 * stream.rows()));
  lse_.resize(static_cast<std::size_t>(n));
  ce_stats_.resize(static_cast<std::size_t>(3 * n));
}

std::int64_t Gpt::stream_floats() const {
  return stack_->stream_layout().size();
}

const comm::Communicator* Gpt::stream_group() const {
  const bool split = mesh::is_shard(stack_->stream_shard().spec[1], 2) && mesh_->size(1) > 1;
  return split ? &mesh_->dim_comm(1) : nullptr;
}

Tensor& Gpt::value(int p) {
  return extra(p) < 0 ? stack_->value(p)
                      : values_[extra(p)];
}
Tensor& Gpt::grad(int p) {
  return extra(p) < 0 ? stack_->grad(p)
                      : grads_[extra(p)];
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
  for (Tensor& g : grads_) g.fill(0.0f);
}

void Gpt::init(std::uint64_t seed) {
  stack_->init(seed);
  const std::int64_t h = config_.shape.hidden;
  const ParamEntry wte = wte_entry(config_.shape.vocab, h);
  const ParamEntry wpe = wpe_entry(config_.shape.seq, h);
  const ParamEntry head = head_entry(config_.shape.vocab, h);
  if (!has_embedding() && !has_head()) return;
  for (const auto& [e, entry] : {std::pair{kWte, &wte}, std::pair{kHead, &head}}) {
    Tensor& w = values_[e];  // empty where this stage does not hold it
    for (std::int64_t r = 0; r < (w.empty() ? 0 : vocab_.rows); ++r) {
      const std::int64_t row = vocab_.begin + r;
      for (std::int64_t c = 0; c < h; ++c) {
        w.at({r, c}) = row < config_.shape.vocab
                           ? init_value(*entry, seed, config_.shape.layers, row * h + c)
                           : 0.0f;
      }
    }
  }
  for (std::int64_t g = 0; g < values_[kWpe].numel(); ++g) {
    values_[kWpe][g] = init_value(wpe, seed, config_.shape.layers, g);
  }
  values_[kLnfWeight].fill(1.0f);  // empty unless this stage has the head
  values_[kLnfBias].fill(0.0f);
}

void Gpt::load(const std::map<std::string, Tensor>& global, const std::string& source) {
  // Check every tensor first, so a bad file changes nothing.
  for (int p = 0; p < num_params(); ++p) {
    const auto it = global.find(name(p));
    MESHTP_CHECK(it != global.end(), "missing tensor '{}' in {}", name(p), source);
    MESHTP_CHECK(it->second.shape() == global_shape(p), "tensor '{}' in {} has shape {}, expected {}",
                 name(p), source, to_string(it->second.shape()), to_string(global_shape(p)));
  }
  for (int p = 0; p < num_params(); ++p) scatter(p, global.at(name(p)), value(p));
}

Tensor Gpt::gather(int p, const Tensor& local) const {
  const int e = extra(p);
  if (e < 0) {
    const ParamEntry& entry = stack_->param_table().at(static_cast<std::size_t>(p));
    return parallel::gather_param(entry.shard, local.values(), global_shape(p),
                                  stack_->param_mesh(p), entry.kv_heads);
  }
  if (e == kWpe) return local;
  if (e == kWte || e == kHead) {
    Tensor padded({vocab_.vocab, config_.shape.hidden});
    mesh_->comm().all_gather(local.values(), padded.values());
    padded.reshape({vocab_.vocab * config_.shape.hidden});
    Tensor out({config_.shape.vocab, config_.shape.hidden},
               std::vector<float>(padded.data(),
                                  padded.data() + config_.shape.vocab * config_.shape.hidden));
    return out;
  }
  return parallel::gather_param(parallel::ParamShard::kHidden, local.values(), global_shape(p),
                                *mesh_);
}

void Gpt::scatter(int p, const Tensor& global, Tensor& local) const {
  MESHTP_CHECK(global.shape() == global_shape(p), "parameter '{}': global shape {}, expected {}",
               name(p), to_string(global.shape()), to_string(global_shape(p)));
  const int e = extra(p);
  if (e < 0) {
    const ParamEntry& entry = stack_->param_table().at(static_cast<std::size_t>(p));
    parallel::scatter_param(entry.shard, global, stack_->param_mesh(p), local.values(),
                            entry.kv_heads);
  } else if (e == kWpe) {
    local = global;
  } else if (e == kWte || e == kHead) {
    for (std::int64_t r = 0; r < vocab_.rows; ++r) {
      for (std::int64_t c = 0; c < config_.shape.hidden; ++c) {
        const std::int64_t row = vocab_.begin + r;
        local.at({r, c}) = row < config_.shape.vocab ? global.at({row, c}) : 0.0f;
      }
    }
  } else {
    parallel::scatter_param(parallel::ParamShard::kHidden, global, *mesh_, local.values());
  }
}

namespace {

void copy_stream(std::span<const float> from, std::span<float> to, const char* what) {
  MESHTP_CHECK(from.size() == to.size(), "pipeline stage: {} of {} floats, expected {}", what,
               from.size(), to.size());
  meshtp::copy(from, to);
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

  if (has_embedding()) {
    parallel::vocab_embedding_forward(embedded_.matrix(), tokens_, values_[kWte].matrix(),
                                      vocab_, mesh_->comm());
    // Every sequence's rows += wpe (the position embedding, whole on every rank; none with
    // RoPE, which the blocks apply); under context parallelism row by row, at its position.
    const ConstMatrixView wpe = values_[kWpe].matrix();
    if (!token_of_row_.empty() && !values_[kWpe].empty()) {
      for (std::size_t r = 0; r < token_of_row_.size(); ++r) {
        const auto row = static_cast<std::int64_t>(r);
        const MatrixView x = embedded_.matrix().block(row, 0, 1, h);
        residual_forward(x, x, wpe.block(token_of_row_[r] % config_.shape.seq, 0, 1, h));
      }
    }
    for (std::int64_t b = 0; b < (values_[kWpe].empty() || !token_of_row_.empty()
                                      ? 0
                                      : config_.shape.batch);
         ++b) {
      const MatrixView rows =
          embedded_.matrix().block(b * config_.shape.seq, 0, config_.shape.seq, h);
      residual_forward(rows, rows, wpe);
    }
    parallel::slice_activation(embedded_.matrix(), shard, *mesh_, stack_->input().whole());
  } else {
    copy_stream(in, stack_->input().span(), "input");
  }
  stack_->forward();
  if (!has_head()) {
    copy_stream(stack_->output().span(), out, "output");
    return 0.0;
  }

  const MatrixView x_last = stack_->output().whole();
  parallel::norm_sharded_forward(config_.shape.norm, final_ln_.matrix(), ln_mean_, ln_rstd_, x_last,
                                 values_[kLnfWeight].values(), values_[kLnfBias].values(), h,
                                 stream_group(), ln_scratch_);
  parallel::gather_activation_into(*mesh_, final_ln_.matrix(), final_full_.matrix(), shard);
  return parallel::vocab_cross_entropy_forward(logits_.matrix(), lse_, final_full_.matrix(),
                                               values_[head()].matrix(), targets_, vocab_,
                                               mesh_->comm(), ce_stats_);
}

void Gpt::backward(float dloss, const std::function<void(int layer)>& on_layer_done,
                   std::span<const float> dout, std::span<float> din) {
  const parallel::ActivationShard shard = stack_->stream_shard();
  if (has_head()) {
    head_backward(dloss);
  } else {
    copy_stream(dout, stack_->grad_output().span(), "gradient");
  }
  // A mixture of experts' load-balancing losses are weighted as the loss is: L = dloss·(CE +
  // aux). Under context parallelism dloss also averages over the cp ranks (each holds 1/cp of
  // the tokens, its CE their mean), but one aux spans the whole tp·cp group and each rank's
  // backward gives its own tokens' share of its gradient, summed over cp: hence ·cp.
  stack_->set_aux_weight(static_cast<double>(dloss) * config_.layout.cp);
  stack_->backward(on_layer_done);
  if (!has_embedding()) {
    copy_stream(stack_->grad_input().span(), din, "input gradient");
    return;
  }
  // dfinal_full_ is free again: it takes the embedding's gradient, gathered.
  const std::int64_t h = config_.shape.hidden;
  Tensor& dembedded = dfinal_full_;
  parallel::gather_activation_into(*mesh_, stack_->grad_input().whole(), dembedded.matrix(),
                                   shard);
  parallel::vocab_embedding_backward(grads_[kWte].matrix(), dembedded.matrix(), tokens_, vocab_);
  if (!token_of_row_.empty() && !grads_[kWpe].empty()) {  // context parallelism: row by row
    for (std::size_t r = 0; r < token_of_row_.size(); ++r) {
      residual_accumulate(
          grads_[kWpe].matrix().block(token_of_row_[r] % config_.shape.seq, 0, 1, h),
          dembedded.matrix().block(static_cast<std::int64_t>(r), 0, 1, h));
    }
    return;
  }
  for (std::int64_t b = 0; b < (grads_[kWpe].empty() ? 0 : config_.shape.batch); ++b) {
    residual_accumulate(grads_[kWpe].matrix(),
                        dembedded.matrix().block(b * config_.shape.seq, 0, config_.shape.seq, h));
  }
}

// The loss's gradient back to the stack's output: cross-entropy, the gather, LayerNorm_f.
void Gpt::head_backward(float dloss) {
  const std::int64_t h = config_.shape.hidden;
  const parallel::ActivationShard shard = stack_->stream_shard();
  parallel::vocab_cross_entropy_backward(dfinal_full_.matrix(), grads_[head()].matrix(),
                                         logits_.matrix(), lse_, final_full_.matrix(),
                                         values_[head()].matrix(), targets_, vocab_,
                                         mesh_->comm(), dloss);
  // final_ln_ now holds this rank's block of ∂L/∂f.
  parallel::slice_activation(dfinal_full_.matrix(), shard, *mesh_, final_ln_.matrix());
  const MatrixView dx_last = stack_->grad_output().whole();
  zero(dx_last);
  // When the stream's rows are split over mesh dim 0 (sequence parallelism, the 2D GeMM
  // stack) each rank normalises only its own tokens: LayerNorm_f's parameter gradients are
  // partial sums over mesh dim 0.
  const bool rows_split = mesh::is_shard(shard.spec[0], 1) && mesh_->size(0) > 1;
  Tensor* dw = &grads_[kLnfWeight];
  Tensor* db = &grads_[kLnfBias];
  if (rows_split) {
    lnf_partial_[0].fill(0.0f);
    lnf_partial_[1].fill(0.0f);
    dw = &lnf_partial_[0];
    db = &lnf_partial_[1];
  }
  parallel::norm_sharded_backward(config_.shape.norm, dx_last, dw->values(), db->values(),
                                  final_ln_.matrix(), stack_->output().whole(),
                                  values_[kLnfWeight].values(), ln_mean_, ln_rstd_, h,
                                  stream_group(), ln_scratch_);
  if (rows_split) {
    for (int k = 0; k < (rms() ? 1 : 2); ++k) {
      mesh_->dim_comm(0).all_reduce(lnf_partial_[k].values());
      Tensor& g = grads_[kLnfWeight + k];
      for (std::int64_t i = 0; i < g.numel(); ++i) g[i] += lnf_partial_[k][i];
    }
  }
}

}  // namespace meshtp::model
