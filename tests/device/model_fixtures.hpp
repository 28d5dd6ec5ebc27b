// Random weights, token ids and error messages for the device model tests (CPU and GPU), and
// a block's fields by the parameter table's suffix ("attn.qkv.weight", model/params.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "device/block_stack.hpp"
#include "device/single_device_gpt.hpp"
#include "random_ids.hpp"
#include "tensor/random.hpp"

namespace meshtp::device::test {

// count values offset + N(0, stddev²).
inline std::vector<float> random_values(std::int64_t count, std::uint64_t seed, float stddev,
                                        float offset = 0.0f) {
  const Tensor t = normal_tensor({count}, seed, stddev);
  std::vector<float> out(t.values().begin(), t.values().end());
  for (float& x : out) x += offset;
  return out;
}

using testing::random_ids;  // tests/random_ids.hpp

// Matrices N(0, 0.05²), biases N(0, 0.02²), LayerNorm weights 1 + N(0, 0.1²) and biases
// N(0, 0.1²): every term of every gradient is non-zero, so a dropped "+=" shows.
inline std::vector<BlockWeights> random_block_weights(int layers, std::int64_t c,
                                                      std::uint64_t seed) {
  std::vector<BlockWeights> out;
  for (int l = 0; l < layers; ++l) {
    out.push_back(BlockWeights{.ln1_w = random_values(c, seed++, 0.1f, 1.0f),
                               .ln1_b = random_values(c, seed++, 0.1f),
                               .qkv_w = random_values(3 * c * c, seed++, 0.05f),
                               .qkv_b = random_values(3 * c, seed++, 0.02f),
                               .proj_w = random_values(c * c, seed++, 0.05f),
                               .proj_b = random_values(c, seed++, 0.02f),
                               .ln2_w = random_values(c, seed++, 0.1f, 1.0f),
                               .ln2_b = random_values(c, seed++, 0.1f),
                               .mlp1_w = random_values(4 * c * c, seed++, 0.05f),
                               .mlp1_b = random_values(4 * c, seed++, 0.02f),
                               .mlp2_w = random_values(4 * c * c, seed++, 0.05f),
                               .mlp2_b = random_values(c, seed++, 0.02f)});
  }
  return out;
}

// The blocks as above; embeddings N(0, 0.1²), the final LayerNorm like the blocks'.
inline GptWeights random_gpt_weights(const layout::ModelShape& shape, std::uint64_t seed) {
  const std::int64_t c = shape.hidden;
  return {.wte = random_values(shape.vocab * c, seed, 0.1f),
          .wpe = random_values(shape.seq * c, seed + 1, 0.1f),
          .blocks = random_block_weights(static_cast<int>(shape.layers), c, seed + 2),
          .lnf_w = random_values(c, seed + 1000, 0.1f, 1.0f),
          .lnf_b = random_values(c, seed + 1001, 0.1f)};
}

inline std::map<std::string, std::vector<float>> fields(const BlockWeights& w) {
  std::map<std::string, std::vector<float>> out;
  const auto values = device::fields(w);
  for (int i = 0; i < kBlockParams; ++i) out.emplace(kBlockParamNames[i], *values[i]);
  return out;
}

// What f() throws as meshtp::Error, or "no error".
template <typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace meshtp::device::test
