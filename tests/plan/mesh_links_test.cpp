// ATP Eq. 3 and Eq. 4 on the hierarchical communication matrix: the paper's worked numbers.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "plan/mesh_links.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

// Bandwidths are exact products and quotients of the inputs; allow rounding only.
constexpr double kTol = 1e-9;

TEST(MeshLinks, AtpFigure7aMesh8x2) {
  // ATP §3.5: "considering DeviceMesh(8,2) in Figure 7(a), B2' … is equal to 200 GB/s …
  // since the two groups of all-reduce will share the inter-node bandwidth, B1' is equal to
  // 12.5 GB/s."
  const Topology t = load_topology("nvlink-hdr-4x4");
  const MeshLinks l = mesh_links(t, 8, 2);
  ASSERT_TRUE(l.dims[0].link_gbps && l.dims[1].link_gbps);
  EXPECT_NEAR(*l.dims[1].link_gbps, 200.0, kTol);  // P2P-capped, below the 600 group BW
  EXPECT_NEAR(*l.dims[0].link_gbps, 12.5, kTol);   // 25 GB/s HDR shared by 2 groups
  EXPECT_EQ(l.dims[0].modelled.bottleneck_level, 0);
  EXPECT_EQ(l.dims[0].modelled.sharers, 2);
  EXPECT_EQ(l.dims[1].modelled.levels, std::vector<int>{1});
  EXPECT_EQ(l.dims[0].modelled.levels, (std::vector<int>{0, 1}));
  // Eq. 4: B = d/(2(d−1))·B'.
  EXPECT_NEAR(*l.dims[1].allreduce_gbps, 2.0 / 2.0 * 200.0, kTol);
  EXPECT_NEAR(*l.dims[0].allreduce_gbps, 8.0 / 14.0 * 12.5, kTol);
  EXPECT_EQ(l.dims[0].source, BandwidthSource::kModelled);
}

TEST(MeshLinks, AtpEquation3WhenDim0SpansWholeNodes) {
  // Mesh (4,4) on Fig. 7a: dim 1 = one node (group 600, P2P 3·200 = 600), dim 0 = one GPU
  // per node, 4 groups share each node's 25 GB/s: B1' = GroupBW_1/d2 (Eq. 3).
  const MeshLinks l = mesh_links(load_topology("nvlink-hdr-4x4"), 4, 4);
  EXPECT_NEAR(*l.dims[1].link_gbps, 600.0, kTol);
  EXPECT_NEAR(*l.dims[0].link_gbps, 25.0 / 4, kTol);
  // Mesh (16,1): one group over everything; the nodes' links are the bottleneck, unshared.
  const MeshLinks m = mesh_links(load_topology("nvlink-hdr-4x4"), 16, 1);
  EXPECT_NEAR(*m.dims[0].link_gbps, 25.0, kTol);
  EXPECT_FALSE(m.dims[1].link_gbps.has_value());
  EXPECT_FALSE(m.dims[1].allreduce_gbps.has_value());
}

TEST(MeshLinks, RingsOnTheLevelsGraphAreWhatTheSimulatorRuns) {
  // The same mesh (4,4) priced on the graph the simulator builds from the levels
  // (Topology::rings_on_graph, set by sim::simulated_topology): a ring member sends to one
  // neighbour per step, over one 200 GB/s NVLink of the fully connected node — the lone
  // 16 MiB all-reduce of dim 1 simulates 146.8 us, Eq. 3's 600 GB/s priced it at 69.9.
  Topology t = load_topology("nvlink-hdr-4x4");
  t.rings_on_graph = true;
  const MeshLinks l = mesh_links(t, 4, 4);
  EXPECT_NEAR(*l.dims[1].link_gbps, 200.0, kTol);
  EXPECT_NEAR(*l.dims[0].link_gbps, 25.0 / 4, kTol);  // the node's HDR link, 4 rings on it
  EXPECT_EQ(l.dims[1].source, BandwidthSource::kModelled);
}

