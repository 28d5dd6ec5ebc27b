#include "train/adamw.hpp"

#include <cmath>

#include "core/error.hpp"

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
  const auto t = static_cast<double>(steps_);
  const float bias1 = static_cast<float>(1.0 - std::pow(config_.beta1, t));
  const float bias2 = static_cast<float>(1.0 - std::pow(config_.beta2, t));
  const float b1 = config_.beta1;
  const float b2 = config_.beta2;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    float* p = params_[i].value->data();
    const float* g = params_[i].grad->data();
    float* m = m_[i].data();
    float* v = v_[i].data();
    const float decay = params_[i].decay ? config_.weight_decay : 0.0f;
    const std::int64_t n = params_[i].value->numel();
    for (std::int64_t k = 0; k < n; ++k) {
      m[k] = b1 * m[k] + (1.0f - b1) * g[k];
      v[k] = b2 * v[k] + (1.0f - b2) * g[k] * g[k];
      const float m_hat = m[k] / bias1;
      const float v_hat = v[k] / bias2;
      p[k] -= lr * (m_hat / (std::sqrt(v_hat) + config_.eps) + decay * p[k]);
    }
  }
}

double global_grad_norm(const std::vector<ParamRef>& params, const comm::Communicator& world) {
  double local = 0.0;
  for (const ParamRef& p : params) {
    double sum = 0.0;
    for (const float g : p.grad->values()) sum += static_cast<double>(g) * g;
    local += sum / p.replicas;
  }
  world.all_reduce(std::span<double>(&local, 1));
  return std::sqrt(local);
}

double clip_gradients(const std::vector<ParamRef>& params, double norm, double max_norm) {
  if (max_norm <= 0.0 || !(norm > max_norm)) return 1.0;
  const auto scale = static_cast<float>(max_norm / norm);
  for (const ParamRef& p : params) {
    for (float& g : p.grad->values()) g *= scale;
  }
  return scale;
}

}  // namespace meshtp::train
