#include "topo/networks.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <memory>

#include "core/error.hpp"

namespace meshtp::topo {

Graph single_switch(const SwitchSpec& spec) {
  Graph g(spec.devices);
  const int sw = g.add_router("switch");
  for (int d = 0; d < spec.devices; ++d) {
    g.add_link(fmt::format("dev{}-switch", d), d, sw, spec.link_gbps, spec.latency_us);
  }
  g.star = true;
  return g;
}

// ---- fat tree --------------------------------------------------------------------------

namespace {

struct FatTreeShape {
  std::vector<int> down, up;
  int levels() const { return static_cast<int>(down.size()); }
  // Radix of digit i (1-based) for a node of level l.
  int radix(int l, int i) const {
    return i <= l ? up[static_cast<std::size_t>(i - 1)] : down[static_cast<std::size_t>(i - 1)];
  }
  int count(int l) const {
    int c = 1;
    for (int i = 1; i <= levels(); ++i) c *= radix(l, i);
    return c;
  }
  std::vector<int> digits(int l, int index) const {
    std::vector<int> d(static_cast<std::size_t>(levels()) + 1, 0);  // d[1..h]
    for (int i = 1; i <= levels(); ++i) {
      d[static_cast<std::size_t>(i)] = index % radix(l, i);
      index /= radix(l, i);
    }
    return d;
  }
  int index(int l, const std::vector<int>& d) const {
    int x = 0;
    for (int i = levels(); i >= 1; --i) x = x * radix(l, i) + d[static_cast<std::size_t>(i)];
    return x;
  }
};

class FatTreeRouter : public Router {
 public:
  FatTreeRouter(FatTreeShape shape, std::vector<std::vector<std::vector<int>>> uplink)
      : shape_(std::move(shape)), uplink_(std::move(uplink)) {}

  Route route(const Graph&, int src, int dst) const override {
    const std::vector<int> target = shape_.digits(0, dst);
    Route r;
    int l = 0;
    std::vector<int> d = shape_.digits(0, src);
    int divisor = 1;
    auto is_ancestor = [&] {
      for (int i = l + 1; i <= shape_.levels(); ++i) {
        if (d[static_cast<std::size_t>(i)] != target[static_cast<std::size_t>(i)]) return false;
      }
      return true;
    };
    while (!is_ancestor()) {
      const int p = (dst / divisor) % shape_.up[static_cast<std::size_t>(l)];
      r.push_back(Hop{.link = uplink_[static_cast<std::size_t>(l)]
                                     [static_cast<std::size_t>(shape_.index(l, d))]
                                     [static_cast<std::size_t>(p)],
                      .forward = true});
      divisor *= shape_.up[static_cast<std::size_t>(l)];
      d[static_cast<std::size_t>(l + 1)] = p;
      ++l;
    }
    while (l > 0) {
      const int p = d[static_cast<std::size_t>(l)];
      d[static_cast<std::size_t>(l)] = target[static_cast<std::size_t>(l)];
      --l;
      r.push_back(Hop{.link = uplink_[static_cast<std::size_t>(l)]
                                     [static_cast<std::size_t>(shape_.index(l, d))]
                                     [static_cast<std::size_t>(p)],
                      .forward = false});
    }
    return r;
  }

 private:
  FatTreeShape shape_;
  std::vector<std::vector<std::vector<int>>> uplink_;  // [level][node][parent] → link id
};

}  // namespace

Graph fat_tree(const FatTreeSpec& spec) {
  const std::size_t h = spec.down.size();
  MESHTP_CHECK(h >= 1, "fat-tree: 'down' must list at least one level");
  MESHTP_CHECK(spec.up.size() == h, "fat-tree: 'up' has {} entries but 'down' has {}",
               spec.up.size(), h);
  MESHTP_CHECK(spec.link_gbps.size() == h, "fat-tree: 'link_gbps' has {} entries, expected {} "
               "(one per level of links)", spec.link_gbps.size(), h);
  std::int64_t n = 1;
  for (std::size_t i = 0; i < h; ++i) {
    MESHTP_CHECK(spec.down[i] >= 1, "fat-tree: down[{}]={} must be at least 1", i, spec.down[i]);
    MESHTP_CHECK(spec.up[i] >= 1, "fat-tree: up[{}]={} must be at least 1", i, spec.up[i]);
    n *= spec.down[i];
    MESHTP_CHECK(n <= (1 << 20), "fat-tree: down[0..{}] give {} devices, more than 2^20", i, n);
  }
  const FatTreeShape shape{spec.down, spec.up};
  Graph g(static_cast<int>(n));
  std::vector<std::vector<int>> node(h + 1);  // [level][index] → node id
  for (int d = 0; d < n; ++d) node[0].push_back(d);
  for (int l = 1; l <= static_cast<int>(h); ++l) {
    for (int x = 0; x < shape.count(l); ++x) {
      node[static_cast<std::size_t>(l)].push_back(g.add_router(fmt::format("sw{}-{}", l, x)));
    }
  }
  std::vector<std::vector<std::vector<int>>> uplink(h);
  for (int l = 0; l < static_cast<int>(h); ++l) {
    for (int x = 0; x < shape.count(l); ++x) {
      std::vector<int> d = shape.digits(l, x);
      std::vector<int> ups;
      for (int p = 0; p < spec.up[static_cast<std::size_t>(l)]; ++p) {
        d[static_cast<std::size_t>(l + 1)] = p;
        const int child = node[static_cast<std::size_t>(l)][static_cast<std::size_t>(x)];
        const int parent = node[static_cast<std::size_t>(l + 1)]
                               [static_cast<std::size_t>(shape.index(l + 1, d))];
        ups.push_back(g.add_link(fmt::format("{}-{}", g.node_name(child), g.node_name(parent)),
                                 child, parent, spec.link_gbps[static_cast<std::size_t>(l)],
                                 spec.latency_us));
      }
      uplink[static_cast<std::size_t>(l)].push_back(std::move(ups));
    }
  }
  g.set_router(std::make_shared<FatTreeRouter>(shape, std::move(uplink)));
  return g;
}

// ---- dragonfly -------------------------------------------------------------------------

namespace {

class DragonflyRouter : public Router {
 public:
  DragonflyRouter(DragonflySpec spec, std::vector<int> access,
                  std::vector<std::vector<int>> local, std::vector<std::vector<int>> global)
      : spec_(spec), access_(std::move(access)), local_(std::move(local)),
        global_(std::move(global)) {}

