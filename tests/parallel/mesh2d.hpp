// Every 2-D mesh (d1, d2) with d1·d2 = N: ATP's search space for N ranks.
#pragma once

#include <vector>

namespace meshtp::parallel {

inline std::vector<std::vector<int>> meshes2d(int world_size) {
  std::vector<std::vector<int>> out;
  for (int d1 = world_size; d1 >= 1; --d1) {
    if (world_size % d1 == 0) out.push_back({d1, world_size / d1});
  }
  return out;
}

}  // namespace meshtp::parallel