TEST(MeshLinks, TorusGivesGroupBandwidthInBothDims) {
  // ATP §5.4: on the 2D torus of Fig. 7b, B1' = B2' = GroupBW. The preset is the torus as a
  // graph with each mesh dim ring-folded onto it, so every ring hop is one 25 GB/s link in
  // both dims of every mesh. (ATP's GroupBW = 50 counts both ring directions; an MPI ring
  // sends one way, so one ring gets 25. Fig. 12's curves need only B1' = B2'.)
  const Topology t = load_topology("torus-4x4");
  for (const auto& [d1, d2] : {std::pair{4, 4}, {8, 2}, {2, 8}}) {
    const MeshLinks l = mesh_links(t, d1, d2);
    for (const DimLinks& d : l.dims) {
      EXPECT_NEAR(*d.link_gbps, 25.0, kTol) << d1 << "x" << d2 << " dim " << d.dim;
      EXPECT_EQ(d.modelled.max_hops, 1) << d1 << "x" << d2 << " dim " << d.dim;
      EXPECT_NE(d.modelled.bottleneck_link.find("1 flow"), std::string::npos)
          << d.modelled.bottleneck_link;
    }
  }
  EXPECT_NEAR(*mesh_links(t, 16, 1).dims[0].link_gbps, 25.0, kTol);
}

TEST(MeshLinks, Tpuv4SliceGivesBothLogicalMeshesFullLinks) {
  // MeshSlice's 256 TPUv4 chips as a 4x8x8 slice: the logical 32x8 mesh (MeshSlice's
  // choice) and 16x16 both fold so each ring hop is one 50 GB/s link. The old 16x16 2D
  // torus model priced 32x8's dim-0 ring at 12.5 GB/s.
  const Topology t = load_topology("tpuv4-torus-16x16");
  for (const auto& [d1, d2] : {std::pair{32, 8}, {16, 16}}) {
    const MeshLinks l = mesh_links(t, d1, d2);
    EXPECT_NEAR(*l.dims[0].link_gbps, 50.0, kTol) << d1 << "x" << d2;
    EXPECT_NEAR(*l.dims[1].link_gbps, 50.0, kTol) << d1 << "x" << d2;
    EXPECT_NEAR(l.dims[0].all_reduce.l_sync_s, 5e-6, 1e-15);  // MeshSlice's fit (the profile)
  }
}

TEST(MeshLinks, CalibrationOverridesTheGraph) {
  // A graph topology with one calibrated group shape: that dim uses the fit, the other the
  // graph's ring flows.
  const Topology t = parse_topology(R"({
    "name": "calibrated-torus", "device": {"memory_gib": 80, "tflops": 250},
    "graph": {"generator": "torus", "dims": [4, 4], "link_gbps": 25, "placement": "fold"},
    "calibration": {"source": "test", "groups": [
      {"size": 4, "stride": 1, "all_gather": {"t_launch_us": 7, "l_sync_us": 2, "bw_gbps": 9}}]}
  })", "test");
  const MeshLinks l = mesh_links(t, 4, 4);
  EXPECT_EQ(l.dims[1].source, BandwidthSource::kCalibrated);
  EXPECT_NEAR(*l.dims[1].link_gbps, 9, kTol);
  EXPECT_NEAR(l.dims[1].modelled.link_gbps, 25, kTol);  // the graph's, kept as evidence
  EXPECT_EQ(l.dims[0].source, BandwidthSource::kModelled);
  EXPECT_NEAR(*l.dims[0].link_gbps, 25, kTol);
}

TEST(MeshLinks, MeasuredTimesArePricedBetweenAndBeyondTheLine) {
  // A calibrated 4-rank group whose all_gather time per byte grows with the size (a shaped
  // link: docs/cluster.md): line T = 3·(n/4)/bw with bw = 4 MB/s, i.e. n·0.1875 µs. Measured:
  // 64 KiB at 0.8 of the line, 1 MiB at 1.2 of it.
  const Topology t = parse_topology(R"({
    "name": "shaped", "device": {"memory_gib": 80, "tflops": 1},
    "levels": [{"members": 4, "group_gbps": 1}],
    "calibration": {"source": "test", "groups": [
      {"size": 4, "stride": 1,
       "all_gather": {"bw_gbps": 0.004, "measured": [[65536, 9830.4], [1048576, 235929.6]]},
       "all_reduce": {"bw_gbps": 0.004}}]}
  })",
                                    "test");
  const MeshLinks links = mesh_links(t, 4, 1);
  const DimLinks& d = links.dims[0];
  ASSERT_EQ(d.source, BandwidthSource::kCalibrated);
  const auto line = [](double n) { return n * 0.1875e-6; };
  using layout::CollectiveKind;
  // At the measured sizes: what was measured.
  EXPECT_NEAR(collective_time(d, CollectiveKind::kAllGather, 65536), 9830.4e-6, 1e-12);
  EXPECT_NEAR(collective_time(d, CollectiveKind::kAllGather, 1048576), 235929.6e-6, 1e-12);
  // Halfway in ln n (256 KiB): the ratio halfway, 1.0.
  EXPECT_NEAR(collective_time(d, CollectiveKind::kAllGather, 262144), line(262144), 1e-12);
  // Beyond: the line at the nearest measured size's ratio.
  EXPECT_NEAR(collective_time(d, CollectiveKind::kAllGather, 4096), 0.8 * line(4096), 1e-12);
  EXPECT_NEAR(collective_time(d, CollectiveKind::kAllGather, 8 << 20), 1.2 * line(8 << 20), 1e-12);
  // all_reduce has no measured times: its line. reduce_scatter falls back to all_gather's
  // line, not its times (they were measured for another collective).
  EXPECT_NEAR(collective_time(d, CollectiveKind::kAllReduce, 1048576), 2 * line(1048576), 1e-12);
  EXPECT_NEAR(collective_time(d, CollectiveKind::kReduceScatter, 1048576), line(1048576), 1e-12);
  // Wang's two-way step and Cannon's skew take the line apart: no measured times.
  EXPECT_EQ(d.two_way.measured, nullptr);
  EXPECT_EQ(d.skew.measured, nullptr);
  // A ring of another size does not use a curve measured on 4 ranks.
  EXPECT_NEAR(ring_collective_time(d.all_gather, 2, 65536), 65536 / 4e6, 1e-12);
}

