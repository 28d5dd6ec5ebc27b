// ATP's hierarchical communication matrix (ATP §3.4) and the graph it describes.
//
//   levels, outermost first: level j has R_j members; N = Π_j R_j devices. A level-j member
//   is a block of D_j = Π_{k>j} R_k consecutive devices (a node, a switch, a ring…).
//   group_gbps   what ONE member can push to the other members of its level (GB/s).
//   p2p_gbps     optional member-to-member bandwidth: one number (all pairs) or an R_j×R_j
//                matrix; 0 = no direct link. Caps the group bandwidth (ATP Fig. 7a: a GPU
//                has 600 GB/s of NVLink in total but only 200 GB/s to any one peer).
//   latency_us   per-step synchronisation latency of a ring crossing this level (L_sync).
//
// As a graph (levels_graph), for each level j and each parent block:
//   no p2p   one switch; each member's port has an uplink of group_gbps (split-duplex,
//            latency_us/2, so crossing the level costs latency_us);
//   p2p      a direct link of p2p(a, b) GB/s (latency_us) between members a < b with
//            p2p > 0 (the matrix must be symmetric); when a member's p2p links add up to
//            more than group_gbps, they hang off a "nic" router behind a group_gbps link.
// A member's port is the device itself at the innermost level and a router for outer ones;
// each port is joined to its children's ports by a fatpipe of kUnchargedGbps, because ATP's
// matrix charges only the levels a transfer crosses, not the way from a device to its
// node's port. A route from device s to t crosses the outermost level where their members
// differ: up the fatpipes to that level's port, across the level (switch, or the shortest
// p2p path, relayed through other members when two have no direct link), down to t.
//
// Worked example, ATP Fig. 7a ("nvlink-hdr-4x4"): levels [node: 4, group 25], [gpu: 4,
// group 600, p2p 200]: a switch "node-switch" with four 25 GB/s uplinks "node<i>-up", and in
// each node six 200 GB/s NVLinks "gpu<a>-gpu<b>". route(dev2, dev4) = dev2 → node0 (fatpipe),
// node0-up, node1-up backwards, node1 → dev4 (fatpipe).
#pragma once

#include <vector>
#include <string>

#include "topo/graph.hpp"

namespace meshtp::topo {

struct Level {
  std::string name;  // "node", "gpu", "ring" — for display and link names
  int members = 0;   // R_j
  double group_gbps = 0;
  // Empty: no cap. One element: the same bandwidth between every pair. R_j×R_j: per pair.
  std::vector<std::vector<double>> p2p_gbps;
  double p2p_uniform_gbps = 0;  // > 0 when given as one number
  double latency_us = 0;

  bool has_p2p() const { return p2p_uniform_gbps > 0 || !p2p_gbps.empty(); }
  // Bandwidth from member a to member b (indices inside the parent); 0 = no direct link.
  double p2p(int a, int b) const;
  friend bool operator==(const Level&, const Level&) = default;
};

// The block-internal fatpipes: fast enough never to be a bottleneck (1 PB/s).
inline constexpr double kUnchargedGbps = 1e6;

// Throws meshtp::Error: an asymmetric p2p matrix, a level whose members have no p2p path
// between them (disconnected), naming the level and members.
Graph levels_graph(const std::vector<Level>& levels);

}  // namespace meshtp::topo
