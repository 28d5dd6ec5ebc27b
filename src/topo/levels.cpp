#include "topo/levels.hpp"

#include <fmt/format.h>

#include <deque>
#include <memory>
#include <set>

#include "core/error.hpp"

namespace meshtp::topo {

double Level::p2p(int a, int b) const {
  if (a == b) return 0;
  if (p2p_uniform_gbps > 0) return p2p_uniform_gbps;
  if (p2p_gbps.empty()) return 0;
  return p2p_gbps[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
}

namespace {

// Per level: how a transfer crosses it.
struct LevelLinks {
  int members = 1;             // R_j
  int devices_per_member = 1;  // D_j
  bool p2p = false;
  std::vector<int> up;         // switch kind: global member → uplink (a = member side)
  std::vector<int> nic;        // p2p kind: global member → port–nic link, −1 when uncapped
  // p2p kind: [parent][a][b] → link id between members a < b (a = a's side), −1 if none.
  std::vector<std::vector<std::vector<int>>> pair;
  // p2p kind: member-index BFS tree per source: next[src][dst] = member after src on the way.
  std::vector<std::vector<int>> next;
  std::vector<int> internal;   // global member → fatpipe to its parent's port (a = member)
};

class LevelsRouter : public Router {
 public:
  explicit LevelsRouter(std::vector<LevelLinks> levels) : levels_(std::move(levels)) {}

  Route route(const Graph&, int src, int dst) const override {
    const int depth = static_cast<int>(levels_.size());
    int j = 0;
    while (src / levels_[static_cast<std::size_t>(j)].devices_per_member ==
           dst / levels_[static_cast<std::size_t>(j)].devices_per_member) {
      ++j;  // src != dst, so some level separates them
    }
    Route r;
    for (int k = depth - 1; k > j; --k) {
      const LevelLinks& lk = levels_[static_cast<std::size_t>(k)];
      r.push_back(Hop{.link = lk.internal[static_cast<std::size_t>(src / lk.devices_per_member)],
                      .forward = true});
    }
    const LevelLinks& l = levels_[static_cast<std::size_t>(j)];
    const int ms = src / l.devices_per_member, mt = dst / l.devices_per_member;
    if (!l.p2p) {
      r.push_back(Hop{.link = l.up[static_cast<std::size_t>(ms)], .forward = true});
      r.push_back(Hop{.link = l.up[static_cast<std::size_t>(mt)], .forward = false});
    } else {
      const int parent = ms / l.members;
      const auto& pair = l.pair[static_cast<std::size_t>(parent)];
      if (l.nic[static_cast<std::size_t>(ms)] >= 0) {
        r.push_back(Hop{.link = l.nic[static_cast<std::size_t>(ms)], .forward = true});
      }
      for (int x = ms % l.members, t = mt % l.members; x != t;) {
        const int y = l.next[static_cast<std::size_t>(x)][static_cast<std::size_t>(t)];
        const int lo = std::min(x, y), hi = std::max(x, y);
        r.push_back(Hop{.link = pair[static_cast<std::size_t>(lo)][static_cast<std::size_t>(hi)],
                        .forward = x < y});
        x = y;
      }
      if (l.nic[static_cast<std::size_t>(mt)] >= 0) {
        r.push_back(Hop{.link = l.nic[static_cast<std::size_t>(mt)], .forward = false});
      }
    }
    for (int k = j + 1; k < depth; ++k) {
      const LevelLinks& lk = levels_[static_cast<std::size_t>(k)];
      r.push_back(Hop{.link = lk.internal[static_cast<std::size_t>(dst / lk.devices_per_member)],
                      .forward = false});
    }
    return r;
  }

 private:
  std::vector<LevelLinks> levels_;
};

// BFS trees over one level's p2p links (member indices): next[s][t] = first member after s.
std::vector<std::vector<int>> p2p_paths(const Level& level, std::string_view where) {
  const int r = level.members;
  std::vector<std::vector<int>> next(static_cast<std::size_t>(r), std::vector<int>(
                                     static_cast<std::size_t>(r), -1));
  for (int t = 0; t < r; ++t) {
    // Search from the destination so next[s][t] is s's parent in t's tree.
    std::vector<int> parent(static_cast<std::size_t>(r), -2);
    parent[static_cast<std::size_t>(t)] = t;
    std::deque<int> queue{t};
    while (!queue.empty()) {
      const int u = queue.front();
      queue.pop_front();
      for (int v = 0; v < r; ++v) {
        if (level.p2p(u, v) > 0 && parent[static_cast<std::size_t>(v)] == -2) {
          parent[static_cast<std::size_t>(v)] = u;
          queue.push_back(v);
        }
      }
    }
    for (int s = 0; s < r; ++s) {
      MESHTP_CHECK(parent[static_cast<std::size_t>(s)] != -2, "disconnected graph: {}: members "
                   "{} and {} have no p2p path (p2p_gbps is 0 on every way between them)",
                   where, s, t);
      next[static_cast<std::size_t>(s)][static_cast<std::size_t>(t)] =
          parent[static_cast<std::size_t>(s)];
    }
  }
  return next;
}

}  // namespace

Graph levels_graph(const std::vector<Level>& levels) {
  MESHTP_CHECK(!levels.empty(), "levels: needs at least one level");
  const int depth = static_cast<int>(levels.size());
  std::vector<int> dpm(static_cast<std::size_t>(depth), 1);  // D_j
  for (int j = depth - 1; j > 0; --j) {
    dpm[static_cast<std::size_t>(j - 1)] =
        dpm[static_cast<std::size_t>(j)] * levels[static_cast<std::size_t>(j)].members;
  }
  const int n = dpm[0] * levels[0].members;
  std::set<std::string> names;
  for (const Level& l : levels) {
    MESHTP_CHECK(names.insert(l.name).second, "levels: two levels are named '{}'; the graph "
                 "form needs distinct names", l.name);
  }
  Graph g(n);
  // Ports: devices at the innermost level, routers above.
  std::vector<std::vector<int>> port(static_cast<std::size_t>(depth));
  for (int j = 0; j < depth; ++j) {
    const Level& l = levels[static_cast<std::size_t>(j)];
    const int count = n / dpm[static_cast<std::size_t>(j)];
    for (int m = 0; m < count; ++m) {
      port[static_cast<std::size_t>(j)].push_back(
          j == depth - 1 ? m : g.add_router(fmt::format("{}{}", l.name, m)));
    }
  }
  std::vector<LevelLinks> out(static_cast<std::size_t>(depth));
  for (int j = 0; j < depth; ++j) {
    const Level& l = levels[static_cast<std::size_t>(j)];
    LevelLinks& ll = out[static_cast<std::size_t>(j)];
    ll.members = l.members;
    ll.devices_per_member = dpm[static_cast<std::size_t>(j)];
    ll.p2p = l.has_p2p();
    const auto& ports = port[static_cast<std::size_t>(j)];
    const int count = static_cast<int>(ports.size());
    if (j > 0) {
      const auto& parents = port[static_cast<std::size_t>(j - 1)];
      for (int m = 0; m < count; ++m) {
        const int up = parents[static_cast<std::size_t>(m / l.members)];
        ll.internal.push_back(g.add_link(
            fmt::format("{}-{}", g.node_name(ports[static_cast<std::size_t>(m)]), g.node_name(up)),
            ports[static_cast<std::size_t>(m)], up, kUnchargedGbps, 0, Sharing::kFatpipe));
      }
    }
    if (l.members == 1) continue;  // nothing crosses a one-member level
    const int parents = count / l.members;
    if (!ll.p2p) {
      for (int p = 0; p < parents; ++p) {
        const int sw = g.add_router(parents == 1 ? fmt::format("{}-switch", l.name)
                                                 : fmt::format("{}-switch{}", l.name, p));
        for (int a = 0; a < l.members; ++a) {
          const int m = p * l.members + a;
          ll.up.push_back(g.add_link(fmt::format("{}{}-up", l.name, m),
                                     ports[static_cast<std::size_t>(m)], sw, l.group_gbps,
                                     l.latency_us / 2));
        }
      }
      continue;
    }
    const std::string where = fmt::format("level '{}'", l.name);
    ll.next = p2p_paths(l, where);
    for (int a = 0; a < l.members; ++a) {
      for (int b = a + 1; b < l.members; ++b) {
        MESHTP_CHECK(l.p2p(a, b) == l.p2p(b, a), "{}: p2p_gbps[{}][{}]={} differs from "
                     "p2p_gbps[{}][{}]={}; the graph form needs a symmetric matrix", where, a, b,
                     l.p2p(a, b), b, a, l.p2p(b, a));
      }
    }
    ll.nic.assign(static_cast<std::size_t>(count), -1);
    std::vector<int> attach(ports);
    for (int m = 0; m < count; ++m) {
      double total = 0;
      for (int b = 0; b < l.members; ++b) total += l.p2p(m % l.members, b);
      if (l.group_gbps < total * (1 - 1e-12)) {
        const std::string nic = fmt::format("{}{}-nic", l.name, m);
        attach[static_cast<std::size_t>(m)] = g.add_router(nic);
        ll.nic[static_cast<std::size_t>(m)] = g.add_link(
            nic, ports[static_cast<std::size_t>(m)], attach[static_cast<std::size_t>(m)],
            l.group_gbps, 0);
      }
    }
    ll.pair.resize(static_cast<std::size_t>(parents));
    for (int p = 0; p < parents; ++p) {
      auto& pair = ll.pair[static_cast<std::size_t>(p)];
      pair.assign(static_cast<std::size_t>(l.members),
                  std::vector<int>(static_cast<std::size_t>(l.members), -1));
      for (int a = 0; a < l.members; ++a) {
        for (int b = a + 1; b < l.members; ++b) {
          if (l.p2p(a, b) <= 0) continue;
          const int ma = p * l.members + a, mb = p * l.members + b;
          pair[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] = g.add_link(
              fmt::format("{}{}-{}{}", l.name, ma, l.name, mb),
              attach[static_cast<std::size_t>(ma)], attach[static_cast<std::size_t>(mb)],
              l.p2p(a, b), l.latency_us);
        }
      }
    }
  }
  g.set_router(std::make_shared<LevelsRouter>(std::move(out)));
  g.star = depth == 1 && !levels[0].has_p2p();
  return g;
}

}  // namespace meshtp::topo
