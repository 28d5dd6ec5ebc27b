// The planner at scale (issue 27) answers as it did when it walked every device and priced
// every layout: Eq. 3 on one period of the groups against the walk of every group and
// device it replaced, and the bounded search's top K against the exhaustive ranking.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "plan/layout_search.hpp"
#include "plan/mesh_links.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

// Eq. 3 as the planner computed it before issue 27: every group, every rank, sets of
// members per parent (mesh_links.hpp has the model).
ModelledLink walk_every_device(const Topology& topology, const std::vector<int>& shape,
                               int dim) {
  int n = 1;
  for (const int d : shape) n *= d;
  ModelledLink out;
  const int size = shape[static_cast<std::size_t>(dim)];
  if (size == 1) return out;
  int stride = 1;
  for (std::size_t k = static_cast<std::size_t>(dim) + 1; k < shape.size(); ++k) {
    stride *= shape[k];
  }
  const int span = size * stride;
  const int groups = n / size;
  auto base = [&](int g) { return (g / stride) * span + g % stride; };
  double best = std::numeric_limits<double>::infinity();
  for (int j = 0; j < static_cast<int>(topology.levels.size()); ++j) {
    const Level& level = topology.levels[static_cast<std::size_t>(j)];
    const int dj = topology.devices_per_member(j);
    const int rj = level.members;
    std::map<int, std::set<int>> sharers, peers, groups_in_parent;
    for (int g = 0; g < groups; ++g) {
      std::map<int, std::set<int>> members_by_parent;
      for (int i = 0; i < size; ++i) {
        const int member = (base(g) + i * stride) / dj;
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
        bw = cap > 0 ? std::min(level.group_gbps, cap) / static_cast<double>(gs.size())
                     : level.group_gbps /
                           static_cast<double>(groups_in_parent[member / rj].size());
      }
      if (bw < best) {
        best = bw;
        out.bottleneck_level = j;
        out.sharers = static_cast<int>(gs.size());
      }
    }
  }
  out.link_gbps = best;
  return out;
}

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

Topology levels(const std::string& json) {
  return topology_from_json(nlohmann::json::parse(json), "test");
}

// Hierarchies with each case of Eq. 3: one level, nodes × GPUs, a uniform p2p cap, a p2p
// matrix with missing links (relayed), three levels of odd sizes.
std::vector<Topology> hierarchies() {
  std::vector<Topology> out;
  for (const char* name : {"pcie-8xa100", "dual-nvlink-8xa100", "nvswitch-8xa100", "ib-2x8xa100",
                           "nvlink-hdr-4x4", "nvlink-network-12", "dgx-a100-128x8"}) {
    out.push_back(load_topology(name));
  }
  out.push_back(levels(R"({"name": "three-levels", "device": {"memory_gib": 80, "tflops": 100},
      "levels": [{"name": "pod", "members": 3, "group_gbps": 50, "latency_us": 20},
                 {"name": "node", "members": 6, "group_gbps": 100, "p2p_gbps": 40,
                  "latency_us": 8},
                 {"name": "gpu", "members": 4, "group_gbps": 600, "latency_us": 3}]})"));
  out.push_back(levels(R"({"name": "ring-of-6", "device": {"memory_gib": 80, "tflops": 100},
      "levels": [{"name": "node", "members": 2, "group_gbps": 25, "latency_us": 8},
                 {"name": "gpu", "members": 6, "group_gbps": 300, "latency_us": 2,
                  "p2p_gbps": [[0, 100, 0, 0, 0, 100], [100, 0, 100, 0, 0, 0],
                               [0, 100, 0, 100, 0, 0], [0, 0, 100, 0, 100, 0],
                               [0, 0, 0, 100, 0, 100], [100, 0, 0, 0, 100, 0]]}]})"));
  return out;
}

void expect_same(const ModelledLink& walked, const ModelledLink& got, const std::string& what) {
  EXPECT_EQ(walked.link_gbps, got.link_gbps) << what;
  EXPECT_EQ(walked.latency_us, got.latency_us) << what;
  EXPECT_EQ(walked.levels, got.levels) << what;
  EXPECT_EQ(walked.bottleneck_level, got.bottleneck_level) << what;
  EXPECT_EQ(walked.sharers, got.sharers) << what;
}

