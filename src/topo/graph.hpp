// A cluster as a graph: devices and routers joined by links, and a routing rule that gives
// the links a message from one device to another crosses. One description, two consumers:
// the SimGrid platform writer (topo/simgrid.hpp) emits exactly these links and routes, and
// the planner (topo/rings.hpp) prices each mesh dim's ring collectives on the same routes,
// so the simulator and the planner disagree only where their *models* do, never because
// they see different networks.
//
//   nodes      [0, devices) are devices (hosts that run ranks), the rest are routers
//              (switches, NICs, ports). Devices may forward traffic (a torus chip does).
//   link       two endpoints a, b; bandwidth in GB/s (1e9 B/s); latency in µs; sharing:
//                split-duplex  a→b and b→a are independent, each `gbps` (NVLink, ICI, IB)
//                shared        both directions share `gbps` (a bus, a half-duplex cable)
//                fatpipe       every flow gets `gbps`, no sharing (a non-blocking crossbar
//                              abstracted as one link)
//              the names SimGrid gives these: SPLITDUPLEX, SHARED, FATPIPE.
//   route      the ordered hops (link, direction) from one device to another. Each
//              generator brings its routing rule (dimension order on a torus, up/down
//              d-mod-k on a fat tree, minimal on a dragonfly, the outermost level crossed
//              on a hierarchical matrix); explicit link lists use shortest paths in hops
//              (ties: the lowest link index first) unless routes are given.
//
// Worked example: a 4-ring of 25 GB/s split-duplex links 0–1, 1–2, 2–3, 3–0 (link ids 0..3).
// route(0, 2) = [(0, a→b), (1, a→b)]: two hops, latency = 2 × the link latency. A ring
// collective 0→1→2→3→0 puts one flow on each link direction, so each hop gets 25 GB/s.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace meshtp::topo {

enum class Sharing { kSplitDuplex, kShared, kFatpipe };
const char* name(Sharing s);  // "split-duplex", "shared", "fatpipe"
// Throws meshtp::Error naming `where` and the valid values.
Sharing parse_sharing(std::string_view text, std::string_view where);

struct Link {
  std::string name;
  int a = 0;
  int b = 0;
  double gbps = 0;
  double latency_us = 0;
  Sharing sharing = Sharing::kSplitDuplex;
};

// One link crossed in one direction: forward = from link.a to link.b.
struct Hop {
  int link = 0;
  bool forward = true;
  friend bool operator==(const Hop&, const Hop&) = default;
};
using Route = std::vector<Hop>;

class Graph;

// One message: from device `src` to device `dst`.
struct Message {
  int src = 0;
  int dst = 0;
};

// What many routes add up to (Graph::count_routes), for a caller that needs only totals.
struct RouteTotals {
  int max_hops = 0;           // links on the longest route
  double max_latency_us = 0;  // the slowest route's Graph::latency_us
};

// A routing rule. Implementations live with their generator; routes must start at `src`,
// end at `dst` and follow links end to end (Graph::validate checks a sample).
class Router {
 public:
  virtual ~Router() = default;
  virtual Route route(const Graph& graph, int src, int dst) const = 0;
  // route()'s hops appended to `out`: a caller routing every hop of every ring keeps one
  // buffer instead of a vector per route. Override where building the route is cheap.
  virtual void append_route(const Graph& graph, int src, int dst, Route& out) const {
    const Route r = route(graph, src, dst);
    out.insert(out.end(), r.begin(), r.end());
  }
  // The routes of every message counted at once: adds one to crossings[2·link + (forward ?
  // 0 : 1)] for each hop of route(src, dst) of each message (`crossings` has 2 entries per
  // link; a message to its own source has no hop) and returns the longest and slowest
  // route. A ring collective needs only these (topo/rings.hpp). The default routes every
  // message; override where the totals come cheaper than the hops (a torus).
  virtual RouteTotals count_routes(const Graph& graph, const std::vector<Message>& messages,
                                   std::vector<int>& crossings) const;
};

class Graph {
 public:
  // `devices` hosts named "<prefix><i>"; routers and links are added after.
  Graph(int devices, std::string device_prefix = "dev");

  int devices() const { return devices_; }
  int node_count() const { return static_cast<int>(names_.size()); }
  const std::string& node_name(int node) const;
  const std::vector<Link>& links() const { return links_; }
  const Link& link(int id) const;

  int add_router(std::string name);
  // Returns the link id. Throws on a bad endpoint, a non-positive bandwidth or a negative
  // latency, naming the link.
  int add_link(std::string name, int a, int b, double gbps, double latency_us,
               Sharing sharing = Sharing::kSplitDuplex);

  // The routing rule; without one, shortest paths in hops.
  void set_router(std::shared_ptr<const Router> router) { router_ = std::move(router); }
  // An explicit route for one ordered pair of devices; overrides the rule.
  void set_route(int src, int dst, Route route);

  Route route(int src, int dst) const;
  // route(src, dst)'s hops appended to `out`.
  void append_route(int src, int dst, Route& out) const;
  // Router::count_routes under this graph's routes (explicit routes included). Throws on a
  // device out of range or a `crossings` of the wrong size.
  RouteTotals count_routes(const std::vector<Message>& messages, std::vector<int>& crossings) const;
  double latency_us(const Route& route) const;

  // Throws meshtp::Error: a device no other device can reach (disconnected graph, naming the
  // device), a route that does not connect its endpoints.
  void validate() const;

  // Link ids in the order of the adjacency lists; used by the shortest-path router.
  const std::vector<std::vector<int>>& adjacency() const { return adjacency_; }

  // Torus generators set this: the dims SimGrid's TORUS cluster routes identically.
  std::vector<int> torus_dims;
  // Star generators set this: every device has one link to one switch, nothing else.
  bool star = false;

 private:
  int devices_ = 0;
  std::vector<std::string> names_;
  std::vector<Link> links_;
  std::vector<std::vector<int>> adjacency_;  // node → incident link ids, in creation order
  std::shared_ptr<const Router> router_;
  mutable std::shared_ptr<const Router> shortest_paths_;  // the default; reset on edits
  std::map<std::pair<int, int>, Route> explicit_routes_;
};

// Shortest paths in hops by breadth-first search from the source, visiting a node's links
// in creation order (so ties go to the lowest link id). Caches one search tree per source.
class ShortestPathRouter : public Router {
 public:
  Route route(const Graph& graph, int src, int dst) const override;

 private:
  mutable std::map<int, std::vector<int>> parent_link_;  // source → link into each node
};

}  // namespace meshtp::topo
