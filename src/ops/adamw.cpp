#include "ops/adamw.hpp"

#include <cmath>
#include <cstdint>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"

namespace meshtp {
namespace {

void check(std::span<float> p, std::span<const float> g, std::span<float> m, std::span<float> v) {
  MESHTP_CHECK(g.size() == p.size() && m.size() == p.size() && v.size() == p.size(),
               "adamw_update: {} values, {} gradients, {} first and {} second moments", p.size(),
               g.size(), m.size(), v.size());
}

}  // namespace

void adamw_update(std::span<float> p, std::span<const float> g, std::span<float> m,
                  std::span<float> v, const kernels::AdamWStep& step) {
  check(p, g, m, v);
  // Simulated build, charged mode: the time instead of the work (core/simulation.hpp).
  if (simhooks::charge_fp32_bytes(
          op_costs::bytes(static_cast<double>(p.size()), op_costs::kAdamWTouches))) {
    return;
  }
  kernels::fast().adamw(p.data(), g.data(), m.data(), v.data(),
                        static_cast<std::int64_t>(p.size()), step);
}

void adamw_update_reference(std::span<float> p, std::span<const float> g, std::span<float> m,
                            std::span<float> v, const kernels::AdamWStep& s) {
  check(p, g, m, v);
  for (std::size_t k = 0; k < p.size(); ++k) {
    m[k] = s.beta1 * m[k] + (1.0f - s.beta1) * g[k];
    v[k] = s.beta2 * v[k] + (1.0f - s.beta2) * g[k] * g[k];
    const float m_hat = m[k] / s.bias1;
    const float v_hat = v[k] / s.bias2;
    p[k] -= s.lr * (m_hat / (std::sqrt(v_hat) + s.eps) + s.decay * p[k]);
  }
}

}  // namespace meshtp
