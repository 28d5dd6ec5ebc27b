// The AdamW update of one parameter tensor, elementwise (Loshchilov & Hutter, decoupled
// weight decay); train/adamw.hpp runs it over every parameter shard of a rank.
//
//   m ← β1·m + (1−β1)·g            v ← β2·v + (1−β2)·g²
//   p ← p − lr·( (m/(1−β1ᵗ)) / (√(v/(1−β2ᵗ)) + ε) + λ·p )
//
// adamw_update runs the fast kernel (kernels.hpp); adamw_update_reference is the naive
// scalar loop the tests hold it to.
#pragma once

#include <span>

#include "ops/kernels.hpp"

namespace meshtp {

// p, g, m, v: one value each per parameter element (same length).
void adamw_update(std::span<float> p, std::span<const float> g, std::span<float> m,
                  std::span<float> v, const kernels::AdamWStep& step);

void adamw_update_reference(std::span<float> p, std::span<const float> g, std::span<float> m,
                            std::span<float> v, const kernels::AdamWStep& step);

}  // namespace meshtp
