#include "topo/rings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <vector>

#include "core/error.hpp"

namespace meshtp::topo {
namespace {

// Every group's members each send one message at once, member i → member
// (i + offset(g)) mod P of group g (no message when that is i itself); routes them and finds
// the flows' least share (the model in rings.hpp). With `two_way` set, also what every
// member gets when it sends a second message at the same time, to member (i − offset(g))
// mod P: the same routes plus the reverse ones, flows counted over both (Wang's two-way
// ring). The forward messages are counted once for both answers.
//
// Only totals are needed, so the router counts every link direction's crossings in one go
// (Graph::count_routes: a torus without walking its routes) and gives the longest and the
// slowest route. B' is then the least share over the link directions crossed, and the
// bottleneck is the first hop, in message order, with that share — what taking the least
// share hop by hop in that order finds: the only hops routed one by one are those of the
// messages before it.
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
  // Every message of every group, group by group.
  auto messages = [&](int sign) {
    std::vector<Message> m;
    m.reserve(static_cast<std::size_t>(n));
    for (int g = 0; g < out.groups; ++g) {
      const int step = ((sign * offset(g) % out.size) + out.size) % out.size;
      if (step == 0) continue;
      for (int i = 0; i < out.size; ++i) {
        m.push_back(Message{.src = device(g, i), .dst = device(g, (i + step) % out.size)});
      }
    }
    return m;
  };
  // Links by id without Graph::link's range check: the router gave these ids.
  const std::vector<Link>& links = graph.links();
  std::vector<int> crossings(links.size() * 2, 0);
  // Concurrent flows on a link direction: split-duplex links count each direction, shared
  // links both together; fatpipe links give every flow their bandwidth (one flow).
  auto flows = [&](std::size_t link, bool forward) {
    switch (links[link].sharing) {
      case Sharing::kSplitDuplex:
        return crossings[link * 2 + (forward ? 0 : 1)];
      case Sharing::kShared:
        return crossings[link * 2] + crossings[link * 2 + 1];
      case Sharing::kFatpipe:
        break;
    }
    return 1;
  };
  // The least share over the crossed link directions; the first hop with it; the slowest
  // route; the longest.
  auto least_share = [&](DimRings& r, const RouteTotals& totals,
                         std::initializer_list<const std::vector<Message>*> lists) {
    r.latency_us = totals.max_latency_us;
    r.max_hops = totals.max_hops;
    r.link_gbps = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < crossings.size(); ++k) {
      if (crossings[k] == 0) continue;
      const std::size_t link = k / 2;
      r.link_gbps = std::min(r.link_gbps, links[link].gbps / flows(link, k % 2 == 0));
    }
    Route hops;
    for (const std::vector<Message>* list : lists) {
      for (const Message& m : *list) {
        hops.clear();
        graph.append_route(m.src, m.dst, hops);
        for (const Hop& h : hops) {
          const std::size_t link = static_cast<std::size_t>(h.link);
          const int f = flows(link, h.forward);
          if (links[link].gbps / f == r.link_gbps) {
            r.bottleneck_link = h.link;
            r.bottleneck_forward = h.forward;
            r.flows = f;
            return;
          }
        }
      }
    }
    // Messages that are all local (two ranks on one device is rejected by the placement;
    // this is a route with no link, e.g. an explicit empty route) have no bottleneck.
    fail("mesh dim {}: its messages cross no link", dim);
  };
  const std::vector<Message> forward = messages(+1);
  if (forward.empty()) return out;  // nothing moves (a skew on a size-1 other dim)
  const RouteTotals forward_totals = graph.count_routes(forward, crossings);
  least_share(out, forward_totals, {&forward});
  if (two_way != nullptr) {
    const std::vector<Message> reverse = messages(-1);
    const RouteTotals reverse_totals = graph.count_routes(reverse, crossings);
    const RouteTotals both{
        .max_hops = std::max(forward_totals.max_hops, reverse_totals.max_hops),
        .max_latency_us = std::max(forward_totals.max_latency_us, reverse_totals.max_latency_us)};
    least_share(*two_way, both, {&forward, &reverse});
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
