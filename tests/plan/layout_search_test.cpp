// The planner over all dimensions (plan/layout_search.hpp): the enumerator keeps to its
// constraints, a two-device case is priced as worked out by hand, and the stage topology
// gives each tensor-parallel dim the bandwidth of the full topology.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "plan/layout_search.hpp"
#include "plan/mesh_links.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

LayoutRequest small_on(const std::string& topology) {
  LayoutRequest r{.topology = load_topology(topology), .model = load_model("small")};
  r.devices = r.topology.device_count();
  return r;
}

TEST(LayoutSearch, EveryLayoutFillsTheDevicesAndDividesTheModel) {
  const LayoutRequest r = small_on("ib-2x8xa100");
  const std::vector<LayoutCandidate> all = search_layouts(r);
  ASSERT_GT(all.size(), 50u);
  bool seen_pipeline = false, seen_zero3 = false;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const layout::Plan& p = all[i].plan;
    EXPECT_EQ(p.ranks(), 16) << p;
    EXPECT_EQ(r.model.layers % p.pp, 0) << p;
    EXPECT_EQ(r.model.batch % (p.dp * p.microbatches), 0) << p;
    EXPECT_GE(p.microbatches, p.pp) << p;
    EXPECT_TRUE(p.zero == 0 || p.dp > 1) << p;
    EXPECT_EQ(r.model.heads % (p.mesh[0] * p.mesh[1]), 0) << p;  // whole heads per rank
    EXPECT_EQ(all[i].feasible, all[i].memory.total_gib() <= r.topology.memory_gib) << p;
    if (i > 0 && all[i].feasible == all[i - 1].feasible) {
      EXPECT_GE(all[i].t_step_s, all[i - 1].t_step_s);  // ranked
    }
    EXPECT_NO_THROW(p.validate()) << p;
    seen_pipeline = seen_pipeline || p.pp > 1;
    seen_zero3 = seen_zero3 || p.zero == 3;
  }
  EXPECT_TRUE(seen_pipeline);
  EXPECT_TRUE(seen_zero3);
}

// Two devices on a 1 GB/s link (as tests/train/slow-pair.json): communication decides. Data
// parallelism all-reduces every gradient of `tiny` (0.4 MB: ~0.4 ms), tensor parallelism
// moves activations several times per layer and pass; a 2-stage pipeline sends one
// microbatch's stream slice (b/m·s·h·4 B, 16 KB for m = 8) forward and its gradient back per
// microbatch. By hand: the pipeline wins, priced (m + p − 1)·t_stage + (m + p − 1)·2·(bytes/B'
// + latency).
TEST(LayoutSearch, TwoSlowlyLinkedDevicesPipelineTheModel) {
  LayoutRequest r{.topology = topology_from_json(
                      nlohmann::json::parse(R"({"name": "slow-pair", "device": {"memory_gib": 100,
                        "tflops": 100}, "launch_us": 10, "levels": [{"name": "device",
                        "members": 2, "group_gbps": 1, "latency_us": 10}]})"),
                      "slow-pair"),
                  .model = load_model("tiny"),
                  .devices = 2};
  const std::vector<LayoutCandidate> all = search_layouts(r);
  const LayoutCandidate& best = all.front();
  ASSERT_TRUE(best.feasible);
  EXPECT_EQ(best.plan.pp, 2) << best.plan;
  EXPECT_EQ(best.plan.dp, 1);
  const int m = best.plan.microbatches, p = 2;
  EXPECT_NEAR(best.bubble, (p - 1.0) / (m + p - 1.0), 1e-12);
  // One rank's slice of the stream: b/m sequences × s tokens × h, fp32, whole on a 1x1 mesh.
  const double bytes = 8.0 / m * 64 * 64 * 4;
  const double p2p = (m + p - 1) * 2 * (bytes / 1e9 + 10e-6);
  EXPECT_NEAR(best.t_p2p_s, p2p, 1e-12);
  EXPECT_NEAR(best.t_step_s, (m + p - 1) * best.t_stage_s + p2p, 1e-9);
  EXPECT_EQ(best.t_dp_s, 0);
}

TEST(LayoutSearch, StageTopologyKeepsTheFullTopologysBandwidths) {
  const Topology t = load_topology("ib-2x8xa100");
  // A 4x2 stage inside a node: both dims on NVSwitch, as in the 16-device topology.
  const MeshLinks sub = mesh_links(tp_topology(t, 4, 2), 4, 2);
  const ModelledLink d0 = modelled_link(t, {2, 4, 2}, 1), d1 = modelled_link(t, {2, 4, 2}, 2);
  EXPECT_DOUBLE_EQ(*sub.dims[0].link_gbps, d0.link_gbps);
  EXPECT_DOUBLE_EQ(*sub.dims[1].link_gbps, d1.link_gbps);
  // A 16x1 stage spans both nodes: its ring crosses the 25 GB/s level.
  EXPECT_DOUBLE_EQ(*mesh_links(tp_topology(t, 16, 1), 16, 1).dims[0].link_gbps,
                   modelled_link(t, {16, 1}, 0).link_gbps);
}

TEST(LayoutSearch, BadRequestsNameTheValue) {
  LayoutRequest r = small_on("ib-2x8xa100");
  r.devices = 8;
  EXPECT_THROW(search_layouts(r), Error);
  r = small_on("ib-2x8xa100");
  r.strategies.clear();
  EXPECT_THROW(search_layouts(r), Error);
}

}  // namespace
}  // namespace meshtp::plan
