// Switched networks as graphs: one switch (NVSwitch, an NVLink-Network switch), fat trees
// and dragonflies. Every link is split-duplex (`gbps` per direction).
//
// Switch. N devices, each with one link of `link_gbps` to one router "switch": a ring hop
// crosses the sender's uplink and the receiver's downlink, so every ring of every mesh dim
// gets link_gbps (ATP IC3/IC5: B1' = B2' = GroupBW).
//
// Fat tree (XGFT: an extended generalized fat tree, the family SimGrid's FAT_TREE
// cluster describes). h levels; down[l] children per switch of level l+1, up[l] parents per node of
// level l. Devices are level 0, N = Π down. A node of level l is named by digits
// (p_1…p_l, c_{l+1}…c_h) with p_i < up[i−1] and c_i < down[i−1]; it links to the up[l]
// parents that share all its digits but digit l+1. Routing is up/down with d-mod-k parent
// selection: climb from the source, taking parent (dst / Π_{i≤l} up[i−1]) mod up[l], until
// the switch is an ancestor of the destination, then descend. Worked example: down (4, 4),
// up (1, 2): 16 devices under 4 leaf switches, 2 spines; dev0 → dev5 climbs leaf 0, spine
// (5 / 1) mod 2 = 1, descends leaf 1 to dev5.
//
// Dragonfly (Dragonfly §3). `groups` groups of `routers` routers, all-to-all local links
// inside a group, one global link between every pair of groups, `devices` devices per router. In group G,
// the global link to group H sits on router (index of H among G's other groups) mod
// routers. Minimal routing: source router → (local) the router holding the global link →
// (global) → (local) destination router.
#pragma once

#include <vector>

#include "topo/graph.hpp"

namespace meshtp::topo {

struct SwitchSpec {
  int devices = 0;
  double link_gbps = 0;
  double latency_us = 0;
};
Graph single_switch(const SwitchSpec& spec);

struct FatTreeSpec {
  std::vector<int> down;          // children per switch, level 1 first
  std::vector<int> up;            // parents per node, level 0 (devices) first
  std::vector<double> link_gbps;  // per level of links (device–leaf first)
  double latency_us = 0;
};
Graph fat_tree(const FatTreeSpec& spec);

struct DragonflySpec {
  int groups = 0;
  int routers = 0;  // per group
  int devices = 0;  // per router
  double device_gbps = 0, local_gbps = 0, global_gbps = 0;
  double latency_us = 0;
};
Graph dragonfly(const DragonflySpec& spec);

}  // namespace meshtp::topo
