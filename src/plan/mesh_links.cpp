#include "plan/mesh_links.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <ostream>
#include <set>

#include "core/error.hpp"
#include "plan/topology_graph.hpp"

namespace meshtp::plan {

double ring_collective_time(const RingParams& ring, int p, double shard_bytes) {
  if (p <= 1) return 0;
  return ring.t_launch_s + (p - 1) * (ring.l_sync_s + shard_bytes / ring.bw_bytes_per_s);
}

double ring_all_reduce_time(const RingParams& ring, int p, double bytes) {
  if (p <= 1) return 0;
  return ring.t_launch_s + 2.0 * (p - 1) * (ring.l_sync_s + bytes / (p * ring.bw_bytes_per_s));
}

double collective_time(const DimLinks& dim, layout::CollectiveKind kind, double message_bytes) {
  using layout::CollectiveKind;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return ring_all_reduce_time(dim.all_reduce, dim.size, message_bytes);
    case CollectiveKind::kAllGather:
      return ring_collective_time(dim.all_gather, dim.size, message_bytes / dim.size);
    case CollectiveKind::kReduceScatter:
      return ring_collective_time(dim.reduce_scatter, dim.size, message_bytes / dim.size);
    default:
      fail("collective_time: {} is not priced on a mesh dim", kind);
  }
}

double allreduce_bandwidth(int d, double link_bandwidth) {
  MESHTP_CHECK(d >= 2, "allreduce_bandwidth: d={} must be at least 2", d);
  return d / (2.0 * (d - 1)) * link_bandwidth;
}

const char* name(BandwidthSource s) {
  return s == BandwidthSource::kModelled ? "modelled" : "calibrated";
}

ModelledLink modelled_link(const Topology& topology, const std::vector<int>& shape, int dim) {
  std::int64_t n = 1;
  for (const int d : shape) n *= d;
  MESHTP_CHECK(n == topology.device_count(), "mesh of {} ranks does not match topology '{}' "
               "with {} devices", n, topology.name, topology.device_count());
  MESHTP_CHECK(dim >= 0 && dim < static_cast<int>(shape.size()), "mesh dim {} out of range",
               dim);
  MESHTP_CHECK(!topology.levels.empty(), "topology '{}' has no hierarchical levels (a graph "
               "form is priced by mesh_links)", topology.name);
  ModelledLink out;
  const int size = shape[static_cast<std::size_t>(dim)];
  if (size == 1) return out;
  int stride = 1;
  for (std::size_t k = static_cast<std::size_t>(dim) + 1; k < shape.size(); ++k) {
    stride *= shape[k];
  }
  const int span = size * stride;
  const int groups = static_cast<int>(n / size);
  // Group g's ranks: base(g) + i·stride, where base(g) = (g / stride)·span + g % stride.
  auto base = [&](int g) { return (g / stride) * span + g % stride; };

  double best = std::numeric_limits<double>::infinity();
  for (int j = 0; j < static_cast<int>(topology.levels.size()); ++j) {
    const Level& level = topology.levels[static_cast<std::size_t>(j)];
    const int dj = topology.devices_per_member(j);
    const int rj = level.members;
    // Per member (global id r / dj): groups crossing here, and peer indices in the parent.
    std::map<int, std::set<int>> sharers, peers;
    std::map<int, std::set<int>> groups_in_parent;
    for (int g = 0; g < groups; ++g) {
      std::map<int, std::set<int>> members_by_parent;  // parent → members touched
      for (int i = 0; i < size; ++i) {
        const int r = base(g) + i * stride;
        const int member = r / dj;
        members_by_parent[member / rj].insert(member);
      }
      for (const auto& [parent, members] : members_by_parent) {
        if (members.size() < 2) continue;
        groups_in_parent[parent].insert(g);
        for (const int m : members) {
          sharers[m].insert(g);
          for (const int other : members) {
            if (other != m) peers[m].insert(other % rj);
          }
        }
      }
    }
    if (sharers.empty()) continue;
    out.levels.push_back(j);
    out.latency_us = std::max(out.latency_us, level.latency_us);
    for (const auto& [member, gs] : sharers) {
      double bw = level.group_gbps / static_cast<double>(gs.size());
      if (level.has_p2p()) {
        double cap = 0;
        for (const int p : peers[member]) cap += level.p2p(member % rj, p);
        if (cap > 0) {
          bw = std::min(level.group_gbps, cap) / static_cast<double>(gs.size());
        } else {
          // No direct link to any peer: relayed through members that carry the other
          // groups' traffic, so all groups crossing this level in the parent share it.
          bw = level.group_gbps / static_cast<double>(groups_in_parent[member / rj].size());
        }
      }
      if (bw < best) {
        best = bw;
        out.bottleneck_level = j;
        out.sharers = static_cast<int>(gs.size());
      }
    }
  }
  MESHTP_CHECK(!out.levels.empty(), "internal: mesh dim {} of size {} crosses no level", dim,
               size);
  out.link_gbps = best;
  return out;
}

