#include "topo/rings.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "core/error.hpp"

namespace meshtp::topo {
namespace {

// Flow counter key: split-duplex links count each direction, shared links both together.
std::int64_t flow_key(const Link& l, const Hop& h) {
  const std::int64_t dir = l.sharing == Sharing::kSplitDuplex && !h.forward ? 1 : 0;
  return static_cast<std::int64_t>(h.link) * 2 + dir;
}

// Every group's members each send one message at once, member i → member
// (i + offset(g)) mod P of group g (no message when that is i itself); routes them and finds
// the flows' least share (the model in rings.hpp). With `two_way` set, also what every
// member gets when it sends a second message at the same time, to member (i − offset(g))
// mod P: the same routes plus the reverse ones, flows counted over both (Wang's two-way
// ring). The forward messages are routed once for both answers.
template <typename Offset>
DimRings routed_dim(const Graph& graph, const std::vector<int>& placement,
                    const std::vector<int>& shape, int dim, Offset offset,
                    DimRings* two_way = nullptr) {
  std::int64_t n = 1;
  for (const int d : shape) n *= d;
  MESHTP_CHECK(dim >= 0 && dim < static_cast<int>(shape.size()), "mesh dim {} out of range",
               dim);
  MESHTP_CHECK(static_cast<std::int64_t>(placement.size()) == n, "placement of {} ranks does "
               "not match the mesh's {} ranks", placement.size(), n);
  DimRings out;
  out.size = shape[static_cast<std::size_t>(dim)];
  for (std::size_t k = static_cast<std::size_t>(dim) + 1; k < shape.size(); ++k) {
    out.stride *= shape[k];
  }
  out.groups = static_cast<int>(n / out.size);
  if (two_way != nullptr) *two_way = out;
  if (out.size == 1) return out;
  const int span = out.size * out.stride;
  auto device = [&](int g, int i) {
    const int rank = (g / out.stride) * span + g % out.stride + i * out.stride;
    return placement[static_cast<std::size_t>(rank)];
  };
  // Every message of every group, routed once, into one buffer: message k's hops are
  // hops[ends[k−1], ends[k]).
  Route hops;
  std::vector<std::size_t> ends;
  ends.reserve(static_cast<std::size_t>(n));
  auto route_all = [&](int sign) {
    for (int g = 0; g < out.groups; ++g) {
      const int step = ((sign * offset(g) % out.size) + out.size) % out.size;
      if (step == 0) continue;
      for (int i = 0; i < out.size; ++i) {
        graph.append_route(device(g, i), device(g, (i + step) % out.size), hops);
        ends.push_back(hops.size());
      }
    }
  };
  // Links by id without Graph::link's range check: the router gave these ids.
  const std::vector<Link>& links = graph.links();
  // Indexed by flow_key: a flat count per link direction (a hash map was most of the time
  // on a 100,000-device torus).
  std::vector<int> flows(links.size() * 2, 0);
  auto count_flows = [&](std::size_t from) {
    for (std::size_t k = from; k < hops.size(); ++k) {
      const Hop& h = hops[k];
      const Link& l = links[static_cast<std::size_t>(h.link)];
      if (l.sharing != Sharing::kFatpipe) ++flows[static_cast<std::size_t>(flow_key(l, h))];
    }
  };
  // The least share over every routed message; the slowest route; the longest.
  auto least_share = [&](DimRings& r) {
    r.link_gbps = std::numeric_limits<double>::infinity();
    std::size_t begin = 0;
    for (const std::size_t end : ends) {
      double latency = 0;  // Graph::latency_us of this route: its links' in order
      for (std::size_t k = begin; k < end; ++k) {
        const Hop& h = hops[k];
        const Link& l = links[static_cast<std::size_t>(h.link)];
        latency += l.latency_us;
        const int f =
            l.sharing == Sharing::kFatpipe ? 1 : flows[static_cast<std::size_t>(flow_key(l, h))];
        const double share = l.gbps / f;
        if (share < r.link_gbps) {
          r.link_gbps = share;
          r.bottleneck_link = h.link;
          r.bottleneck_forward = h.forward;
          r.flows = f;
        }
      }
      r.latency_us = std::max(r.latency_us, latency);
      r.max_hops = std::max(r.max_hops, static_cast<int>(end - begin));
      begin = end;
    }
    // Messages that are all local (two ranks on one device is rejected by the placement;
    // this is a route with no link, e.g. an explicit empty route) have no bottleneck.
    MESHTP_CHECK(r.bottleneck_link >= 0, "mesh dim {}: its messages cross no link", dim);
  };
  route_all(+1);
  if (ends.empty()) return out;  // nothing moves (a skew on a size-1 other dim)
  count_flows(0);
  least_share(out);
  if (two_way != nullptr) {
    const std::size_t forward_hops = hops.size();
    route_all(-1);
    count_flows(forward_hops);
    least_share(*two_way);
  }
  return out;
}

}  // namespace

DimRings ring_dim(const Graph& graph, const std::vector<int>& placement,
                  const std::vector<int>& shape, int dim) {
  return routed_dim(graph, placement, shape, dim, [](int) { return 1; });
}

DimRings ring_dim(const Graph& graph, const std::vector<int>& placement,
                  const std::vector<int>& shape, int dim, DimRings& two_way) {
  return routed_dim(
      graph, placement, shape, dim, [](int) { return 1; }, &two_way);
}

DimRings two_way_ring_dim(const Graph& graph, const std::vector<int>& placement,
                          const std::vector<int>& shape, int dim) {
  DimRings two_way;
  ring_dim(graph, placement, shape, dim, two_way);
  return two_way;
}

DimRings skew_dim(const Graph& graph, const std::vector<int>& placement,
                  const std::vector<int>& shape, int dim) {
  return routed_dim(graph, placement, shape, dim, [](int g) { return -g; });
}

std::string describe_bottleneck(const Graph& graph, const DimRings& rings) {
  if (rings.bottleneck_link < 0) return "-";
  const Link& l = graph.link(rings.bottleneck_link);
  const std::string from = graph.node_name(rings.bottleneck_forward ? l.a : l.b);
  const std::string to = graph.node_name(rings.bottleneck_forward ? l.b : l.a);
  return fmt::format("{} ({} -> {}, {}, {:.4g} GB/s / {} flow{})", l.name, from, to,
                     name(l.sharing), l.gbps, rings.flows, rings.flows == 1 ? "" : "s");
}

}  // namespace meshtp::topo