TEST(MeshLinks, SwitchGivesGroupBandwidthToEveryMesh) {
  // One level (NVSwitch / NVLink network): nothing is shared, B1' = B2' = GroupBW.
  const Topology t = load_topology("nvlink-network-16");
  for (const auto& [d1, d2] : {std::pair{16, 1}, {8, 2}, {4, 4}, {2, 8}}) {
    const MeshLinks l = mesh_links(t, d1, d2);
    EXPECT_NEAR(*l.dims[0].link_gbps, 900.0, kTol) << d1 << "x" << d2;
    if (d2 > 1) {
      EXPECT_NEAR(*l.dims[1].link_gbps, 900.0, kTol) << d1 << "x" << d2;
    }
  }
}

TEST(MeshLinks, PcieCalibrationReproducesAtpSection53) {
  // ATP §5.3: B1 = 0.97 GB/s for mesh (8,1); B1 = 1.20 and B2 = 4.95 GB/s for (2,4).
  const Topology t = load_topology("pcie-8xa100");
  const MeshLinks a = mesh_links(t, 8, 1);
  EXPECT_EQ(a.dims[0].source, BandwidthSource::kCalibrated);
  EXPECT_NEAR(*a.dims[0].allreduce_gbps, 0.97, kTol);
  const MeshLinks b = mesh_links(t, 2, 4);
  EXPECT_NEAR(*b.dims[0].allreduce_gbps, 1.20, kTol);
  EXPECT_NEAR(*b.dims[1].allreduce_gbps, 4.95, kTol);
  // The same 8-rank group, seen as mesh (1,8), uses the same calibration.
  EXPECT_NEAR(*mesh_links(t, 1, 8).dims[1].allreduce_gbps, 0.97, kTol);
  // Mesh (4,2) was not measured: modelled.
  EXPECT_EQ(mesh_links(t, 4, 2).dims[0].source, BandwidthSource::kModelled);
}

TEST(MeshLinks, RingModelMatchesEquation4) {
  // A ring all-reduce of x bytes on links B' takes x/B with B from Eq. 4 (no latency).
  const RingParams ring{.t_launch_s = 0, .l_sync_s = 0, .bw_bytes_per_s = 10e9};
  for (const int p : {2, 3, 8, 64}) {
    EXPECT_NEAR(ring_all_reduce_time(ring, p, 1e9), 1e9 / allreduce_bandwidth(p, 10e9), 1e-12);
  }
  // MeshSlice Eq. 5: T_launch + (P−1)(L_sync + shard/BW).
  const RingParams r{.t_launch_s = 1e-5, .l_sync_s = 2e-6, .bw_bytes_per_s = 1e9};
  EXPECT_NEAR(ring_collective_time(r, 4, 1e6), 1e-5 + 3 * (2e-6 + 1e-3), 1e-15);
  EXPECT_EQ(ring_collective_time(r, 1, 1e6), 0.0);
}

TEST(MeshLinks, MeshMustMatchTheDevices) {
  try {
    mesh_links(load_topology("pcie-8xa100"), 4, 4);
    FAIL() << "accepted a 16-rank mesh on 8 devices";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mesh 4x4 has 16 ranks but topology 'pcie-8xa100' "
                                         "has 8 devices"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace meshtp::plan
