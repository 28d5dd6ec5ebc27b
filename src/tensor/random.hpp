// Deterministic pseudo-random values that depend only on (seed, element index).
//
// Every rank can produce any element of a global tensor without communication, and the
// values do not depend on the mesh: weights initialised on mesh (2,2) equal those on (4,1).
// The generator is SplitMix64 applied to seed·φ + index, a counter-based scheme.
#pragma once

#include <cstdint>

#include "tensor/tensor.hpp"

namespace meshtp {

// Uniform in [-1, 1).
float uniform_at(std::uint64_t seed, std::uint64_t index);
// Standard normal (Box–Muller on two uniforms of this index).
float normal_at(std::uint64_t seed, std::uint64_t index);

Tensor uniform_tensor(Shape shape, std::uint64_t seed, float scale = 1.0f);
Tensor normal_tensor(Shape shape, std::uint64_t seed, float stddev = 1.0f);

}  // namespace meshtp
