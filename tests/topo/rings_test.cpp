// Ring flows on graphs: the papers' numbers where the graph and ATP's matrix agree, the
// sharing the graph adds where they do not, and the TPUv4 folds.
#include "topo/rings.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "levels_fixture.hpp"
#include "topo/levels.hpp"
#include "topo/networks.hpp"
#include "topo/torus.hpp"

namespace meshtp::topo {
namespace {


std::vector<int> identity(int n) {
  std::vector<int> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  return p;
}

Graph fig7a() {
  return levels_graph(fig7a_levels());
}

TEST(Rings, AtpFigure7aMesh8x2) {
  // ATP §3.5: B2' = 200 (one NVLink pair), B1' = 12.5 (two groups share each node's HDR).
  const Graph g = fig7a();
  const DimRings d1 = ring_dim(g, identity(16), {8, 2}, 1);
  EXPECT_EQ(d1.groups, 8);
  EXPECT_DOUBLE_EQ(d1.link_gbps, 200);
  EXPECT_EQ(d1.flows, 1);
  const DimRings d0 = ring_dim(g, identity(16), {8, 2}, 0);
  EXPECT_EQ(d0.groups, 2);
  EXPECT_EQ(d0.stride, 2);
  EXPECT_DOUBLE_EQ(d0.link_gbps, 12.5);
  EXPECT_EQ(d0.flows, 2);
  EXPECT_EQ(g.link(d0.bottleneck_link).name.substr(0, 4), "node");
  EXPECT_DOUBLE_EQ(d0.latency_us, 8);  // the node level's
}

TEST(Rings, OneRingUsesOneLinkPerHopWhereAtpAssumesAllOfThem) {
  // Mesh (4,4) on Fig. 7a: ATP Eq. 3 gives dim 1 the GPU's 600 GB/s (3 NVLinks), assuming
  // the collective runs rings over every link; one ring uses one 200 GB/s link per hop.
  const DimRings d1 = ring_dim(fig7a(), identity(16), {4, 4}, 1);
  EXPECT_DOUBLE_EQ(d1.link_gbps, 200);
  // Dim 0: four groups leave each node through its one uplink: 25/4.
  EXPECT_DOUBLE_EQ(ring_dim(fig7a(), identity(16), {4, 4}, 0).link_gbps, 6.25);
}

TEST(Rings, TorusRowsAndColumnsAreFree) {
  // ATP Fig. 7b, 4x4 torus of 25 GB/s links: each ring hop is one link, no sharing.
  const Graph g = torus({.dims = {4, 4}, .link_gbps = 25, .latency_us = 1});
  for (int dim : {0, 1}) {
    const DimRings r = ring_dim(g, identity(16), {4, 4}, dim);
    EXPECT_DOUBLE_EQ(r.link_gbps, 25) << dim;
    EXPECT_EQ(r.flows, 1);
    EXPECT_EQ(r.max_hops, 1);
  }
  // Mesh (8,2) row-major: dim 0 members are 2 apart in x, both groups cross the same links.
  const DimRings p = ring_dim(g, identity(16), {8, 2}, 0);
  EXPECT_LT(p.link_gbps, 25);
}

TEST(Rings, CannonSkewLoadsTheTorusLinksByTheShift) {
  // Cannon's skew on a 4x4 torus, mesh 4x4 row-major: row i sends every block i places left
  // at once. Rows 1 and 3 are one hop (one flow per link), row 2 is two hops whichever way,
  // and every link on its way carries two of them: B' = 25/2.
  const Graph g = torus({.dims = {4, 4}, .link_gbps = 25, .latency_us = 1});
  for (int dim : {0, 1}) {
    const DimRings r = skew_dim(g, identity(16), {4, 4}, dim);
    EXPECT_DOUBLE_EQ(r.link_gbps, 12.5) << dim;
    EXPECT_EQ(r.flows, 2);
    EXPECT_EQ(r.max_hops, 2);
    EXPECT_DOUBLE_EQ(r.latency_us, 2);
  }
  // Behind one switch every block has its own links: the skew moves at the link's speed.
  const Graph sw = single_switch({.devices = 16, .link_gbps = 900, .latency_us = 1});
  EXPECT_DOUBLE_EQ(skew_dim(sw, identity(16), {4, 4}, 1).link_gbps, 900);
  // A 1x16 mesh has one row, index 0: nothing moves.
  EXPECT_EQ(skew_dim(g, identity(16), {1, 16}, 1).link_gbps, 0);
}

TEST(Rings, TwoWayRingUsesBothDirectionsOfARing) {
  // A 4x4 torus: every ring has its own links; sending to both neighbours at once puts one
  // flow on each direction of each link, so each half moves at the link's bandwidth.
  const Graph g = torus({.dims = {4, 4}, .link_gbps = 25, .latency_us = 1});
  for (int dim : {0, 1}) {
    const DimRings r = two_way_ring_dim(g, identity(16), {4, 4}, dim);
    EXPECT_DOUBLE_EQ(r.link_gbps, 25) << dim;
    EXPECT_EQ(r.flows, 1);
  }
  // A ring of 2: both neighbours are one chip, both halves cross one direction of one link.
  const Graph pair = torus({.dims = {2}, .link_gbps = 25, .latency_us = 1});
  EXPECT_DOUBLE_EQ(two_way_ring_dim(pair, identity(2), {2}, 0).link_gbps,
                   ring_dim(pair, identity(2), {2}, 0).link_gbps / 2);
  // Behind one switch both messages leave through the device's one uplink: half each.
  const Graph sw = single_switch({.devices = 8, .link_gbps = 900, .latency_us = 1});
  EXPECT_DOUBLE_EQ(two_way_ring_dim(sw, identity(8), {8}, 0).link_gbps, 450);
  EXPECT_DOUBLE_EQ(ring_dim(sw, identity(8), {8}, 0).link_gbps, 900);
}

TEST(Rings, SharedLinksCountBothDirections) {
  Graph g(2);
  g.add_link("bus", 0, 1, 10, 0, Sharing::kShared);
  // Two ranks: 0→1 and 1→0 share the bus.
  EXPECT_DOUBLE_EQ(ring_dim(g, identity(2), {2}, 0).link_gbps, 5);
  Graph h(2);
  h.add_link("duplex", 0, 1, 10, 0, Sharing::kSplitDuplex);
  EXPECT_DOUBLE_EQ(ring_dim(h, identity(2), {2}, 0).link_gbps, 10);
  Graph f(2);
  f.add_link("pipe", 0, 1, 10, 0, Sharing::kFatpipe);
  EXPECT_DOUBLE_EQ(ring_dim(f, identity(2), {2}, 0).link_gbps, 10);
}

TEST(Rings, SwitchGivesEveryDimTheLink) {
  const Graph g = single_switch({.devices = 16, .link_gbps = 900, .latency_us = 1});
  for (const auto& [a, b] : {std::pair{16, 1}, {8, 2}, {4, 4}, {2, 8}}) {
    for (int dim : {0, 1}) {
      const DimRings r = ring_dim(g, identity(16), {a, b}, dim);
      if (r.size > 1) {
        EXPECT_DOUBLE_EQ(r.link_gbps, 900) << a << "x" << b << " dim " << dim;
      }
    }
  }
}

TEST(Rings, Tpuv4FoldGivesBothMeshesFullLinks) {
  // 256 TPUv4 chips, 4x8x8 with wraparound: both 32x8 (dim 1 = a y ring, dim 0 = the x-z
  // plane snaked into a ring) and 16x16 (x split 2x2 between the dims) fold so that every
  // ring hop is one link and no link is shared.
  const std::vector<int> dims{4, 8, 8};
  const Graph g = tpuv4_slice({.dims = dims, .link_gbps = 50, .latency_us = 1});
  for (const auto& [a, b] : {std::pair{32, 8}, {16, 16}, {64, 4}, {256, 1}}) {
    const std::vector<int> p = fold_on_torus(g, dims, a, b);
    for (int dim : {0, 1}) {
      const DimRings r = ring_dim(g, p, {a, b}, dim);
      if (r.size == 1) continue;
      EXPECT_DOUBLE_EQ(r.link_gbps, 50) << a << "x" << b << " dim " << dim;
      EXPECT_EQ(r.max_hops, 1) << a << "x" << b << " dim " << dim;
    }
  }
  // Row-major 32x8 instead: dim 0 hops jump 8 devices (two y steps), rings share links.
  const DimRings rm = ring_dim(g, identity(256), {32, 8}, 0);
  EXPECT_LT(rm.link_gbps, 50);
}

// The exhaustive computation the torus router's counting replaces (rings.hpp's model, hop by
// hop): every message routed on its own, flows counted per link direction, then the least
// share taken hop by hop in message order. `lists` are message lists sent at once.
DimRings exhaustive(const Graph& g, const std::vector<std::vector<Message>>& lists) {
  std::vector<int> flows(g.links().size() * 2, 0);
  auto key = [&](const Hop& h) {
    const bool split = g.link(h.link).sharing == Sharing::kSplitDuplex;
    return static_cast<std::size_t>(h.link) * 2 + (split && !h.forward ? 1 : 0);
  };
  for (const std::vector<Message>& list : lists) {
    for (const Message& m : list) {
      for (const Hop& h : g.route(m.src, m.dst)) ++flows[key(h)];
    }
  }
  DimRings r;
  r.link_gbps = std::numeric_limits<double>::infinity();
  for (const std::vector<Message>& list : lists) {
    for (const Message& m : list) {
      const Route route = g.route(m.src, m.dst);
      double latency = 0;
      for (const Hop& h : route) {
        const Link& l = g.link(h.link);
        latency += l.latency_us;
        const int f = l.sharing == Sharing::kFatpipe ? 1 : flows[key(h)];
        if (l.gbps / f < r.link_gbps) {
          r.link_gbps = l.gbps / f;
          r.bottleneck_link = h.link;
          r.bottleneck_forward = h.forward;
          r.flows = f;
        }
      }
      r.latency_us = std::max(r.latency_us, latency);
      r.max_hops = std::max(r.max_hops, static_cast<int>(route.size()));
    }
  }
  return r;
}

// Mesh dim `dim`'s messages, member i → member (i + shift(g)) mod P of every group g.
std::vector<Message> dim_messages(const std::vector<int>& placement, int d1, int d2, int dim,
                                  const auto& shift) {
  const int size = dim == 0 ? d1 : d2;
  const int stride = dim == 0 ? d2 : 1;
  std::vector<Message> out;
  for (int g = 0; g < d1 * d2 / size; ++g) {
    const int step = ((shift(g) % size) + size) % size;
    if (step == 0) continue;
    const int first = dim == 0 ? g : g * d2;  // a 2D mesh's group g
    for (int i = 0; i < size; ++i) {
      out.push_back(
          Message{.src = placement[static_cast<std::size_t>(first + i * stride)],
                  .dst = placement[static_cast<std::size_t>(first + (i + step) % size * stride)]});
    }
  }
  return out;
}

void expect_same(const DimRings& fast, const DimRings& slow, const std::string& what) {
  // Bit for bit: the planner's answer must not move.
  EXPECT_EQ(fast.link_gbps, slow.link_gbps) << what;
  EXPECT_EQ(fast.latency_us, slow.latency_us) << what;
  EXPECT_EQ(fast.max_hops, slow.max_hops) << what;
  EXPECT_EQ(fast.bottleneck_link, slow.bottleneck_link) << what;
  EXPECT_EQ(fast.bottleneck_forward, slow.bottleneck_forward) << what;
  EXPECT_EQ(fast.flows, slow.flows) << what;
}

TEST(Rings, TorusCountsEqualEveryRouteWalked) {
  // The torus router counts each message's runs instead of walking its hops
  // (Router::count_routes): on tori of odd and even sides (where "+" and "−" tie at half way
  // round and SimGrid's rule picks by coordinate), for every 2D mesh, in row-major order and
  // in a scrambled placement, its ring, two-way ring and skew equal the exhaustive count of
  // every route. A latency of 0.1 µs makes the order of the sums matter.
  std::mt19937 random(27);
  for (const std::vector<int>& dims : std::vector<std::vector<int>>{
           {2}, {5}, {6}, {4, 4}, {3, 5}, {6, 4}, {2, 3, 4}, {1, 4, 3}, {3, 3, 3}, {5, 4, 2}}) {
    const Graph g = torus({.dims = dims, .link_gbps = 25, .latency_us = 0.1});
    const int n = g.devices();
    std::vector<int> scrambled = identity(n);
    std::shuffle(scrambled.begin(), scrambled.end(), random);
    for (const std::vector<int>& placement : {identity(n), scrambled}) {
      for (int d1 = 1; d1 <= n; ++d1) {
        if (n % d1 != 0) continue;
        const int d2 = n / d1;
        for (int dim : {0, 1}) {
          if ((dim == 0 ? d1 : d2) == 1) continue;
          const std::string what =
              fmt::format("torus {} mesh {}x{} dim {}{}", fmt::join(dims, "x"), d1, d2, dim,
                          placement == scrambled ? " scrambled" : "");
          const auto one = [](int) { return 1; };
          const auto back = [](int) { return -1; };
          const std::vector<Message> ring = dim_messages(placement, d1, d2, dim, one);
          expect_same(ring_dim(g, placement, {d1, d2}, dim), exhaustive(g, {ring}), what + " ring");
          expect_same(two_way_ring_dim(g, placement, {d1, d2}, dim),
                      exhaustive(g, {ring, dim_messages(placement, d1, d2, dim, back)}),
                      what + " two-way");
          const std::vector<Message> skew =
              dim_messages(placement, d1, d2, dim, [](int group) { return -group; });
          if (!skew.empty()) {
            expect_same(skew_dim(g, placement, {d1, d2}, dim), exhaustive(g, {skew}),
                        what + " skew");
          }
        }
      }
    }
  }
}

TEST(Rings, TorusCrossingsEqualEveryRouteWalked) {
  // Graph::count_routes on a torus, all-to-all: the crossings of each link direction, the
  // longest route and the slowest route, as walking every route gives them.
  for (const std::vector<int>& dims :
       std::vector<std::vector<int>>{{7}, {8}, {4, 5}, {2, 2, 2}, {3, 4, 6}}) {
    const Graph g = torus({.dims = dims, .link_gbps = 25, .latency_us = 0.1});
    std::vector<Message> all;
    for (int s = 0; s < g.devices(); ++s) {
      for (int d = 0; d < g.devices(); ++d) all.push_back(Message{.src = s, .dst = d});
    }
    std::vector<int> crossings(g.links().size() * 2, 0);
    const RouteTotals totals = g.count_routes(all, crossings);
    std::vector<int> walked(crossings.size(), 0);
    RouteTotals slow;
    for (const Message& m : all) {
      const Route r = g.route(m.src, m.dst);
      for (const Hop& h : r) ++walked[static_cast<std::size_t>(h.link) * 2 + (h.forward ? 0 : 1)];
      slow.max_hops = std::max(slow.max_hops, static_cast<int>(r.size()));
      slow.max_latency_us = std::max(slow.max_latency_us, g.latency_us(r));
    }
    const std::string what = fmt::format("torus {}", fmt::join(dims, "x"));
    EXPECT_EQ(crossings, walked) << what;
    EXPECT_EQ(totals.max_hops, slow.max_hops) << what;
    EXPECT_EQ(totals.max_latency_us, slow.max_latency_us) << what;
  }
}

TEST(Rings, PlacementMustCoverTheMesh) {
  const Graph g = torus({.dims = {4}, .link_gbps = 1});
  try {
    ring_dim(g, identity(3), {4}, 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("placement of 3 ranks does not match the mesh's 4"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace meshtp::topo
