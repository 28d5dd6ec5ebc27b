// What calibrate measures and writes, as data (bench/calibration.hpp), without timing
// anything: the group shapes of the meshes' dims, and the topology built from a fit.
#include "bench/calibration.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "plan/bands.hpp"
#include "plan/presets.hpp"

namespace meshtp::bench {
namespace {

TEST(CalibrationGroups, EveryDistinctShapeOfTheMeshDimsOnce) {
  // 4x1: (4, stride 1); 2x2: (2, stride 2), (2, stride 1); 1x4 repeats (4, stride 1).
  const std::vector<CalibrationGroup> g = calibration_groups({{4, 1}, {2, 2}, {1, 4}}, 4);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].size, 4);
  EXPECT_EQ(g[0].stride, 1);
  EXPECT_EQ(g[0].dim, 0);
  EXPECT_EQ(g[1].size, 2);
  EXPECT_EQ(g[1].stride, 2);
  EXPECT_EQ(g[1].dim, 0);
  EXPECT_EQ(g[2].size, 2);
  EXPECT_EQ(g[2].stride, 1);
  EXPECT_EQ(g[2].dim, 1);
  EXPECT_EQ((g[2].mesh), (std::array<int, 2>{2, 2}));
}

TEST(CalibrationGroups, OneRankHasNothingToMeasure) {
  try {
    calibration_groups({{1, 1}}, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("on 1 rank(s) there is no collective"), std::string::npos)
        << e.what();
  }
}

plan::CalibrationFit two_groups() {
  plan::CalibrationFit fit;
  fit.groups.push_back({.size = 2,
                        .stride = 1,
                        .all_reduce = plan::CollectiveFit{1.23456, 2.0, 10.04321},
                        .all_gather = plan::CollectiveFit{0.5, 3.5, 12.0},
                        .reduce_scatter = std::nullopt});
  fit.groups.push_back({.size = 2,
                        .stride = 2,
                        .all_reduce = plan::CollectiveFit{2.5, 1.0, 4.0},
                        .all_gather = std::nullopt,
                        .reduce_scatter = std::nullopt});
  return fit;
}

TEST(CalibratedTopology, WithoutBaseTheSlowestLinkAndLargestLatencies) {
  const plan::Topology t =
      calibrated_topology({.base = std::nullopt,
                           .name = "here",
                           .source = "test",
                           .gemm_sweeps = std::array<double, 2>{0.011, 0.0126},
                           .elementwise_sweeps = std::array<double, 2>{5.6, 5.9},
                           .repeats = 3},
                          two_groups(), 0.0123456, 5.55555, 7.96, 2);
  EXPECT_EQ(t.name, "here");
  ASSERT_EQ(t.levels.size(), 1u);
  EXPECT_EQ(t.levels[0].members, 2);
  EXPECT_DOUBLE_EQ(t.levels[0].group_gbps, 4.0);          // the slowest fitted link
  EXPECT_DOUBLE_EQ(t.levels[0].latency_us, 3.5);          // the largest l_sync
  EXPECT_DOUBLE_EQ(t.launch_us, 2.5);                     // the largest t_launch
  EXPECT_DOUBLE_EQ(t.memory_gib, 7.9);                    // floored to 0.1 GiB
  EXPECT_DOUBLE_EQ(*t.calibration.gemm_tflops, 0.01235);  // 4 significant digits
  EXPECT_DOUBLE_EQ(*t.calibration.elementwise_gbps, 5.556);
  EXPECT_DOUBLE_EQ(t.calibration.groups[0].all_reduce->t_launch_us, 1.235);
  EXPECT_DOUBLE_EQ(t.calibration.groups[0].all_reduce->bw_gbps, 10.04);
  EXPECT_EQ(t.calibration.source, "test");
  // The sweeps' extremes are the measured rates' sourced ranges, spanning the value too (the
  // median elementwise rate 5.556 lies below the slowest sweep's 5.6 here), so that the file
  // passes check_ranges and a step can be fitted to it (calibrate --from-step-log).
  ASSERT_EQ(t.ranges.size(), 2u);
  EXPECT_EQ(t.ranges[0].constant, "/calibration/gemm_tflops");
  EXPECT_DOUBLE_EQ(t.ranges[0].low, 0.011);
  EXPECT_DOUBLE_EQ(t.ranges[0].high, 0.0126);
  EXPECT_EQ(t.ranges[1].constant, "/calibration/elementwise_gbps");
  EXPECT_DOUBLE_EQ(t.ranges[1].low, 5.556);
  EXPECT_DOUBLE_EQ(t.ranges[1].high, 5.9);
  EXPECT_NE(t.ranges[1].source.find("3 sweep(s)"), std::string::npos);
  EXPECT_NO_THROW(plan::check_ranges(t.ranges, plan::to_json(t), "calibrated"));
}

TEST(CalibratedTopology, WithBaseOnlyTheCalibrationIsReplaced) {
  const plan::Topology base = plan::load_topology("nvlink-network-2");
  const plan::Topology t = calibrated_topology({.base = base, .name = "", .source = "test", .gemm_sweeps = {},
                                                .elementwise_sweeps = {}, .repeats = 0},
                                               two_groups(), 0.01, 5.0, 7.96, 2);
  EXPECT_EQ(t.name, base.name + "-calibrated");
  EXPECT_EQ(t.levels.size(), base.levels.size());
  EXPECT_DOUBLE_EQ(t.memory_gib, base.memory_gib);
  EXPECT_EQ(t.calibration.groups.size(), 2u);
}

}  // namespace
}  // namespace meshtp::bench
