// What each mesh dim's process groups get from the interconnect: ATP Eq. 3 and Eq. 4, and
// the ring collective model of MeshSlice §3.2 built on them.
//
// Mapping a mesh onto the hierarchy (ATP §3.5). Mesh (d1, d2) is row-major: the last dim
// holds consecutive ranks. A dim-m group is every rank with the same coordinates in the
// other dims — for mesh (8,2): dim 1 groups {0,1},{2,3},…; dim 0 groups {0,2,…,14},
// {1,3,…,15}. A group *crosses* level j where two of its ranks share a level-(j−1) parent
// but sit in different level-j members. For every crossed level and every member M:
//
//   sharers(M) = number of this dim's groups that have a rank in M and cross level j there
//                (they are all-reducing at the same time and share M's group bandwidth)
//   cap(M)     = Σ over the level-j peers M talks to of p2p(M, peer)   (no p2p: no cap)
//   bw_j(M)    = min(GroupBW_j, cap(M)) / sharers(M)
//   B'         = min over crossed levels j and members M of bw_j(M)            (Eq. 3)
//   B          = d/(2(d−1)) · B'   (ring / Rabenseifner all-reduce algorithm bandwidth, Eq. 4)
//
// When the levels above dim 1 hold exactly d2 consecutive ranks (ATP's case), sharers = d2
// and this is the paper's B1' = min(GroupBW_{1→i} / d2), B2' = min(GroupBW_{i(+1)→l}).
// Worked example, ATP Fig. 7a (4 nodes × 4 GPUs, HDR 25 GB/s per node, NVLink P2P 200,
// group 600), mesh (8,2):
//   dim 1 {0,1}: crosses the gpu level only; 1 sharer; cap = p2p(0,1) = 200 → B2' = 200.
//   dim 0 {0,2,4,…}: crosses the node level, where node 0 holds ranks of both dim-0 groups
//   → 25/2 = 12.5; and the gpu level (0↔2 inside node 0, cap 200) → B1' = 12.5.
// A member with no direct link to any of its peers (0 in the p2p matrix, e.g. devices 0 and
// 2 of a 4-ring) is relayed through the others: bw = GroupBW_j / (groups crossing level j
// inside the parent).
//
// Graph topologies (Topology::graph) are priced on the graph instead: every ring hop of
// every group of the dim is routed and each link's concurrent flows share it; B' is the
// least share and L_sync the slowest hop's route latency (topo/rings.hpp has the model and
// a worked example). The evidence is the bottleneck link and its flow count.
//
// Calibrated groups (Topology::calibration) replace the modelled numbers for the mesh dims
// whose groups have the same (size, stride); see topology.hpp.
#pragma once

#include <algorithm>
#include <array>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "layout/vocabulary.hpp"
#include "plan/topology.hpp"

