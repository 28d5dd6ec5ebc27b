#include "train/adamw.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "ops/adamw.hpp"
#include "ops/kernels.hpp"

namespace meshtp::train {

AdamW::AdamW(std::vector<ParamRef> params, AdamWConfig config)
    : params_(std::move(params)), config_(config) {
  MESHTP_CHECK(config_.beta1 >= 0 && config_.beta1 < 1 && config_.beta2 >= 0 &&
                   config_.beta2 < 1 && config_.eps > 0 && config_.weight_decay >= 0,
               "AdamW: beta1={} and beta2={} must be in [0, 1), eps={} positive, "
               "weight_decay={} non-negative",
               config_.beta1, config_.beta2, config_.eps, config_.weight_decay);
  for (const ParamRef& p : params_) {
    MESHTP_CHECK(p.value != nullptr && p.grad != nullptr && p.value->shape() == p.grad->shape(),
                 "AdamW: parameter '{}' has no value/gradient or their shapes differ", p.name);
    MESHTP_CHECK(p.replicas >= 1, "AdamW: parameter '{}' has replicas={}", p.name, p.replicas);
    m_.emplace_back(p.value->shape());
    v_.emplace_back(p.value->shape());
  }
}

void AdamW::step(float lr) {
  ++steps_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const AdamWStep step = config_.at(lr, steps_, params_[i].decay);
    adamw_update(params_[i].value->values(), params_[i].grad->values(), m_[i].values(),
                 v_[i].values(), step);
  }
}

double global_grad_norm(const std::vector<ParamRef>& params, const comm::Communicator& world) {
  double local = 0.0;
  for (const ParamRef& p : params) {
    const auto g = p.grad->values();
    // Simulated build, charged mode: one read of every gradient, in simulated time; sum 0.
    if (simhooks::charge_fp32_bytes(
            op_costs::bytes(static_cast<double>(g.size()), op_costs::kGradNormTouches))) {
      continue;
    }
    if (p.norm_weight != nullptr) {
      const auto w = p.norm_weight->values();
      double sum = 0.0;
      for (std::size_t i = 0; i < g.size(); ++i) sum += static_cast<double>(g[i]) * g[i] * w[i];
      local += sum / p.replicas;
      continue;
    }
    local += kernels::fast().moments(g.data(), static_cast<std::int64_t>(g.size())).second /
             p.replicas;
  }
  world.all_reduce(std::span<double>(&local, 1));
  return std::sqrt(local);
}

double clip_gradients(const std::vector<ParamRef>& params, double norm, double max_norm) {
  if (max_norm <= 0.0 || !(norm > max_norm)) return 1.0;
  const auto scale = static_cast<float>(max_norm / norm);
  for (const ParamRef& p : params) {
    const auto g = p.grad->values();
    if (simhooks::charge_fp32_bytes(
            op_costs::bytes(static_cast<double>(g.size()), op_costs::kClipTouches))) {
      continue;
    }
    kernels::fast().scale(g.data(), static_cast<std::int64_t>(g.size()), scale);
  }
  return scale;
}

}  // namespace meshtp::train
