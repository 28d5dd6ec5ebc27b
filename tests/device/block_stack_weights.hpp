// Random block weights for the block-stack tests (CPU and GPU), and their fields by the
// parameter table's suffix ("attn.qkv.weight", model/params.hpp).
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "device/block_stack.hpp"
#include "tensor/random.hpp"

namespace meshtp::device::test {

// Matrices N(0, 0.05²), biases N(0, 0.02²), LayerNorm weights 1 + N(0, 0.1²) and biases
// N(0, 0.1²): every term of every gradient is non-zero, so a dropped "+=" shows.
inline std::vector<BlockWeights> random_block_weights(int layers, std::int64_t c,
                                                      std::uint64_t seed) {
  auto values = [&](std::int64_t count, float stddev, float offset) {
    const Tensor t = normal_tensor({count}, seed++, stddev);
    std::vector<float> v(t.values().begin(), t.values().end());
    for (float& x : v) x += offset;
    return v;
  };
  std::vector<BlockWeights> out;
  for (int l = 0; l < layers; ++l) {
    out.push_back(BlockWeights{.ln1_w = values(c, 0.1f, 1.0f),
                               .ln1_b = values(c, 0.1f, 0.0f),
                               .qkv_w = values(3 * c * c, 0.05f, 0.0f),
                               .qkv_b = values(3 * c, 0.02f, 0.0f),
                               .proj_w = values(c * c, 0.05f, 0.0f),
                               .proj_b = values(c, 0.02f, 0.0f),
                               .ln2_w = values(c, 0.1f, 1.0f),
                               .ln2_b = values(c, 0.1f, 0.0f),
                               .mlp1_w = values(4 * c * c, 0.05f, 0.0f),
                               .mlp1_b = values(4 * c, 0.02f, 0.0f),
                               .mlp2_w = values(4 * c * c, 0.05f, 0.0f),
                               .mlp2_b = values(c, 0.02f, 0.0f)});
  }
  return out;
}

inline std::map<std::string, std::vector<float>> fields(const BlockWeights& w) {
  std::map<std::string, std::vector<float>> out;
  const auto values = device::fields(w);
  for (int i = 0; i < kBlockParams; ++i) out.emplace(kBlockParamNames[i], *values[i]);
  return out;
}

}  // namespace meshtp::device::test