namespace {

RingParams to_ring(const CollectiveFit& f) {
  return RingParams{.t_launch_s = f.t_launch_us * kUs,
                    .l_sync_s = f.l_sync_us * kUs,
                    .bw_bytes_per_s = f.bw_gbps * kGB};
}

ModelledLink from_rings(const topo::Graph& graph, const topo::DimRings& r) {
  ModelledLink m;
  if (r.size == 1) return m;
  m.link_gbps = r.link_gbps;
  m.latency_us = r.latency_us;
  m.sharers = r.flows;
  m.bottleneck_link = topo::describe_bottleneck(graph, r);
  m.max_hops = r.max_hops;
  return m;
}

// `graph_link`: the graph form's B' for this dim, when the topology has one; `graph_skew`:
// Cannon's skew on the graph, when priced there.
DimLinks dim_links(const Topology& topology, const std::vector<int>& shape, int dim,
                   const std::optional<ModelledLink>& graph_link,
                   const std::optional<topo::DimRings>& graph_skew) {
  DimLinks d;
  d.dim = dim;
  d.size = shape[static_cast<std::size_t>(dim)];
  d.stride = 1;
  for (std::size_t k = static_cast<std::size_t>(dim) + 1; k < shape.size(); ++k) {
    d.stride *= shape[k];
  }
  d.modelled = graph_link ? *graph_link : modelled_link(topology, shape, dim);
  if (d.size == 1) return d;
  const RingParams modelled{.t_launch_s = topology.launch_us * kUs,
                            .l_sync_s = d.modelled.latency_us * kUs,
                            .bw_bytes_per_s = d.modelled.link_gbps * kGB};
  d.all_reduce = d.all_gather = d.reduce_scatter = modelled;
  d.link_gbps = d.modelled.link_gbps;
  if (const GroupCalibration* g = topology.calibrated_group(d.size, d.stride)) {
    d.source = BandwidthSource::kCalibrated;
    // A missing collective falls back to another fit of the same group: the ring model
    // describes the links, which every collective shares.
    const CollectiveFit& any = g->all_reduce       ? *g->all_reduce
                               : g->all_gather     ? *g->all_gather
                                                   : *g->reduce_scatter;
    d.all_reduce = to_ring(g->all_reduce.value_or(any));
    d.all_gather = to_ring(g->all_gather.value_or(g->reduce_scatter.value_or(any)));
    d.reduce_scatter = to_ring(g->reduce_scatter.value_or(g->all_gather.value_or(any)));
    d.link_gbps = d.all_reduce.bw_bytes_per_s / kGB;
  }
  d.allreduce_gbps = allreduce_bandwidth(d.size, *d.link_gbps);
  if (graph_skew && graph_skew->link_gbps > 0) {
    d.skew = RingParams{.t_launch_s = topology.launch_us * kUs,
                        .l_sync_s = graph_skew->latency_us * kUs,
                        .bw_bytes_per_s = graph_skew->link_gbps * kGB};
  } else {
    const double hops = d.size / 2;
    d.skew = RingParams{.t_launch_s = d.all_gather.t_launch_s,
                        .l_sync_s = hops * d.all_gather.l_sync_s,
                        .bw_bytes_per_s = d.all_gather.bw_bytes_per_s / hops};
  }
  return d;
}

}  // namespace

MeshLinks mesh_links(const Topology& topology, int d1, int d2) {
  MESHTP_CHECK(d1 >= 1 && d2 >= 1, "mesh {}x{}: sizes must be positive", d1, d2);
  MESHTP_CHECK(static_cast<std::int64_t>(d1) * d2 == topology.device_count(),
               "mesh {}x{} has {} ranks but topology '{}' has {} devices", d1, d2,
               static_cast<std::int64_t>(d1) * d2, topology.name, topology.device_count());
  MeshLinks links;
  links.mesh = {d1, d2};
  const std::vector<int> shape{d1, d2};
  std::array<std::optional<ModelledLink>, 2> graph_links;
  std::array<std::optional<topo::DimRings>, 2> graph_skews;
  if (topology.graph || topology.rings_on_graph) {
    const topo::Graph graph = topology_graph(topology);
    const std::vector<int> placement = topology_placement(topology, graph, shape);
    for (int dim : {0, 1}) {
      graph_links[dim] = from_rings(graph, topo::ring_dim(graph, placement, shape, dim));
      if (d1 == d2) graph_skews[dim] = topo::skew_dim(graph, placement, shape, dim);
    }
  }
  links.dims[0] = dim_links(topology, shape, 0, graph_links[0], graph_skews[0]);
  links.dims[1] = dim_links(topology, shape, 1, graph_links[1], graph_skews[1]);
  return links;
}

std::ostream& operator<<(std::ostream& os, const MeshLinks& links) {
  os << fmt::format("mesh {}x{}:", links.mesh[0], links.mesh[1]);
  for (const DimLinks& d : links.dims) {
    if (d.size == 1) {
      os << fmt::format(" [dim {}: size 1, no communication]", d.dim);
      continue;
    }
    os << fmt::format(" [dim {}: {} ranks stride {}, B'={:.4g} GB/s, B={:.4g} GB/s, {}]", d.dim,
                      d.size, d.stride, *d.link_gbps, *d.allreduce_gbps, name(d.source));
  }
  return os;
}

}  // namespace meshtp::plan
