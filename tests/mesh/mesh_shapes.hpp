// The mesh shapes the issue asks every mesh test to cover, filtered to the world size, plus
// the 1-D and degenerate ones of that size.
#pragma once

#include <algorithm>
#include <vector>

namespace meshtp::mesh {

inline std::vector<std::vector<int>> meshes_for(int world_size) {
  const std::vector<std::vector<int>> wanted{{4},    {2, 2}, {1, 4}, {4, 1},    {2, 4},
                                             {4, 2}, {2, 2, 2}, {1, 2}, {2, 1}, {1, 1, 2},
                                             {world_size}, {1, world_size}, {world_size, 1}};
  std::vector<std::vector<int>> out;
  for (const auto& shape : wanted) {
    int n = 1;
    for (const int d : shape) n *= d;
    if (n == world_size && std::find(out.begin(), out.end(), shape) == out.end()) {
      out.push_back(shape);
    }
  }
  return out;
}

}  // namespace meshtp::mesh