namespace meshtp::plan {

struct MeasuredCurve;

// Linear ring model of one collective on one group (MeshSlice Eq. 5), in SI units, and for a
// calibrated collective the times it was fitted to.
struct RingParams {
  double t_launch_s = 0;
  double l_sync_s = 0;
  double bw_bytes_per_s = 0;  // link bandwidth B'
  // Set on a calibrated dim's own collectives only; used by the two ring functions below
  // when their P is the curve's. Formulas that take the line's terms apart (SUMMA panels,
  // Cannon's skew, Wang's two-way steps) price the line.
  std::shared_ptr<const MeasuredCurve> measured = nullptr;
};

// A calibrated collective's measured times (topology.hpp, CollectiveFit::measured) as the
// ratio r = measured / line at each measured size. The price of a buffer of n bytes is
//   T(n) = line(n) · r(n),  r interpolated linearly in ln n between measured sizes and held
//   at the nearest one beyond them,
// so it is the measured time at every measured size and the line's shape outside.
struct MeasuredCurve {
  int ranks = 0;                  // P of the group measured
  std::vector<double> log_bytes;  // ln n, ascending
  std::vector<double> ratio;      // measured / line at each
  double ratio_at(double bytes) const;
};
// The curve of `fit`'s measured times (nullptr when it has none) for collective `kind` on
// groups of p ranks; the line is `fit`'s.
std::shared_ptr<const MeasuredCurve> measured_curve(const CollectiveFit& fit,
                                                    layout::CollectiveKind kind, int p);

// T = t_launch + (P−1)·(l_sync + shard_bytes/bw); shard_bytes is what each rank contributes
// (all_gather) or keeps (reduce_scatter). 0 when P == 1. Scaled by ring.measured (buffer
// P·shard_bytes) when it is for P ranks.
double ring_collective_time(const RingParams& ring, int p, double shard_bytes);
// Ring all-reduce = reduce-scatter + all-gather: t_launch + 2(P−1)·(l_sync + bytes/(P·bw)),
// scaled by ring.measured likewise.
double ring_all_reduce_time(const RingParams& ring, int p, double bytes);
// Eq. 4: all-reduce algorithm bandwidth of a d-rank ring on links of bandwidth B'.
double allreduce_bandwidth(int d, double link_bandwidth);

enum class BandwidthSource { kModelled, kCalibrated };
const char* name(BandwidthSource s);

// Eq. 3 for one mesh dim, with the evidence: which levels, which bottleneck, how shared.
struct ModelledLink {
  double link_gbps = 0;       // B'; 0 when the dim has size 1
  double latency_us = 0;      // max latency of the crossed levels (graph: slowest hop route)
  std::vector<int> levels;    // crossed levels, outermost first (hierarchical form)
  int bottleneck_level = -1;  // the level giving the min (hierarchical form)
  int sharers = 0;            // concurrent groups at the bottleneck member (graph: flows)
  std::string bottleneck_link;  // graph form: "name (a -> b, sharing, GB/s / flows)"
  int max_hops = 0;             // graph form: links on the longest ring hop
};
// `shape` is any mesh whose size equals the device count; throws otherwise. Hierarchical
// form only (Eq. 3); graph topologies go through mesh_links.
ModelledLink modelled_link(const Topology& topology, const std::vector<int>& shape, int dim);

// Everything the cost models need about one mesh dim.
struct DimLinks {
  int dim = 0;
  int size = 1;    // P
  int stride = 1;  // rank distance inside a group
  BandwidthSource source = BandwidthSource::kModelled;
  ModelledLink modelled;
  std::optional<double> link_gbps;       // B'; nullopt when size == 1
  std::optional<double> allreduce_gbps;  // B (Eq. 4); nullopt when size == 1
  RingParams all_reduce, all_gather, reduce_scatter;
  // Cannon's skew of one n-byte block on this dim: t_launch + l_sync + n/bw. On a graph,
  // square meshes only (Cannon's), every group's rotation routed at once (topo::skew_dim);
  // otherwise ⌊P/2⌋ ring hops in sequence, the farthest rotation on a ring.
  RingParams skew;
  // One step of Wang's two-way ring (topo::two_way_ring_dim): each rank sends half a block
  // to each ring neighbour at once; an h-byte half takes t_launch + l_sync + h/bw. On a graph
  // both messages are routed, on mesh dim 1 (the row: the one dim the runtime's Wang
  // decomposes); otherwise (dim 0, Eq. 3, calibrated groups) nothing says the two directions
  // are independent, so they share B' (bw = B'/2: no faster than one way).
  RingParams two_way;
};

// One all-reduce, all-gather or reduce-scatter of `message_bytes` (layout::sent_bytes' n:
// the gathered or scattered buffer) on this dim's ring; 0 on a dim of size 1.
double collective_time(const DimLinks& dim, layout::CollectiveKind kind, double message_bytes);

struct MeshLinks {
  std::array<int, 2> mesh{1, 1};
  std::array<DimLinks, 2> dims;
  // How much the two dims' collectives slow each other at once (topology.hpp, MeshSharing):
  // measured by calibrate for this mesh, else 1 on a host-staged topology (Topology::
  // host_staged: both dims through host memory), else 0 (every dim its own links).
  double dim_sharing = 0;
  // Two collectives, one on each dim, run at the same time: max(a, b) + sharing·min(a, b).
  double concurrent(double a, double b) const {
    return std::max(a, b) + dim_sharing * std::min(a, b);
  }
};

// Throws meshtp::Error when d1·d2 differs from the topology's device count.
MeshLinks mesh_links(const Topology& topology, int d1, int d2);

// One topology's links, each answer computed once. What a mesh dim gets depends only on the
// topology and the dim's groups — Eq. 3 on (size, stride), a graph's rings on the mesh — yet
// the planner asks for it once per candidate, and one answer walks up to every device: a
// 100,000-device search asks thousands of times for a few dozen distinct answers. Keeps a
// reference to the topology, which must outlive it.
class TopologyLinks {
 public:
  explicit TopologyLinks(const Topology& topology) : topology_(topology) {}
  const Topology& topology() const { return topology_; }
  // Eq. 3 for groups of `size` ranks `stride` apart, hierarchical form: modelled_link of
  // every mesh dim with that size and stride.
  const ModelledLink& group_link(int size, int stride);
  // mesh_links(topology(), d1, d2); the graph form's graph is built once.
  const MeshLinks& mesh(int d1, int d2);

 private:
  const Topology& topology_;
  std::map<std::pair<int, int>, ModelledLink> groups_;
  std::map<std::pair<int, int>, MeshLinks> meshes_;
  std::shared_ptr<const topo::Graph> graph_;
};

std::ostream& operator<<(std::ostream& os, const MeshLinks& links);

}  // namespace meshtp::plan
