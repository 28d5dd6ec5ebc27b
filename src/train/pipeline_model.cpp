#include "train/pipeline_model.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "core/error.hpp"
#include "core/trace.hpp"
#include "train/pipeline_run.hpp"

namespace meshtp::train {
namespace {

mesh::DeviceMesh layout_mesh(const comm::Communicator& world, const layout::Plan& p) {
  return mesh::DeviceMesh(world, {p.dp, p.pp, p.cp, p.mesh[0], p.mesh[1]});
}

// The tied-embedding group of a replica: its first and last pipeline ranks (one rank when pp
// is 1), ordered by pipeline rank; every other pipeline rank a group of its own. Played alone
// (`meshtp bench rank`), the group this rank would be in.
comm::Communicator tie_group(const mesh::DeviceMesh& mesh, int pp) {
  const int r = mesh.coord(1);
  const bool ends = r == 0 || r + 1 == pp;
  if (mesh.is_alone()) {
    return mesh.comm().alone_group(ends && r > 0 ? 1 : 0, ends && pp > 1 ? 2 : 1, "tied-embedding");
  }
  return mesh.dim_comm(1).split(ends ? 0 : 1 + r, r, "tied-embedding");
}

}  // namespace

PipelineModel::PipelineModel(const comm::Communicator& world, const model::GptConfig& config,
                             int zero, const AdamWConfig& adamw)
    : mesh_(layout_mesh(world, config.layout)),
      tp_mesh_(mesh_.submesh({3, 4})),
      replicas_(mesh_.submesh({0, 2})),
      fold_(mesh_.submesh({2, 3, 4})),
      tie_(tie_group(mesh_, config.layout.pp)),
      schedule_(layout::make_schedule(config.layout.schedule, config.layout.pp,
                                      config.layout.microbatches, config.layout.virtual_stages)) {
  const layout::Plan& p = config.layout;
  MESHTP_CHECK(config.shape.batch % (p.dp * p.microbatches) == 0,
               "batch={} does not split into dp={} × microbatches={}: make dp·microbatches "
               "divide the batch",
               config.shape.batch, p.dp, p.microbatches);
  rows_ = config.shape.batch / p.dp;
  microbatch_rows_ = rows_ / p.microbatches;
  seq_ = config.shape.seq;
  for (int k = 0; k < p.virtual_stages; ++k) {
    model::GptConfig c = config;
    c.shape.batch = microbatch_rows_;
    c.stage = k * p.pp + mesh_.coord(1);
    if (p.cp > 1) {
      c.cp_group = &mesh_.dim_comm(2);
      c.fold_group = &fold_.comm();
    }
    gpts_.push_back(std::make_unique<model::Gpt>(tp_mesh_, c));
    // Experts folded over tp·cp hold a shard of their own on each cp rank: the ranks holding
    // the same shard (the expert-data-parallel group) are the dp replicas alone.
    fold_experts_ = p.cp > 1 && config.shape.is_moe();
    dps_.push_back(std::make_unique<DataParallel>(*gpts_.back(), replicas_.comm(), zero, adamw,
                                                  fold_experts_ ? &mesh_.dim_comm(0) : nullptr));
  }
  for (const auto& g : gpts_) {
    if (!g->has_head()) scratch_out_ = g->backend().alloc(g->stream_floats(), Element::kF32);
  }
}

std::vector<std::string> describe_layout(const layout::Plan& p, int layers) {
  const int tp = p.mesh[0] * p.mesh[1], stages = p.pp * p.virtual_stages;
  std::vector<std::string> out;
  if (p.cp == 1) {
    out.push_back(fmt::format(
        "world rank = ((r_dp·{} + r_pp)·{} + i)·{} + j: tp groups of {} consecutive ranks, "
        "pipeline groups of {} (stride {}), data-parallel groups of {} (stride {})",
        p.pp, p.mesh[0], p.mesh[1], tp, p.pp, tp, p.dp, p.pp * tp));
  } else {
    out.push_back(fmt::format(
        "world rank = (((r_dp·{} + r_pp)·{} + r_cp)·{} + i)·{} + j: tp groups of {} consecutive "
        "ranks, context-parallel groups of {} (stride {}; {}), pipeline groups of {} (stride "
        "{}), data-parallel groups of {} (stride {}); gradients summed over dp·cp = {} ranks",
        p.pp, p.cp, p.mesh[0], p.mesh[1], tp, p.cp, tp, p.cp_comm, p.pp, tp * p.cp, p.dp,
        p.pp * p.cp * tp, p.dp * p.cp));
  }
  std::string line;
  for (int s = 0; s < stages; ++s) {
    const int r = s % p.pp, per = layers / stages;
    line += fmt::format("{}stage {}: layers {}–{}{}{} on pipeline rank {} (ranks {}–{}{})",
                        s == 0 ? "" : "; ", s, s * per, (s + 1) * per - 1,
                        s == 0 ? " + embedding" : "", s + 1 == stages ? " + head" : "", r,
                        r * tp * p.cp, (r + 1) * tp * p.cp - 1,
                        p.dp > 1 ? fmt::format(" of replica 0") : "");
  }
  out.push_back(line);
  return out;
}

std::int64_t PipelineModel::global_parameters() const {
  double n = 0;
  for (const auto& g : gpts_) {
    for (int p = 0; p < g->num_params(); ++p) {
      // The tied embedding counts once: on stage 0.
      if (g->is_tied_embedding(p) && !g->has_embedding()) continue;
      n += static_cast<double>(numel(g->global_shape(p)));
    }
  }
  mesh_.dim_comm(1).all_reduce(std::span<double>(&n, 1));
  return static_cast<std::int64_t>(n);
}

void PipelineModel::init(std::uint64_t seed) {
  for (auto& g : gpts_) g->init(seed);
  for (auto& dp : dps_) dp->parameters_written();
}

void PipelineModel::sum_tied_embedding() {
  const int pp = mesh_.size(1), r = mesh_.coord(1);
  if (model::pipeline_stages(gpts_.front()->config().layout) == 1) return;  // one wte, whole
  if (!gpts_.front()->config().shape.tie_embeddings) return;  // lm_head: the last stage's own
  const auto wte_grad = [](model::Gpt& g) -> device::Array& {
    for (int p = 0; p < g.num_params(); ++p) {
      if (g.is_tied_embedding(p)) return g.grad(p);
    }
    fail("pipeline: stage {} holds no token embedding", g.config().stage);
  };
  if (pp == 1) {  // stages 0 and S−1 are this rank's first and last chunks: b += a, a = b
    device::Backend& be = gpts_.front()->backend();
    const device::Array& a = wte_grad(*gpts_.front());
    const device::Array& b = wte_grad(*gpts_.back());
    be.add(b.view(1, b.count()), a.view(1, a.count()));
    be.copy(a.view(1, a.count()), b.view(1, b.count()));
    return;
  }
  if (r == 0) tie_.all_reduce(device::floats(wte_grad(*gpts_.front())));
  if (r == pp - 1) tie_.all_reduce(device::floats(wte_grad(*gpts_.back())));
}

double PipelineModel::run(std::span<const std::int32_t> tokens,
                          std::span<const std::int32_t> targets, bool train) {
  const int pp = mesh_.size(1), m = schedule_.microbatches, v = chunks();
  const std::int64_t per = microbatch_rows_ * seq_;
  MESHTP_CHECK(static_cast<std::int64_t>(tokens.size()) == rows_ * seq_ &&
                   tokens.size() == targets.size(),
               "pipeline: {} tokens and {} targets for {} rows × seq {}", tokens.size(),
               targets.size(), rows_, seq_);
  const auto mb = [&](std::span<const std::int32_t> all, int i) {
    return all.subspan(static_cast<std::size_t>(i * per), static_cast<std::size_t>(per));
  };
  const float dloss = 1.0f / static_cast<float>(replicas_.size() * m);
  double loss = 0.0;
  std::vector<int> last_forward(static_cast<std::size_t>(v), -1), backwards(static_cast<std::size_t>(v), 0);
  // Per chunk, per microbatch, in the backend's memory.
  std::vector<std::map<int, device::Array>> inputs(static_cast<std::size_t>(v));
  device::Backend& be = gpts_.front()->backend();
  if (train) {
    for (auto& g : gpts_) g->zero_grads();
  }
  PipelineStages fns;
  fns.message_floats = gpts_.front()->stream_floats();
  fns.backend = &be;
  fns.forward = [&](int i, int stage, std::span<const float> in, std::span<float> out) {
    const ScopedSpan span("forward", SpanKind::kPhase);
    const auto k = static_cast<std::size_t>(stage / pp);
    if (train && !in.empty()) {
      const auto n = static_cast<std::int64_t>(in.size());
      device::Array saved = be.alloc(n, Element::kF32);
      // The CPU's copy skips what nobody reads (the simulated build's kCharged).
      be.copy(saved.view(1, n), View::packed(const_cast<float*>(in.data()), Element::kF32, 1, n));
      inputs[k][i] = std::move(saved);
    }
    loss += gpts_[k]->forward(mb(tokens, i), mb(targets, i), in, out);
    last_forward[k] = i;
  };
  fns.backward = [&](int i, int stage, std::span<const float> dout, std::span<float> din) {
    if (!train) return;  // evaluation: nothing flows back (din is sent, unread)
    const ScopedSpan span("backward", SpanKind::kPhase);
    const auto k = static_cast<std::size_t>(stage / pp);
    model::Gpt& g = *gpts_[k];
    if (last_forward[k] != i) {  // rematerialise F(i, stage) from its saved input
      const auto it = inputs[k].find(i);
      const std::span<const float> in = it == inputs[k].end()
                                            ? std::span<const float>()
                                            : std::span<const float>(device::floats(it->second));
      g.forward(mb(tokens, i), mb(targets, i), in,
                g.has_head() ? std::span<float>() : device::floats(scratch_out_));
    }
    inputs[k].erase(i);
    last_forward[k] = -1;
    DataParallel& dp = *dps_[k];
    // Stages 0–1 reduce once the chunk's gradients are final (after its last backward);
    // stage ≥ 2 reduces every microbatch's into the sharded accumulators (train/zero.hpp).
    const bool last = ++backwards[k] == m;
    const bool reduce = last || dp.reduces_every_microbatch();
    g.backward(dloss,
               reduce ? std::function<void(int)>([&dp](int layer) { dp.start(layer); })
                      : std::function<void(int)>(),
               dout, din);
    dp.backward_done();
  };
  run_pipeline(schedule_, mesh_.dim_comm(1), fns);
  if (train) {
    sum_tied_embedding();
    for (auto& dp : dps_) dp->start_last();
    for (auto& dp : dps_) dp->finish();
  }
  // Only the last stage computed losses: sum over the pipeline, then the replicas and the
  // context-parallel ranks (each the mean of as many tokens).
  mesh_.dim_comm(1).all_reduce(std::span<double>(&loss, 1));
  replicas_.comm().all_reduce(std::span<double>(&loss, 1));
  return loss / (replicas_.size() * m);
}

double PipelineModel::forward_backward(std::span<const std::int32_t> tokens,
                                       std::span<const std::int32_t> targets) {
  return run(tokens, targets, true);
}

double PipelineModel::loss(std::span<const std::int32_t> tokens,
                           std::span<const std::int32_t> targets) {
  return run(tokens, targets, false);
}

ModelParts PipelineModel::checkpoint_parts(bool saving) {
  ModelParts parts;
  for (int k = 0; k < chunks(); ++k) {
    DataParallel& dp = *dps_[static_cast<std::size_t>(k)];
    parts.push_back({&chunk(k), saving ? &dp.optimizer_to_save() : &dp.optimizer_to_load()});
  }
  return parts;
}

void PipelineModel::checkpoint_done(bool saving) {
  for (auto& dp : dps_) saving ? dp->saved() : dp->loaded();
}

double PipelineModel::grad_norm(const comm::Communicator& world) const {
  double squares = 0.0;
  for (const auto& dp : dps_) {
    const double n = dp->grad_norm(world);
    squares += n * n;
  }
  return std::sqrt(squares);
}

void PipelineModel::clip(double norm, double max_norm) {
  for (auto& dp : dps_) dp->clip(norm, max_norm);
}

void PipelineModel::step(float lr) {
  for (auto& dp : dps_) dp->step(lr);
}

}  // namespace meshtp::train
