// What one mesh dim's ring collectives get from a graph (the graph form of ATP Eq. 3).
//
// Mesh (d1, d2) is row-major: rank r = i·d2 + j sits on device placement[r]. A dim-m group
// is every rank with the same coordinate in the other dim (dim 1: {i·d2 + j : j}, dim 0:
// {i·d2 + j : i}); all of a dim's groups run their ring collective at the same time, as the
// tensor-parallel layers do. A ring collective (all-gather, reduce-scatter, and all-reduce
// as their sequence) is P−1 steps in which every member sends one block to the next member
// of the ring, member k → member (k+1) mod P — the ring algorithm of MPI libraries (one
// direction per hop) and what a SimGrid simulation of them sends. So:
//
//   flows(l, dir) = number of ring hops, over ALL groups of the dim, whose route crosses
//                   link l in direction dir (split-duplex); in either direction (shared);
//                   never counted (fatpipe: every flow gets the link's bandwidth)
//   share(l)      = gbps(l) / flows(l, dir)        (fatpipe: gbps(l))
//   B'            = min over hops h, over links l on h's route, of share(l)
//   L             = max over hops of the route latency Σ latency(l)
//
// B' is what every step of every ring gets under max-min fair sharing (SimGrid's model):
// the most loaded link saturates first and gives each of its flows gbps/flows, the least
// any flow gets; a step ends when its slowest transfer does. It is the link bandwidth of the
// ring model T = t_launch + (P−1)·(L + shard/B') (plan/mesh_links.hpp); the all-reduce
// algorithm bandwidth is B = P/(2(P−1))·B' (ATP Eq. 4).
//
// Worked example, ATP Fig. 7a as a graph (4 nodes × 4 GPUs, NVLink P2P 200 GB/s per
// direction between GPU pairs, one 25 GB/s HDR link per node to a switch), mesh (8, 2):
//   dim 1, groups {0,1}, {2,3}, …: hops 0→1 and 1→0 cross the 0–1 NVLink in opposite
//     directions: one flow each, B2' = 200.
//   dim 0, groups {0,2,…,14} and {1,3,…,15}: hops 2→4 and 3→5 both leave node 0 on its HDR
//     uplink: two flows, B1' = 25/2 = 12.5 — ATP §3.5's numbers.
#pragma once

#include <string>
#include <vector>

#include "topo/graph.hpp"

namespace meshtp::topo {

struct DimRings {
  int size = 1;    // P
  int stride = 1;  // rank distance between consecutive members
  int groups = 0;  // concurrent groups
  double link_gbps = 0;   // B'; 0 when size == 1
  double latency_us = 0;  // L: the slowest hop's route latency
  int max_hops = 0;       // links on the longest hop route
  int bottleneck_link = -1;
  bool bottleneck_forward = true;
  int flows = 0;          // concurrent flows on the bottleneck link (direction)
};

// `placement[r]` is the device of rank r; `shape` is the mesh (any number of dims). Throws
// when the placement does not cover the shape.
DimRings ring_dim(const Graph& graph, const std::vector<int>& placement,
                  const std::vector<int>& shape, int dim);

// Wang's ring as its authors' code runs it (MeshSlice's Wang_OS / Wang_LS / Wang_RS): every
// member sends half its block to the next member and the other half to the previous one, at
// once — both directions of a full-duplex ring. The same flow count over both messages: on a
// ring of split-duplex links each direction of a link carries one flow, so each half moves at
// the link's full bandwidth and a step takes L + (n/2)/B' instead of L + n/B'; where both
// messages leave through one port (a switch uplink, a ring of 2) they share it and B' halves,
// so a step takes as long as one whole block one way.
DimRings two_way_ring_dim(const Graph& graph, const std::vector<int>& placement,
                          const std::vector<int>& shape, int dim);
// ring_dim, with two_way_ring_dim's answer in `two_way`: the forward messages routed once.
DimRings ring_dim(const Graph& graph, const std::vector<int>& placement,
                  const std::vector<int>& shape, int dim, DimRings& two_way);

// Cannon's skew (Cannon '69; MeshSlice §2.3.2) on the same dim: every group rotates its
// blocks at once by its own index g (the rank's coordinate in the other dim of a 2D mesh),
// member i → member (i − g) mod P, each block sent straight to its place in one message (the
// runtime's sendrecv; group 0 sends nothing). The same flow count as the ring, over these
// routes: B' is the least share of any flow and L the slowest route, so one block of n bytes
// takes L + n/B'. Worked example, a 4-ring row of a 4x4 mesh on a 4x4 torus (one link per
// neighbour pair and direction): row 2 sends every block two hops the same way, two flows on
// each link, B' = B/2; on a plain chain of switches it would be one flow per link.
DimRings skew_dim(const Graph& graph, const std::vector<int>& placement,
                  const std::vector<int>& shape, int dim);

// "torus-3-d0 (+), 2 flows" — the bottleneck for messages.
std::string describe_bottleneck(const Graph& graph, const DimRings& rings);

}  // namespace meshtp::topo