  // Router (global index) of group g holding the link to group h.
  int gateway(int g, int h) const {
    const int other = h < g ? h : h - 1;
    return g * spec_.routers + other % spec_.routers;
  }

  Route route(const Graph&, int src, int dst) const override {
    const int rs = src / spec_.devices, rd = dst / spec_.devices;
    Route r{Hop{.link = access_[static_cast<std::size_t>(src)], .forward = true}};
    auto local = [&](int a, int b) {
      if (a == b) return;
      const int lo = std::min(a, b), hi = std::max(a, b);
      r.push_back(Hop{.link = local_[static_cast<std::size_t>(lo)]
                                    [static_cast<std::size_t>(hi % spec_.routers)],
                      .forward = a < b});
    };
    const int gs = rs / spec_.routers, gd = rd / spec_.routers;
    if (gs == gd) {
      local(rs, rd);
    } else {
      const int out = gateway(gs, gd), in = gateway(gd, gs);
      local(rs, out);
      const int lo = std::min(gs, gd), hi = std::max(gs, gd);
      r.push_back(Hop{.link = global_[static_cast<std::size_t>(lo)][static_cast<std::size_t>(hi)],
                      .forward = gs < gd});
      local(in, rd);
    }
    r.push_back(Hop{.link = access_[static_cast<std::size_t>(dst)], .forward = false});
    return r;
  }

 private:
  DragonflySpec spec_;
  std::vector<int> access_;              // device → link to its router (a = device)
  std::vector<std::vector<int>> local_;  // [router lo][hi index in group] → link (a = lo)
  std::vector<std::vector<int>> global_;  // [group lo][group hi] → link (a = lo's gateway)
};

}  // namespace

Graph dragonfly(const DragonflySpec& spec) {
  MESHTP_CHECK(spec.groups >= 1 && spec.routers >= 1 && spec.devices >= 1,
               "dragonfly: groups={}, routers={}, devices={} must all be at least 1",
               spec.groups, spec.routers, spec.devices);
  const std::int64_t n = static_cast<std::int64_t>(spec.groups) * spec.routers * spec.devices;
  MESHTP_CHECK(n <= (1 << 20), "dragonfly: {} devices is more than 2^20", n);
  Graph g(static_cast<int>(n));
  const int routers = spec.groups * spec.routers;
  std::vector<int> router_node;
  for (int r = 0; r < routers; ++r) {
    router_node.push_back(
        g.add_router(fmt::format("g{}-r{}", r / spec.routers, r % spec.routers)));
  }
  std::vector<int> access;
  for (int d = 0; d < n; ++d) {
    const int r = router_node[static_cast<std::size_t>(d / spec.devices)];
    access.push_back(g.add_link(fmt::format("dev{}-{}", d, g.node_name(r)), d, r,
                                spec.device_gbps, spec.latency_us));
  }
  std::vector<std::vector<int>> local(static_cast<std::size_t>(routers),
                                      std::vector<int>(static_cast<std::size_t>(spec.routers), -1));
  for (int a = 0; a < routers; ++a) {
    for (int b = a + 1; b < routers && b / spec.routers == a / spec.routers; ++b) {
      local[static_cast<std::size_t>(a)][static_cast<std::size_t>(b % spec.routers)] =
          g.add_link(fmt::format("{}-{}", g.node_name(router_node[static_cast<std::size_t>(a)]),
                                 g.node_name(router_node[static_cast<std::size_t>(b)])),
                     router_node[static_cast<std::size_t>(a)],
                     router_node[static_cast<std::size_t>(b)], spec.local_gbps, spec.latency_us);
    }
  }
  auto router = std::make_shared<DragonflyRouter>(spec, access, local,
                                                  std::vector<std::vector<int>>{});
  std::vector<std::vector<int>> global(static_cast<std::size_t>(spec.groups),
                                       std::vector<int>(static_cast<std::size_t>(spec.groups), -1));
  for (int a = 0; a < spec.groups; ++a) {
    for (int b = a + 1; b < spec.groups; ++b) {
      const int ra = router_node[static_cast<std::size_t>(router->gateway(a, b))];
      const int rb = router_node[static_cast<std::size_t>(router->gateway(b, a))];
      global[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] =
          g.add_link(fmt::format("global-g{}-g{}", a, b), ra, rb, spec.global_gbps,
                     spec.latency_us);
    }
  }
  g.set_router(std::make_shared<DragonflyRouter>(spec, std::move(access), std::move(local),
                                                 std::move(global)));
  return g;
}

}  // namespace meshtp::topo
