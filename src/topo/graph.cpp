#include "topo/graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>

#include "core/error.hpp"

namespace meshtp::topo {

const char* name(Sharing s) {
  switch (s) {
    case Sharing::kSplitDuplex: return "split-duplex";
    case Sharing::kShared: return "shared";
    case Sharing::kFatpipe: return "fatpipe";
  }
  return "?";
}

Sharing parse_sharing(std::string_view text, std::string_view where) {
  for (const Sharing s : {Sharing::kSplitDuplex, Sharing::kShared, Sharing::kFatpipe}) {
    if (text == name(s)) return s;
  }
  fail("{}: unknown sharing '{}'; valid: split-duplex, shared, fatpipe", where, text);
}

Graph::Graph(int devices, std::string device_prefix) : devices_(devices) {
  MESHTP_CHECK(devices >= 1 && devices <= (1 << 20), "graph: devices={} must be between 1 and "
               "2^20", devices);
  names_.reserve(static_cast<std::size_t>(devices));
  for (int i = 0; i < devices; ++i) names_.push_back(fmt::format("{}{}", device_prefix, i));
  adjacency_.resize(static_cast<std::size_t>(devices));
}

const std::string& Graph::node_name(int node) const {
  MESHTP_CHECK(node >= 0 && node < node_count(), "graph: node {} out of range [0, {})", node,
               node_count());
  return names_[static_cast<std::size_t>(node)];
}

const Link& Graph::link(int id) const {
  MESHTP_CHECK(id >= 0 && id < static_cast<int>(links_.size()), "graph: link {} out of range",
               id);
  return links_[static_cast<std::size_t>(id)];
}

int Graph::add_router(std::string name) {
  shortest_paths_.reset();
  names_.push_back(std::move(name));
  adjacency_.emplace_back();
  return node_count() - 1;
}

int Graph::add_link(std::string name, int a, int b, double gbps, double latency_us,
                    Sharing sharing) {
  MESHTP_CHECK(a >= 0 && a < node_count() && b >= 0 && b < node_count(),
               "link '{}': endpoints {} and {} must be nodes in [0, {})", name, a, b,
               node_count());
  MESHTP_CHECK(a != b, "link '{}': both ends are node '{}'", name, node_name(a));
  MESHTP_CHECK(std::isfinite(gbps) && gbps > 0, "link '{}': bandwidth gbps={} must be positive",
               name, gbps);
  MESHTP_CHECK(std::isfinite(latency_us) && latency_us >= 0,
               "link '{}': latency_us={} must not be negative", name, latency_us);
  shortest_paths_.reset();
  const int id = static_cast<int>(links_.size());
  links_.push_back(Link{.name = std::move(name), .a = a, .b = b, .gbps = gbps,
                        .latency_us = latency_us, .sharing = sharing});
  adjacency_[static_cast<std::size_t>(a)].push_back(id);
  adjacency_[static_cast<std::size_t>(b)].push_back(id);
  return id;
}

void Graph::set_route(int src, int dst, Route route) {
  MESHTP_CHECK(src >= 0 && src < devices_ && dst >= 0 && dst < devices_ && src != dst,
               "route {} -> {}: both ends must be distinct devices in [0, {})", src, dst,
               devices_);
  explicit_routes_[{src, dst}] = std::move(route);
}

Route Graph::route(int src, int dst) const {
  MESHTP_CHECK(src >= 0 && src < devices_ && dst >= 0 && dst < devices_,
               "route {} -> {}: devices must be in [0, {})", src, dst, devices_);
  if (src == dst) return {};
  if (const auto it = explicit_routes_.find({src, dst}); it != explicit_routes_.end()) {
    return it->second;
  }
  if (router_) return router_->route(*this, src, dst);
  if (!shortest_paths_) shortest_paths_ = std::make_shared<ShortestPathRouter>();
  return shortest_paths_->route(*this, src, dst);
}

void Graph::append_route(int src, int dst, Route& out) const {
  MESHTP_CHECK(src >= 0 && src < devices_ && dst >= 0 && dst < devices_,
               "route {} -> {}: devices must be in [0, {})", src, dst, devices_);
  if (src == dst) return;
  if (router_ && explicit_routes_.empty()) return router_->append_route(*this, src, dst, out);
  const Route r = route(src, dst);
  out.insert(out.end(), r.begin(), r.end());
}

namespace {

// Every message's route, built by `append` into one buffer, counted hop by hop.
template <typename Append>
RouteTotals count_walked(const Graph& graph, const std::vector<Message>& messages,
                         std::vector<int>& crossings, Append append) {
  // Links by id without Graph::link's range check: the routes gave these ids.
  const std::vector<Link>& links = graph.links();
  RouteTotals totals;
  Route route;
  for (const Message& m : messages) {
    route.clear();
    append(m.src, m.dst, route);
    double latency = 0;  // Graph::latency_us: the links' in order
    for (const Hop& h : route) {
      ++crossings[static_cast<std::size_t>(h.link) * 2 + (h.forward ? 0 : 1)];
      latency += links[static_cast<std::size_t>(h.link)].latency_us;
    }
    totals.max_hops = std::max(totals.max_hops, static_cast<int>(route.size()));
    totals.max_latency_us = std::max(totals.max_latency_us, latency);
  }
  return totals;
}

}  // namespace

RouteTotals Router::count_routes(const Graph& graph, const std::vector<Message>& messages,
                                 std::vector<int>& crossings) const {
  return count_walked(graph, messages, crossings, [&](int src, int dst, Route& out) {
    if (src != dst) append_route(graph, src, dst, out);
  });
}

RouteTotals Graph::count_routes(const std::vector<Message>& messages,
                                std::vector<int>& crossings) const {
  MESHTP_CHECK(crossings.size() == links_.size() * 2,
               "count_routes: {} crossing counters for "
               "{} links (two a link)",
               crossings.size(), links_.size());
  for (const Message& m : messages) {
    MESHTP_CHECK(m.src >= 0 && m.src < devices_ && m.dst >= 0 && m.dst < devices_,
                 "route {} -> {}: devices must be in [0, {})", m.src, m.dst, devices_);
  }
  if (router_ && explicit_routes_.empty()) return router_->count_routes(*this, messages, crossings);
  return count_walked(*this, messages, crossings,
                      [this](int src, int dst, Route& out) { append_route(src, dst, out); });
}

double Graph::latency_us(const Route& route) const {
  double total = 0;
  for (const Hop& h : route) total += link(h.link).latency_us;
  return total;
}

namespace {

// The node a route reaches from `node` by crossing `hop`, or -1 if the hop does not start
// at `node`.
int cross(const Link& l, const Hop& hop, int node) {
  const int from = hop.forward ? l.a : l.b;
  if (from != node) return -1;
  return hop.forward ? l.b : l.a;
}

}  // namespace

void Graph::validate() const {
  // Connectivity: every device reachable from device 0 over the links.
  std::vector<char> seen(names_.size(), 0);
  std::deque<int> queue{0};
  seen[0] = 1;
  while (!queue.empty()) {
    const int u = queue.front();
    queue.pop_front();
    for (const int id : adjacency_[static_cast<std::size_t>(u)]) {
      const Link& l = links_[static_cast<std::size_t>(id)];
      const int v = l.a == u ? l.b : l.a;
      if (!seen[static_cast<std::size_t>(v)]) {
        seen[static_cast<std::size_t>(v)] = 1;
        queue.push_back(v);
      }
    }
  }
  for (int d = 1; d < devices_; ++d) {
    MESHTP_CHECK(seen[static_cast<std::size_t>(d)], "disconnected graph: device '{}' cannot be "
                 "reached from device '{}'", node_name(d), node_name(0));
  }
  // Routes follow links end to end: check every device to its neighbours in id order and to
  // device 0 (enough to catch a routing rule that does not match its links).
  auto check = [this](int s, int t) {
    if (s == t) return;
    const Route r = route(s, t);
    MESHTP_CHECK(!r.empty(), "route {} -> {} is empty", node_name(s), node_name(t));
    int at = s;
    for (const Hop& h : r) {
      const int next = cross(link(h.link), h, at);
      MESHTP_CHECK(next >= 0, "route {} -> {}: link '{}' does not start at '{}'", node_name(s),
                   node_name(t), link(h.link).name, node_name(at));
      at = next;
    }
    MESHTP_CHECK(at == t, "route {} -> {} ends at '{}'", node_name(s), node_name(t),
                 node_name(at));
  };
  for (int d = 0; d < devices_; ++d) {
    check(d, (d + 1) % devices_);
    check(d, 0);
    check(0, d);
  }
  for (const auto& [pair, r] : explicit_routes_) check(pair.first, pair.second);
}

Route ShortestPathRouter::route(const Graph& graph, int src, int dst) const {
  auto [it, fresh] = parent_link_.try_emplace(src);
  std::vector<int>& parent = it->second;
  if (fresh) {
    parent.assign(static_cast<std::size_t>(graph.node_count()), -2);  // -2: unseen
    parent[static_cast<std::size_t>(src)] = -1;
    std::deque<int> queue{src};
    while (!queue.empty()) {
      const int u = queue.front();
      queue.pop_front();
      // Devices other than the source forward too (a torus chip is its own router).
      for (const int id : graph.adjacency()[static_cast<std::size_t>(u)]) {
        const Link& l = graph.link(id);
        const int v = l.a == u ? l.b : l.a;
        if (parent[static_cast<std::size_t>(v)] == -2) {
          parent[static_cast<std::size_t>(v)] = id;
          queue.push_back(v);
        }
      }
    }
  }
  MESHTP_CHECK(parent[static_cast<std::size_t>(dst)] != -2,
               "disconnected graph: no path from '{}' to '{}'", graph.node_name(src),
               graph.node_name(dst));
  Route reversed;
  for (int v = dst; v != src;) {
    const int id = parent[static_cast<std::size_t>(v)];
    const Link& l = graph.link(id);
    const bool forward = l.b == v;
    reversed.push_back(Hop{.link = id, .forward = forward});
    v = forward ? l.a : l.b;
  }
  return Route(reversed.rbegin(), reversed.rend());
}

}  // namespace meshtp::topo
