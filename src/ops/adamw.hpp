// The AdamW update of one parameter tensor, elementwise: the one host implementation of
// core/adamw_step.hpp's formula (Loshchilov & Hutter, decoupled weight decay). train/adamw.hpp
// runs it over every parameter shard of a rank, CpuBackend over a model's tensors.
//
// adamw_update runs the selected kernel table (kernels.hpp); the tests hold it to their own
// serial loop (tests/adamw_reference.hpp).
#pragma once

#include <span>

#include "ops/kernels.hpp"

namespace meshtp {

// p, g, m, v: one value each per parameter element (same length).
void adamw_update(std::span<float> p, std::span<const float> g, std::span<float> m,
                  std::span<float> v, const kernels::AdamWStep& step);

}  // namespace meshtp