TEST(PlannerAtScale, EqThreeOnOnePeriodIsTheWalkOfEveryDevice) {
  int compared = 0;
  for (const Topology& t : hierarchies()) {
    const int n = t.device_count();
    TopologyLinks links(t);
    // Every 3D row-major layout (dp, pp, tp), every dim: every (size, stride) a search asks.
    for (const int dp : divisors(n)) {
      for (const int pp : divisors(n / dp)) {
        const std::vector<int> shape{dp, pp, n / (dp * pp)};
        for (int dim = 0; dim < 3; ++dim) {
          const std::string what = t.name + " dim " + std::to_string(dim) + " of " +
                                    std::to_string(dp) + "x" + std::to_string(pp) + "x" +
                                    std::to_string(shape[2]);
          const ModelledLink walked = walk_every_device(t, shape, dim);
          expect_same(walked, modelled_link(t, shape, dim), what);
          int stride = 1;
          for (int k = dim + 1; k < 3; ++k) stride *= shape[static_cast<std::size_t>(k)];
          if (shape[static_cast<std::size_t>(dim)] > 1) {
            expect_same(walked, links.group_link(shape[static_cast<std::size_t>(dim)], stride),
                        what + " (memoised)");
          }
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 300);
}

TEST(PlannerAtScale, MemoisedMeshLinksAreTheLinksOfEachMesh) {
  for (const char* name : {"nvlink-hdr-4x4", "torus-4x4", "tpuv4-torus-16x16"}) {
    const Topology t = load_topology(name);
    TopologyLinks links(t);
    for (const auto& [d1, d2] : enumerate_meshes(t.device_count())) {
      for (int ask = 0; ask < 2; ++ask) {  // the second answer is the memoised one
        const MeshLinks& got = links.mesh(d1, d2);
        const MeshLinks fresh = mesh_links(t, d1, d2);
        for (std::size_t dim = 0; dim < 2; ++dim) {
          EXPECT_EQ(got.dims[dim].link_gbps, fresh.dims[dim].link_gbps) << name << d1 << d2;
          EXPECT_EQ(got.dims[dim].modelled.latency_us, fresh.dims[dim].modelled.latency_us);
          EXPECT_EQ(got.dims[dim].skew.bw_bytes_per_s, fresh.dims[dim].skew.bw_bytes_per_s);
        }
      }
    }
  }
}

// The 2D planner prices each mesh's strategies on one memoised MeshLinks: as pricing each
// candidate alone.
TEST(PlannerAtScale, TwoDimensionalPlanIsEachCandidatePricedAlone) {
  for (const char* name : {"nvlink-hdr-4x4", "dual-nvlink-8xa100", "torus-4x4"}) {
    PlanRequest r{.topology = load_topology(name), .model = load_model("atp-m1")};
    r.devices = r.topology.device_count();
    const PlanResult result = plan(r);
    ASSERT_FALSE(result.candidates.empty());
    for (const Candidate& c : result.candidates) {
      const Candidate alone = evaluate(r, c.strategy, c.mesh[0], c.mesh[1], c.chunks);
      EXPECT_EQ(alone.t_step_s, c.t_step_s) << name << ' ' << c;
      EXPECT_EQ(alone.feasible, c.feasible) << name << ' ' << c;
      EXPECT_EQ(alone.memory.total_bytes(), c.memory.total_bytes()) << name << ' ' << c;
    }
  }
}

struct SearchCase {
  std::string topology, model;
  int batch = 0;  // 0: the model's
};

// The bounded search keeps what the exhaustive one ranks first: the same layouts, in the
// same order, at the same prices, and counts the same layouts.
TEST(PlannerAtScale, BoundedSearchKeepsTheExhaustiveTop) {
  for (const SearchCase& sc : std::vector<SearchCase>{{"ib-2x8xa100", "small", 0},
                                                      {"nvlink-hdr-4x4", "small", 0},
                                                      {"torus-4x4", "atp-m1", 0},
                                                      {"nvlink-network-2", "gpt3-175b", 0},
                                                      {"tpuv4-torus-16x16", "gpt3-175b", 0},
                                                      {"dgx-a100-128x8", "gpt3-175b", 1536}}) {
    LayoutRequest r{.topology = load_topology(sc.topology), .model = load_model(sc.model)};
    r.devices = r.topology.device_count();
    if (sc.batch > 0) r.model.batch = sc.batch;
    const std::vector<LayoutCandidate> all = search_layouts(r);
    for (const std::size_t keep : {std::size_t{1}, std::size_t{10}, std::size_t{40}}) {
      const LayoutSearch top = search_layouts(r, keep);
      const std::string what = sc.topology + " " + sc.model + " top " + std::to_string(keep);
      EXPECT_EQ(top.searched, static_cast<std::int64_t>(all.size())) << what;
      EXPECT_LE(top.priced, top.searched) << what;
      ASSERT_EQ(top.ranked.size(), std::min(keep, all.size())) << what;
      for (std::size_t i = 0; i < top.ranked.size(); ++i) {
        const LayoutCandidate &a = all[i], &b = top.ranked[i];
        EXPECT_EQ(layout::to_json(a.plan), layout::to_json(b.plan)) << what << " row " << i;
        EXPECT_EQ(a.t_step_s, b.t_step_s) << what << " row " << i;
        EXPECT_EQ(a.feasible, b.feasible) << what << " row " << i;
        EXPECT_EQ(a.memory.total_bytes(), b.memory.total_bytes()) << what << " row " << i;
      }
    }
  }
}

// The bound prunes: on 1,024 devices at Megatron-LM's batch most layouts are never priced
// in full (a count, not a time).
TEST(PlannerAtScale, TheBoundPricesFewLayoutsInFull) {
  LayoutRequest r{.topology = load_topology("dgx-a100-128x8"), .model = load_model("gpt3-175b")};
  r.devices = r.topology.device_count();
  r.model.batch = 1536;
  const LayoutSearch top = search_layouts(r, 10);
  EXPECT_LT(top.priced * 10, top.searched);
}

}  // namespace
}  // namespace meshtp::plan
