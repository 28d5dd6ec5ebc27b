// Random global weights for block-stack tests: every parameter random and away from its
// init (LayerNorm weights near 1, biases non-zero), so a misplaced shard of any of them shows.
#pragma once

#include <map>
#include <string>

#include "model/params.hpp"
#include "tensor/random.hpp"

namespace meshtp::model {

inline std::map<std::string, Tensor> random_weights(int layers, std::int64_t hidden,
                                                    std::uint64_t seed) {
  std::map<std::string, Tensor> w;
  for (const ParamEntry& e : stack_param_table(layers, hidden)) {
    Tensor t = uniform_tensor(e.shape, ++seed, e.shape.size() == 2 ? 0.3f : 0.2f);
    if (e.init == Init::kOnes) {
      for (auto& v : t.values()) v += 1.0f;
    }
    w.emplace(e.name, std::move(t));
  }
  return w;
}

}  // namespace meshtp::model
