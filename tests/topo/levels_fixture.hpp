// Hierarchical levels for the topo tests (designated initializers would have to name every
// field under -Wextra).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "topo/levels.hpp"

namespace meshtp::topo {

inline Level level(std::string name, int members, double group_gbps, double latency_us,
                   double p2p_gbps = 0) {
  Level l;
  l.name = std::move(name);
  l.members = members;
  l.group_gbps = group_gbps;
  l.latency_us = latency_us;
  l.p2p_uniform_gbps = p2p_gbps;
  return l;
}

// ATP Fig. 7a: 4 nodes on 25 GB/s HDR, 4 GPUs per node with 200 GB/s NVLink P2P.
inline std::vector<Level> fig7a_levels() {
  return {level("node", 4, 25, 8), level("gpu", 4, 600, 3, 200)};
}

}  // namespace meshtp::topo
