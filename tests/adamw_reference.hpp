// adamw_reference: the tests' independent oracle for AdamW, the formula of
// core/adamw_step.hpp as a naive serial loop, written apart from the one host implementation
// (ops/adamw.hpp's adamw_update over the kernels of ops/kernels.hpp) and the GPU's kernel
// (device/kernels.cu) that the tests hold to it.
//
//   m ← β1·m + (1−β1)·g            v ← β2·v + (1−β2)·g²
//   p ← p − lr·( (m/bias1) / (√(v/bias2) + ε) + decay·p )      bias1 = 1−β1ᵗ, bias2 = 1−β2ᵗ
#pragma once

#include <cmath>
#include <cstddef>
#include <span>

#include "core/adamw_step.hpp"
#include "core/error.hpp"

namespace meshtp::test_support {

// p, g, m, v: one value each per parameter element (same length).
inline void adamw_reference(std::span<float> p, std::span<const float> g, std::span<float> m,
                            std::span<float> v, const AdamWStep& s) {
  MESHTP_CHECK(g.size() == p.size() && m.size() == p.size() && v.size() == p.size(),
               "adamw_reference: {} values, {} gradients, {} first and {} second moments", p.size(),
               g.size(), m.size(), v.size());
  for (std::size_t k = 0; k < p.size(); ++k) {
    m[k] = s.beta1 * m[k] + (1.0f - s.beta1) * g[k];
    v[k] = s.beta2 * v[k] + (1.0f - s.beta2) * g[k] * g[k];
    const float m_hat = m[k] / s.bias1;
    const float v_hat = v[k] / s.bias2;
    p[k] -= s.lr * (m_hat / (std::sqrt(v_hat) + s.eps) + s.decay * p[k]);
  }
}

}  // namespace meshtp::test_support
