// The generators build the links their headers describe and route over them as described.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "core/error.hpp"
#include "topo/graph.hpp"
#include "levels_fixture.hpp"
#include "topo/levels.hpp"
#include "topo/networks.hpp"
#include "topo/torus.hpp"

namespace meshtp::topo {
namespace {


// Route as "link(+|-)" names, for readable expectations.
std::vector<std::string> names(const Graph& g, const Route& r) {
  std::vector<std::string> out;
  for (const Hop& h : r) out.push_back(g.link(h.link).name + (h.forward ? "+" : "-"));
  return out;
}

std::string expect_error(const auto& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Torus, LinksAndDimensionOrderRouting) {
  const Graph g = torus({.dims = {4, 4}, .link_gbps = 25, .latency_us = 1});
  EXPECT_EQ(g.devices(), 16);
  EXPECT_EQ(g.links().size(), 32u);  // one per device and dim
  g.validate();
  // 0 → 10 = (2, 2): x first, 2 is exactly half way round and SimGrid goes "+".
  EXPECT_EQ(names(g, g.route(0, 10)),
            (std::vector<std::string>{"torus-0-d0+", "torus-1-d0+", "torus-2-d1+",
                                      "torus-6-d1+"}));
  // 3 → 0 wraps forwards over device 3's own link; 0 → 3 goes "−" over the same link.
  EXPECT_EQ(names(g, g.route(3, 0)), std::vector<std::string>{"torus-3-d0+"});
  EXPECT_EQ(names(g, g.route(0, 3)), std::vector<std::string>{"torus-3-d0-"});
  EXPECT_DOUBLE_EQ(g.latency_us(g.route(0, 10)), 4.0);
}

TEST(Torus, EveryRouteIsShortest) {
  const std::vector<int> dims{4, 8, 3};
  const Graph g = torus({.dims = dims, .link_gbps = 50, .latency_us = 0});
  for (int s = 0; s < g.devices(); s += 5) {
    for (int t = 0; t < g.devices(); ++t) {
      const auto a = torus_coords(dims, s), b = torus_coords(dims, t);
      std::size_t distance = 0;
      for (std::size_t j = 0; j < dims.size(); ++j) {
        const int d = std::abs(a[j] - b[j]);
        distance += static_cast<std::size_t>(std::min(d, dims[j] - d));
      }
      EXPECT_EQ(g.route(s, t).size(), distance) << s << " -> " << t;
    }
  }
}

TEST(Torus, RoutesStepAsSimGridsTorusZone) {
  // SimGrid's TorusZone steps node by node until the coordinate matches; the router walks
  // each dim's run by ring position. The same hops for every pair, on odd and even sides
  // (ties at half way round) and a dim of size 1.
  for (const std::vector<int>& dims :
       std::vector<std::vector<int>>{{2}, {5}, {6}, {4, 4}, {3, 5, 2}, {1, 6, 3}}) {
    const Graph g = torus({.dims = dims, .link_gbps = 50, .latency_us = 1});
    std::map<std::string, int> id;
    for (int l = 0; l < static_cast<int>(g.links().size()); ++l) id[g.link(l).name] = l;
    auto link = [&](int device, std::size_t j) {
      return id.at(fmt::format("torus-{}-d{}", device, j));
    };
    for (int src = 0; src < g.devices(); ++src) {
      for (int dst = 0; dst < g.devices(); ++dst) {
        Route expected;
        int current = src;
        int product = 1;
        for (std::size_t j = 0; j < dims.size(); ++j) {
          const int a = dims[j];
          const int my = (src / product) % a;
          const int to = (dst / product) % a;
          const bool right =
              (to > my && to <= my + a / 2) || (my > a / 2 && (my + a / 2) % a >= to);
          while ((current / product) % a != to) {
            const int coord = (current / product) % a;
            if (right) {
              expected.push_back(Hop{.link = link(current, j), .forward = true});
              current = coord == a - 1 ? current - (a - 1) * product : current + product;
            } else {
              current = coord == 0 ? current + (a - 1) * product : current - product;
              expected.push_back(Hop{.link = link(current, j), .forward = false});
            }
          }
          product *= a;
        }
        EXPECT_EQ(g.route(src, dst), expected) << src << " -> " << dst;
      }
    }
  }
}

TEST(Torus, Tpuv4SlicesAreWholeCubes) {
  EXPECT_EQ(tpuv4_slice({.dims = {4, 8, 8}, .link_gbps = 50}).devices(), 256);
  EXPECT_NE(expect_error([] { tpuv4_slice({.dims = {4, 6, 8}, .link_gbps = 50}); })
                .find("dims[1]=6 must be a multiple of 4"),
            std::string::npos);
}

TEST(Levels, AtpFigure7aGraph) {
  const Graph g = levels_graph(fig7a_levels());
  g.validate();
  EXPECT_EQ(g.devices(), 16);
  // 4 node ports + 1 switch; 16 fatpipes, 4 uplinks, 4 × 6 NVLinks.
  EXPECT_EQ(g.node_count(), 16 + 5);
  EXPECT_EQ(g.links().size(), 16u + 4u + 24u);
  EXPECT_EQ(names(g, g.route(2, 4)),
            (std::vector<std::string>{"dev2-node0+", "node0-up+", "node1-up-", "dev4-node1-"}));
  EXPECT_EQ(names(g, g.route(1, 0)), std::vector<std::string>{"gpu0-gpu1-"});
  // Crossing the node level costs its latency: two half-latency uplinks.
  EXPECT_DOUBLE_EQ(g.latency_us(g.route(2, 4)), 8.0);
}

TEST(Levels, RelaysWithoutADirectLinkAndCapsByGroup) {
  // A ring of 4 (p2p to neighbours only) with a group bandwidth below the p2p sum.
  Level ring = level("ring", 4, 30, 1);
  ring.p2p_gbps = {{0, 25, 0, 25}, {25, 0, 25, 0}, {0, 25, 0, 25}, {25, 0, 25, 0}};
  const Graph g = levels_graph({ring});
  g.validate();
  // 0 → 2 is relayed through 1; the 30 GB/s "nic" links cap each member's traffic.
  EXPECT_EQ(names(g, g.route(0, 2)), (std::vector<std::string>{
                                          "ring0-nic+", "ring0-ring1+", "ring1-ring2+",
                                          "ring2-nic-"}));
}

TEST(Levels, DisconnectedAndAsymmetricMatricesAreRejected) {
  Level split = level("gpu", 4, 50, 1);
  split.p2p_gbps = {{0, 25, 0, 0}, {25, 0, 0, 0}, {0, 0, 0, 25}, {0, 0, 25, 0}};
  EXPECT_NE(expect_error([&] { levels_graph({split}); })
                .find("disconnected graph: level 'gpu': members 2 and 0 have no p2p path"),
            std::string::npos);
  Level skew = level("gpu", 2, 50, 1);
  skew.p2p_gbps = {{0, 25}, {20, 0}};
  EXPECT_NE(expect_error([&] { levels_graph({skew}); })
                .find("p2p_gbps[0][1]=25 differs from p2p_gbps[1][0]=20"),
            std::string::npos);
}

TEST(FatTree, UpDownWithDmodK) {
  // 16 devices, 4 leaves, 2 spines; each leaf links to both spines.
  const Graph g = fat_tree({.down = {4, 4}, .up = {1, 2}, .link_gbps = {25, 50}});
  g.validate();
  EXPECT_EQ(g.devices(), 16);
  EXPECT_EQ(g.node_count(), 16 + 4 + 2);
  // Same leaf: up and down one leaf.
  EXPECT_EQ(names(g, g.route(0, 3)), (std::vector<std::string>{"dev0-sw1-0+", "dev3-sw1-0-"}));
  // Across leaves: spine (5 / 1) mod 2 = 1 for destination 5, spine 0 for destination 4.
  EXPECT_EQ(names(g, g.route(0, 5)),
            (std::vector<std::string>{"dev0-sw1-0+", "sw1-0-sw2-1+", "sw1-1-sw2-1-",
                                      "dev5-sw1-1-"}));
  EXPECT_EQ(names(g, g.route(0, 4))[1], "sw1-0-sw2-0+");
}

TEST(Dragonfly, MinimalRouting) {
  // 3 groups × 2 routers × 2 devices: group 0's link to group 1 on router 0, to group 2 on
  // router 1.
  const Graph g = dragonfly({.groups = 3, .routers = 2, .devices = 2, .device_gbps = 25,
                             .local_gbps = 25, .global_gbps = 10});
  g.validate();
  EXPECT_EQ(g.devices(), 12);
  // dev0 (g0 r0) → dev10 (g2 r1): local to g0-r1, global g0–g2 to g2-r0, local to g2-r1.
  EXPECT_EQ(names(g, g.route(0, 10)),
            (std::vector<std::string>{"dev0-g0-r0+", "g0-r0-g0-r1+", "global-g0-g2+",
                                      "g2-r0-g2-r1+", "dev10-g2-r1-"}));
  EXPECT_EQ(names(g, g.route(1, 0)), (std::vector<std::string>{"dev1-g0-r0+", "dev0-g0-r0-"}));
}

TEST(Graph, ShortestPathsAndDisconnection) {
  Graph g(3);
  const int sw = g.add_router("sw");
  g.add_link("a", 0, sw, 10, 1);
  g.add_link("b", 1, sw, 10, 1);
  g.add_link("c", 0, 1, 5, 1);
  EXPECT_EQ(names(g, g.route(0, 1)), std::vector<std::string>{"c+"});
  EXPECT_NE(expect_error([&] { g.validate(); })
                .find("disconnected graph: device 'dev2' cannot be reached from device 'dev0'"),
            std::string::npos);
  g.add_link("d", 2, sw, 10, 1);
  g.validate();
  EXPECT_EQ(names(g, g.route(2, 0)), (std::vector<std::string>{"d+", "a-"}));
  EXPECT_NE(expect_error([&] { g.add_link("e", 0, 1, 0, 1); })
                .find("link 'e': bandwidth gbps=0 must be positive"),
            std::string::npos);
  EXPECT_NE(expect_error([&] { g.add_link("f", 0, 1, -3, 1); })
                .find("link 'f': bandwidth gbps=-3 must be positive"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtp::topo
