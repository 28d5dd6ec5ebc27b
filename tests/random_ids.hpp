// Token ids for the tests: n ids in [0, vocab), uniform from a seed (tensor/random.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/random.hpp"

namespace meshtp::testing {

inline std::vector<std::int32_t> random_ids(std::int64_t n, std::int64_t vocab,
                                            std::uint64_t seed) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    out[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(
        static_cast<std::int64_t>((uniform_at(seed, i) + 1.0f) * 0.5f * vocab) % vocab);
  }
  return out;
}

}  // namespace meshtp::testing
