#include "ops/adamw.hpp"

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

}  // namespace meshtp
