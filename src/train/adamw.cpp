#include "train/adamw.hpp"

#include <cmath>

#include "core/error.hpp"

namespace meshtp::train {

AdamW::AdamW(device::Backend& backend, std::vector<ParamRef> params, AdamWConfig config)
    : backend_(&backend), params_(std::move(params)), config_(config) {
  MESHTP_CHECK(config_.beta1 >= 0 && config_.beta1 < 1 && config_.beta2 >= 0 &&
                   config_.beta2 < 1 && config_.eps > 0 && config_.weight_decay >= 0,
               "AdamW: beta1={} and beta2={} must be in [0, 1), eps={} positive, "
               "weight_decay={} non-negative",
               config_.beta1, config_.beta2, config_.eps, config_.weight_decay);
  for (const ParamRef& p : params_) {
    MESHTP_CHECK(p.value != nullptr && p.grad != nullptr && p.value->count() == p.grad->count(),
                 "AdamW: parameter '{}' has no value/gradient or their sizes differ", p.name);
    MESHTP_CHECK(p.replicas >= 1, "AdamW: parameter '{}' has replicas={}", p.name, p.replicas);
    for (std::vector<device::Array>* moments : {&m_, &v_}) {
      moments->push_back(backend.alloc(p.value->count(), Element::kF32));
      backend.zero(moments->back());
    }
  }
}

void AdamW::step(float lr) {
  ++steps_;
  std::vector<AdamWTensor> tensors;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    tensors.push_back({*params_[i].value, *params_[i].grad, m_[i], v_[i], params_[i].decay});
  }
  adamw_update(*backend_, tensors, config_, lr, steps_);
}

void adamw_update(device::Backend& backend, std::span<const AdamWTensor> tensors,
                  const AdamWConfig& config, float lr, std::int64_t t) {
  // Elementwise, so the order of the tensors is free: one batch per kind.
  for (const bool decays : {true, false}) {
    std::vector<device::AdamWParam> batch;
    for (const AdamWTensor& x : tensors) {
      if (x.decays == decays && x.p.count() > 0) batch.push_back({x.p, x.g, x.m, x.v, x.p});
    }
    if (!batch.empty()) backend.adamw_update(batch, config.at(lr, t, decays));
  }
}

double squared_norm_shares(device::Backend& backend, std::span<const NormShare> shares) {
  std::vector<device::Array> plain;
  std::vector<int> plain_replicas;
  double sum = 0.0;
  for (const NormShare& s : shares) {
    if (s.norm_weight == nullptr) {
      plain.push_back(s.g);
      plain_replicas.push_back(s.replicas);
      continue;
    }
    // Replicated KV heads: each element's own share, on the host (one layer's few KV rows).
    sum += device::read_on_host(backend, s.g, [&](std::span<const float> x) {
      double share = 0.0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        share += static_cast<double>(x[i]) * x[i] *
                 (*s.norm_weight)[s.offset + static_cast<std::int64_t>(i)];
      }
      return share / s.replicas;
    });
  }
  const std::vector<double> squares = backend.sums_of_squares(plain);
  for (std::size_t i = 0; i < squares.size(); ++i) sum += squares[i] / plain_replicas[i];
  return sum;
}

double global_grad_norm(device::Backend& backend, const std::vector<ParamRef>& params,
                        const comm::Communicator& world) {
  std::vector<NormShare> shares;
  for (const ParamRef& p : params) shares.push_back({*p.grad, p.replicas, p.norm_weight});
  double local = squared_norm_shares(backend, shares);
  world.all_reduce(std::span<double>(&local, 1));
  return std::sqrt(local);
}

double clip_gradients(device::Backend& backend, const std::vector<ParamRef>& params, double norm,
                      double max_norm) {
  if (max_norm <= 0.0 || !(norm > max_norm)) return 1.0;
  const auto scale = static_cast<float>(max_norm / norm);
  for (const ParamRef& p : params) backend.scale(*p.grad, scale);
  return scale;
}

}  // namespace meshtp::train
