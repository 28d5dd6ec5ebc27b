#include "plan/mesh_links.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <ostream>
#include <vector>

#include "core/error.hpp"
#include "plan/topology_graph.hpp"

namespace meshtp::plan {

namespace {

double measured_ratio(const RingParams& ring, int p, double bytes) {
  return ring.measured && ring.measured->ranks == p ? ring.measured->ratio_at(bytes) : 1.0;
}

}  // namespace

double ring_collective_time(const RingParams& ring, int p, double shard_bytes) {
  if (p <= 1) return 0;
  return (ring.t_launch_s + (p - 1) * (ring.l_sync_s + shard_bytes / ring.bw_bytes_per_s)) *
         measured_ratio(ring, p, shard_bytes * p);
}

double ring_all_reduce_time(const RingParams& ring, int p, double bytes) {
  if (p <= 1) return 0;
  return (ring.t_launch_s + 2.0 * (p - 1) * (ring.l_sync_s + bytes / (p * ring.bw_bytes_per_s))) *
         measured_ratio(ring, p, bytes);
}

double MeasuredCurve::ratio_at(double bytes) const {
  const double x = std::log(std::max(bytes, 1.0));
  if (x <= log_bytes.front()) return ratio.front();
  if (x >= log_bytes.back()) return ratio.back();
  const auto hi = static_cast<std::size_t>(std::upper_bound(log_bytes.begin(), log_bytes.end(), x) -
                                           log_bytes.begin());
  const std::size_t lo = hi - 1;
  const double w = (x - log_bytes[lo]) / (log_bytes[hi] - log_bytes[lo]);
  return ratio[lo] + w * (ratio[hi] - ratio[lo]);
}

std::shared_ptr<const MeasuredCurve> measured_curve(const CollectiveFit& fit,
                                                    layout::CollectiveKind kind, int p) {
  if (fit.measured.empty() || p <= 1) return nullptr;
  const RingParams line{.t_launch_s = fit.t_launch_us * kUs,
                        .l_sync_s = fit.l_sync_us * kUs,
                        .bw_bytes_per_s = fit.bw_gbps * kGB};
  auto curve = std::make_shared<MeasuredCurve>();
  curve->ranks = p;
  for (const MeasuredTime& m : fit.measured) {
    const auto bytes = static_cast<double>(m.bytes);
    const double t = kind == layout::CollectiveKind::kAllReduce
                         ? ring_all_reduce_time(line, p, bytes)
                         : ring_collective_time(line, p, bytes / p);
    curve->log_bytes.push_back(std::log(bytes));
    curve->ratio.push_back(m.us * kUs / t);
  }
  return curve;
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

namespace {

// Eq. 3 for the groups of `size` ranks `stride` apart on `topology` (n devices): all the
// hierarchical form depends on. The pattern of groups repeats every span = size·stride ranks
// and the pattern of level-j members and parents every D_{j−1} (a parent's devices), so
// every per-member quantity repeats every lcm(span, D_{j−1}) ranks: only that first period
// is walked (a node level of 2,048 DGX nodes: the first period of the gpu level is one
// node's 8 devices; shorter still below), and in it each group visits each member it
// touches once. The first member with the least bandwidth is in the first period.
ModelledLink modelled_group_link(const Topology& topology, std::int64_t n, int size, int stride) {
  ModelledLink out;
  if (size == 1) return out;
  const std::int64_t span = static_cast<std::int64_t>(size) * stride;
  double best = std::numeric_limits<double>::infinity();
  for (int j = 0; j < static_cast<int>(topology.levels.size()); ++j) {
    const Level& level = topology.levels[static_cast<std::size_t>(j)];
    const std::int64_t dj = topology.devices_per_member(j);
    const int rj = level.members;
    const std::int64_t parent_devices = dj * rj;
    // Consecutive ranks of a group in different parents: no group crosses this level.
    if (stride >= parent_devices) continue;
    // Groups inside one parent and no per-pair caps: every parent holds the same pattern and
    // inside it the pattern repeats every lcm(span, dj) ranks, peer counts (all a uniform cap
    // needs) included; the period is then a part of parent 0, whose crossing groups are
    // that part's times parent_devices / period.
    const bool within_parent = parent_devices % span == 0 && level.p2p_gbps.empty();
    const std::int64_t period =
        within_parent ? std::lcm(span, dj) : std::min(n, std::lcm(span, parent_devices));
    const std::int64_t parent_repeats = within_parent ? parent_devices / period : 1;
    const std::int64_t members = period / dj;
    // Per member of the period: crossing groups; per parent: crossing groups; per member,
    // with a p2p cap: the peer indices its crossing groups touch in its parent.
    std::vector<int> sharers(static_cast<std::size_t>(members), 0);
    std::vector<std::int64_t> groups_in_parent(
        static_cast<std::size_t>(std::max<std::int64_t>(1, period / parent_devices)), 0);
    std::vector<std::vector<int>> peers(level.has_p2p() ? static_cast<std::size_t>(members) : 0);
    // A uniform p2p cap reaches the group bandwidth after this many peers; more change nothing.
    const std::size_t enough_peers =
        level.p2p_uniform_gbps > 0
            ? static_cast<std::size_t>(std::ceil(level.group_gbps / level.p2p_uniform_gbps)) + 1
            : std::numeric_limits<std::size_t>::max();
    std::vector<std::int64_t> run;  // the members one group touches in one parent
    auto close_run = [&](std::int64_t parent) {
      if (run.size() >= 2) {
        ++groups_in_parent[static_cast<std::size_t>(parent)];
        for (const std::int64_t m : run) {
          ++sharers[static_cast<std::size_t>(m)];
          if (peers.empty()) continue;
          std::vector<int>& mine = peers[static_cast<std::size_t>(m)];
          for (const std::int64_t other : run) {
            if (mine.size() >= enough_peers) break;
            const int index = static_cast<int>(other % rj);
            // Uniform: kept distinct as it grows (at most enough_peers); a matrix: deduplicated
            // below.
            if (other != m && (level.p2p_uniform_gbps == 0 ||
                               std::find(mine.begin(), mine.end(), index) == mine.end())) {
              mine.push_back(index);
            }
          }
        }
      }
      run.clear();
    };
    const std::int64_t groups = period / span * stride;
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t base = (g / stride) * span + g % stride;
      std::int64_t parent = base / parent_devices;
      // Member by member: from rank i, the next member starts at the first rank ≥ (m+1)·dj.
      for (std::int64_t i = 0; i < size;) {
        const std::int64_t r = base + i * stride;
        const std::int64_t member = r / dj;
        if (member / rj != parent) {
          close_run(parent);
          parent = member / rj;
        }
        run.push_back(member);
        const std::int64_t next = (member + 1) * dj - base;
        i = std::max(i + 1, (next + stride - 1) / stride);
      }
      close_run(parent);
    }
    if (std::all_of(sharers.begin(), sharers.end(), [](int s) { return s == 0; })) continue;
    out.levels.push_back(j);
    out.latency_us = std::max(out.latency_us, level.latency_us);
    for (std::int64_t m = 0; m < members; ++m) {
      const int gs = sharers[static_cast<std::size_t>(m)];
      if (gs == 0) continue;
      double bw = level.group_gbps / static_cast<double>(gs);
      if (level.has_p2p()) {
        std::vector<int>& mine = peers[static_cast<std::size_t>(m)];
        std::sort(mine.begin(), mine.end());
        mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
        double cap = 0;
        for (const int p : mine) cap += level.p2p(static_cast<int>(m % rj), p);
        if (cap > 0) {
          bw = std::min(level.group_gbps, cap) / static_cast<double>(gs);
        } else {
          // No direct link to any peer: relayed through members that carry the other
          // groups' traffic, so all groups crossing this level in the parent share it.
          bw = level.group_gbps /
               static_cast<double>(groups_in_parent[static_cast<std::size_t>(m / rj)] *
                                   parent_repeats);
        }
      }
      if (bw < best) {
        best = bw;
        out.bottleneck_level = j;
        out.sharers = gs;
      }
    }
  }
  MESHTP_CHECK(!out.levels.empty(), "internal: a group of {} ranks {} apart crosses no level", size,
               stride);
  out.link_gbps = best;
  return out;
}

int stride_of(const std::vector<int>& shape, int dim) {
  int stride = 1;
  for (std::size_t k = static_cast<std::size_t>(dim) + 1; k < shape.size(); ++k) {
    stride *= shape[k];
  }
  return stride;
}

}  // namespace

ModelledLink modelled_link(const Topology& topology, const std::vector<int>& shape, int dim) {
  std::int64_t n = 1;
  for (const int d : shape) n *= d;
  MESHTP_CHECK(n == topology.device_count(),
               "mesh of {} ranks does not match topology '{}' "
               "with {} devices",
               n, topology.name, topology.device_count());
  MESHTP_CHECK(dim >= 0 && dim < static_cast<int>(shape.size()), "mesh dim {} out of range", dim);
  MESHTP_CHECK(!topology.levels.empty(),
               "topology '{}' has no hierarchical levels (a graph "
               "form is priced by mesh_links)",
               topology.name);
  return modelled_group_link(topology, n, shape[static_cast<std::size_t>(dim)],
                             stride_of(shape, dim));
}

namespace {

// A calibrated collective's ring: its own fit with its measured times, or (`own` empty)
// another collective's line of the same group.
RingParams to_ring(const std::optional<CollectiveFit>& own, const CollectiveFit& fallback,
                   layout::CollectiveKind kind, int p) {
  const CollectiveFit& f = own ? *own : fallback;
  return RingParams{.t_launch_s = f.t_launch_us * kUs,
                    .l_sync_s = f.l_sync_us * kUs,
                    .bw_bytes_per_s = f.bw_gbps * kGB,
                    .measured = own ? measured_curve(*own, kind, p) : nullptr};
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

// `link`: the dim's B' (Eq. 3, or the graph form's rings); `graph_skew`: Cannon's skew on
// the graph, when priced there.
DimLinks dim_links(const Topology& topology, const std::vector<int>& shape, int dim,
                   const ModelledLink& link, const std::optional<topo::DimRings>& graph_skew,
                   const std::optional<topo::DimRings>& graph_two_way) {
  DimLinks d;
  d.dim = dim;
  d.size = shape[static_cast<std::size_t>(dim)];
  d.stride = 1;
  for (std::size_t k = static_cast<std::size_t>(dim) + 1; k < shape.size(); ++k) {
    d.stride *= shape[k];
  }
  d.modelled = link;
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
    using layout::CollectiveKind;
    d.all_reduce = to_ring(g->all_reduce, any, CollectiveKind::kAllReduce, d.size);
    d.all_gather =
        to_ring(g->all_gather, g->reduce_scatter.value_or(any), CollectiveKind::kAllGather, d.size);
    d.reduce_scatter = to_ring(g->reduce_scatter, g->all_gather.value_or(any),
                               CollectiveKind::kReduceScatter, d.size);
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
  if (graph_two_way && graph_two_way->link_gbps > 0 && d.source == BandwidthSource::kModelled) {
    d.two_way = RingParams{.t_launch_s = topology.launch_us * kUs,
                           .l_sync_s = graph_two_way->latency_us * kUs,
                           .bw_bytes_per_s = graph_two_way->link_gbps * kGB};
  } else {
    d.two_way = d.all_gather;
    d.two_way.bw_bytes_per_s /= 2;
    d.two_way.measured = nullptr;  // the measured times are one-way all-gathers
  }
  return d;
}

}  // namespace

MeshLinks mesh_links(const Topology& topology, int d1, int d2) {
  return TopologyLinks(topology).mesh(d1, d2);
}

const ModelledLink& TopologyLinks::group_link(int size, int stride) {
  const auto key = std::pair{size, stride};
  auto it = groups_.find(key);
  if (it == groups_.end()) {
    it =
        groups_.emplace(key, modelled_group_link(topology_, topology_.device_count(), size, stride))
            .first;
  }
  return it->second;
}

const MeshLinks& TopologyLinks::mesh(int d1, int d2) {
  const auto key = std::pair{d1, d2};
  if (const auto it = meshes_.find(key); it != meshes_.end()) return it->second;
  const Topology& topology = topology_;
  MESHTP_CHECK(d1 >= 1 && d2 >= 1, "mesh {}x{}: sizes must be positive", d1, d2);
  MESHTP_CHECK(static_cast<std::int64_t>(d1) * d2 == topology.device_count(),
               "mesh {}x{} has {} ranks but topology '{}' has {} devices", d1, d2,
               static_cast<std::int64_t>(d1) * d2, topology.name, topology.device_count());
  MeshLinks links;
  links.mesh = {d1, d2};
  const std::vector<int> shape{d1, d2};
  std::array<std::optional<ModelledLink>, 2> graph_links;
  std::array<std::optional<topo::DimRings>, 2> graph_skews;
  std::array<std::optional<topo::DimRings>, 2> graph_two_ways;
  if (topology.graph || topology.rings_on_graph) {
    if (!graph_) graph_ = shared_topology_graph(topology);
    const std::vector<int> placement = topology_placement(topology, *graph_, shape);
    for (int dim : {0, 1}) {
      // Wang's two-way ring runs on mesh dim 1 only (the runtime decomposes the row).
      if (dim == 1) {
        topo::DimRings two_way;
        graph_links[dim] =
            from_rings(*graph_, topo::ring_dim(*graph_, placement, shape, dim, two_way));
        graph_two_ways[dim] = two_way;
      } else {
        graph_links[dim] = from_rings(*graph_, topo::ring_dim(*graph_, placement, shape, dim));
      }
      if (d1 == d2) graph_skews[dim] = topo::skew_dim(*graph_, placement, shape, dim);
    }
  }
  for (int dim : {0, 1}) {
    const ModelledLink& modelled =
        graph_links[dim] ? *graph_links[dim] : group_link(shape[dim], dim == 0 ? d2 : 1);
    links.dims[dim] =
        dim_links(topology, shape, dim, modelled, graph_skews[dim], graph_two_ways[dim]);
  }
  if (const MeshSharing* m = topology.calibration.mesh_sharing(d1, d2)) {
    links.dim_sharing = m->sharing;
  } else if (topology.host_staged && d1 > 1 && d2 > 1) {
    links.dim_sharing = 1;  // both dims' traffic through host memory: one resource
  }
  return meshes_.emplace(key, std::move(links)).first->second;
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
