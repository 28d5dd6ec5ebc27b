// The calibration fit on synthetic data: noiseless samples of known ring parameters come
// back exactly; degenerate input is rejected with a message naming the problem.
#include "plan/calibration_fit.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.hpp"
#include "plan/mesh_links.hpp"
#include "plan/presets.hpp"
#include "error_of.hpp"

namespace meshtp::plan {
namespace {

using meshtp::test_support::error_of;

constexpr double kRel = 1e-9;  // noiseless: only rounding

// T(bytes) = t_launch + n·(l_sync + (bytes/P)/bw), units µs and GB/s.
CollectiveSeries synthetic(int p, int stride, CollectiveKind c, const CollectiveFit& truth,
                           std::vector<std::int64_t> sizes = {8 << 10, 64 << 10, 1 << 20,
                                                              16 << 20}) {
  CollectiveSeries s{.size = p, .stride = stride, .collective = c, .samples = {}};
  for (const std::int64_t bytes : sizes) {
    const double n = ring_steps(c, p);
    const double t =
        truth.t_launch_us * 1e-6 +
        n * (truth.l_sync_us * 1e-6 + static_cast<double>(bytes) / p / (truth.bw_gbps * 1e9));
    s.samples.push_back({bytes, t});
  }
  return s;
}

void expect_fit(const CollectiveFit& got, const CollectiveFit& want) {
  EXPECT_NEAR(got.t_launch_us, want.t_launch_us, kRel * (1 + want.t_launch_us));
  EXPECT_NEAR(got.l_sync_us, want.l_sync_us, kRel * (1 + want.l_sync_us));
  EXPECT_NEAR(got.bw_gbps, want.bw_gbps, kRel * want.bw_gbps);
}

TEST(CalibrationFit, RingStepsMatchTheRingModel) {
  EXPECT_EQ(ring_steps(CollectiveKind::kAllReduce, 4), 6);
  EXPECT_EQ(ring_steps(CollectiveKind::kAllGather, 4), 3);
  EXPECT_EQ(ring_steps(CollectiveKind::kReduceScatter, 2), 1);
}

TEST(CalibrationFit, FittedTimeIsThePlannersRingModel) {
  // bytes_per_step = bytes/P for all three collectives: fitted_time is mesh_links' model.
  const CollectiveFit f{.t_launch_us = 3, .l_sync_us = 2, .bw_gbps = 5};
  const RingParams ring{.t_launch_s = 3e-6, .l_sync_s = 2e-6, .bw_bytes_per_s = 5e9};
  const double bytes = 1 << 20;
  EXPECT_DOUBLE_EQ(fitted_time(f, CollectiveKind::kAllReduce, 4, bytes),
                   ring_all_reduce_time(ring, 4, bytes));
  EXPECT_DOUBLE_EQ(fitted_time(f, CollectiveKind::kAllGather, 4, bytes),
                   ring_collective_time(ring, 4, bytes / 4));
  EXPECT_DOUBLE_EQ(fitted_time(f, CollectiveKind::kReduceScatter, 4, bytes),
                   3e-6 + 3 * (2e-6 + bytes / 4 / 5e9));
}

TEST(CalibrationFit, SendRecvIsOneRingStepOfTheWholeBuffer) {
  // nccl-tests' sendrecv: every rank sends its whole buffer to rank+1, whatever P.
  EXPECT_EQ(ring_steps(CollectiveKind::kSendRecv, 8), 1);
  EXPECT_EQ(bytes_per_step(CollectiveKind::kSendRecv, 8, 4096), 4096);
  EXPECT_EQ(bytes_per_step(CollectiveKind::kAllGather, 8, 4096), 512);
  const CollectiveFit f{.t_launch_us = 0, .l_sync_us = 7, .bw_gbps = 20};
  EXPECT_DOUBLE_EQ(fitted_time(f, CollectiveKind::kSendRecv, 8, 1 << 20), 7e-6 + (1 << 20) / 20e9);
  CollectiveSeries s{
      .size = 8, .stride = 1, .collective = CollectiveKind::kSendRecv, .samples = {}};
  for (const std::int64_t bytes : {1 << 16, 1 << 20, 1 << 24}) {
    s.samples.push_back({bytes, fitted_time(f, CollectiveKind::kSendRecv, 8, bytes)});
  }
  const LineFit line = fit_ring_line(s);
  EXPECT_NEAR(line.intercept_s, 7e-6, 1e-15);
  EXPECT_NEAR(1 / line.seconds_per_byte, 20e9, 1e-3);
}

TEST(CalibrationFit, BusFactorIsNcclTests) {
  // nccl-tests doc/PERFORMANCE.md: 2(n-1)/n, (n-1)/n, (n-1)/n, 1.
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kSendRecv, 8), 1);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kBroadcast, 8), 1);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::kAllReduce, 1), 0);
  // A fit's bw is the busbw it predicts for the largest messages.
  const CollectiveFit f{.t_launch_us = 20, .l_sync_us = 3, .bw_gbps = 230};
  for (const CollectiveKind c : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                                 CollectiveKind::kReduceScatter, CollectiveKind::kSendRecv}) {
    const double bytes = 64.0 * (1 << 30);
    EXPECT_NEAR(bytes / fitted_time(f, c, 8, bytes) * bus_factor(c, 8) / 1e9, 230, 0.1);
  }
}

TEST(CalibrationFit, RecoversEverythingAcrossTwoStepCounts) {
  // 4 ranks, meshes 4x1 and 2x2: all_gather n = 3 and n = 1, so t_launch is identifiable.
  // Same launch and per-step latency everywhere, different bandwidths per group.
  const CollectiveFit g4{.t_launch_us = 7, .l_sync_us = 2.5, .bw_gbps = 3};
  const CollectiveFit g22{.t_launch_us = 7, .l_sync_us = 2.5, .bw_gbps = 1.5};
  const CollectiveFit g21{.t_launch_us = 7, .l_sync_us = 2.5, .bw_gbps = 6};
  std::vector<CollectiveSeries> series;
  for (const CollectiveKind c : kFitCollectives) {
    series.push_back(synthetic(4, 1, c, g4));
    series.push_back(synthetic(2, 2, c, g22));
    series.push_back(synthetic(2, 1, c, g21));
  }
  const CalibrationFit fit = fit_calibration(series);
  ASSERT_EQ(fit.groups.size(), 3u);
  EXPECT_EQ(fit.groups[0].size, 4);
  EXPECT_EQ(fit.groups[1].stride, 2);
  for (const auto& [g, want] : {std::pair{0, g4}, {1, g22}, {2, g21}}) {
    const GroupCalibration& group = fit.groups[static_cast<std::size_t>(g)];
    ASSERT_TRUE(group.all_reduce && group.all_gather && group.reduce_scatter);
    expect_fit(*group.all_reduce, want);
    expect_fit(*group.all_gather, want);
    expect_fit(*group.reduce_scatter, want);
  }
  ASSERT_EQ(fit.quality.size(), series.size());
  for (const FitQuality& q : fit.quality) {
    EXPECT_TRUE(q.split_identified);
    EXPECT_FALSE(q.through_origin);
    EXPECT_NEAR(q.r_squared, 1.0, 1e-12);
    EXPECT_LT(q.max_rel_residual, 1e-12);
  }
}

TEST(CalibrationFit, OneStepCountPutsTheInterceptInLSync) {
  // 2 ranks: n = 1 (gather/scatter) and 2 (all_reduce) but each collective has one n, so
  // t_launch + n·l_sync is all that is identifiable: t_launch = 0, l_sync = a/n, and the
  // fitted times are still exact.
  const CollectiveFit truth{.t_launch_us = 4, .l_sync_us = 1, .bw_gbps = 2};
  const std::vector<CollectiveSeries> series{synthetic(2, 1, CollectiveKind::kAllReduce, truth),
                                             synthetic(2, 1, CollectiveKind::kAllGather, truth)};
  const CalibrationFit fit = fit_calibration(series);
  ASSERT_EQ(fit.groups.size(), 1u);
  expect_fit(*fit.groups[0].all_reduce, {.t_launch_us = 0, .l_sync_us = 3, .bw_gbps = 2});
  expect_fit(*fit.groups[0].all_gather, {.t_launch_us = 0, .l_sync_us = 5, .bw_gbps = 2});
  EXPECT_FALSE(fit.groups[0].reduce_scatter.has_value());
  for (const FitQuality& q : fit.quality) {
    EXPECT_FALSE(q.split_identified);
    EXPECT_LT(q.max_rel_residual, 1e-12);
  }
}

TEST(CalibrationFit, DifferentLatenciesKeepEachGroupsIntercept) {
  // Per-group l_sync differs: the shared t_launch is a compromise, but every group's
  // predicted time is still exact and nothing goes negative.
  const std::vector<CollectiveSeries> series{
      synthetic(4, 1, CollectiveKind::kAllGather, {.t_launch_us = 5, .l_sync_us = 1, .bw_gbps = 4}),
      synthetic(2, 2, CollectiveKind::kAllGather, {.t_launch_us = 5, .l_sync_us = 9, .bw_gbps = 1}),
      synthetic(2, 1, CollectiveKind::kAllGather,
                {.t_launch_us = 5, .l_sync_us = 0.5, .bw_gbps = 8})};
  const CalibrationFit fit = fit_calibration(series);
  for (const FitQuality& q : fit.quality) EXPECT_LT(q.max_rel_residual, 1e-12);
  for (const GroupCalibration& g : fit.groups) {
    EXPECT_GE(g.all_gather->t_launch_us, 0);
    EXPECT_GE(g.all_gather->l_sync_us, 0);
    EXPECT_EQ(g.all_gather->t_launch_us, fit.groups[0].all_gather->t_launch_us);
  }
}

TEST(CalibrationFit, NoisyDataGivesQualityNumbers) {
  CollectiveSeries s =
      synthetic(2, 1, CollectiveKind::kAllReduce, {.t_launch_us = 0, .l_sync_us = 10, .bw_gbps = 5},
                {8 << 10, 32 << 10, 128 << 10, 512 << 10, 2 << 20});
  const double noise[] = {1.05, 0.97, 1.02, 0.99, 1.01};
  for (std::size_t i = 0; i < s.samples.size(); ++i) s.samples[i].seconds *= noise[i];
  const CalibrationFit fit = fit_calibration(std::span(&s, 1));
  const FitQuality& q = fit.quality[0];
  EXPECT_GT(q.max_rel_residual, 0.005);
  EXPECT_LT(q.max_rel_residual, 0.06);
  EXPECT_GT(q.r_squared, 0.99);
  EXPECT_NEAR(fit.groups[0].all_reduce->bw_gbps, 5, 0.5);
}

TEST(CalibrationFit, NegativeInterceptIsRefitThroughTheOrigin) {
  // Times that fall below the line's origin (the small message is "too fast").
  CollectiveSeries s{.size = 2,
                     .stride = 1,
                     .collective = CollectiveKind::kAllGather,
                     .samples = {{1000, 0.5e-6}, {2000, 2e-6}, {4000, 5e-6}}};
  const LineFit line = fit_ring_line(s);
  EXPECT_TRUE(line.through_origin);
  EXPECT_EQ(line.intercept_s, 0);
  EXPECT_GT(line.seconds_per_byte, 0);
  const CalibrationFit fit = fit_calibration(std::span(&s, 1));
  EXPECT_EQ(fit.groups[0].all_gather->t_launch_us, 0);
  EXPECT_EQ(fit.groups[0].all_gather->l_sync_us, 0);
  EXPECT_TRUE(fit.quality[0].through_origin);
}

TEST(CalibrationFit, KeepsTheMedianTimeOfEverySize) {
  // Three sweeps of two sizes, out of order: the fit keeps each size's median, ascending,
  // and the planner prices those sizes at exactly those times though the line misses them.
  CollectiveSeries s{.size = 4,
                     .stride = 1,
                     .collective = CollectiveKind::kReduceScatter,
                     .samples = {{1 << 20, 0.30},
                                 {1 << 16, 0.010},
                                 {1 << 20, 0.25},
                                 {1 << 16, 0.012},
                                 {1 << 20, 0.26},
                                 {1 << 16, 0.011}}};
  const CalibrationFit fit = fit_calibration(std::span(&s, 1));
  const CollectiveFit& f = *fit.groups[0].reduce_scatter;
  ASSERT_EQ(f.measured.size(), 2u);
  EXPECT_EQ(f.measured[0].bytes, 1 << 16);
  EXPECT_NEAR(f.measured[0].us, 11000, 1e-6);
  EXPECT_EQ(f.measured[1].bytes, 1 << 20);
  EXPECT_NEAR(f.measured[1].us, 260000, 1e-6);
  EXPECT_GT(fit.quality[0].max_rel_residual, 0.01);  // a line through 11 and 260 ms misses
  Topology t = load_topology("nvlink-network-4");
  t.calibration.groups = fit.groups;
  const MeshLinks links = mesh_links(t, 4, 1);
  const DimLinks& d = links.dims[0];
  EXPECT_NEAR(collective_time(d, CollectiveKind::kReduceScatter, 1 << 16), 0.011, 1e-9);
  EXPECT_NEAR(collective_time(d, CollectiveKind::kReduceScatter, 1 << 20), 0.26, 1e-9);
}

TEST(CalibrationFit, FitsAreAValidTopologyCalibration) {
  Topology t = load_topology("nvlink-network-4");
  const std::vector<CollectiveSeries> series{
      synthetic(4, 1, CollectiveKind::kAllReduce, {.t_launch_us = 2, .l_sync_us = 1, .bw_gbps = 9}),
      synthetic(2, 2, CollectiveKind::kAllReduce,
                {.t_launch_us = 2, .l_sync_us = 1, .bw_gbps = 3})};
  t.calibration.groups = fit_calibration(series).groups;
  t.calibration.gemm_tflops = 0.05;
  t.validate();
  const Topology back = parse_topology(to_json(t).dump(), "round trip");
  EXPECT_EQ(back, t);
  // The planner now prices 2x2's dim 0 and 4x1 with the fits.
  const MeshLinks l = mesh_links(back, 2, 2);
  EXPECT_EQ(l.dims[0].source, BandwidthSource::kCalibrated);
  EXPECT_NEAR(*l.dims[0].link_gbps, 3, 1e-9);
  EXPECT_EQ(l.dims[1].source, BandwidthSource::kModelled);
  EXPECT_NEAR(*mesh_links(back, 4, 1).dims[0].link_gbps, 9, 1e-9);
}

TEST(CalibrationFit, RejectsDegenerateInput) {
  const CollectiveFit truth{.t_launch_us = 1, .l_sync_us = 1, .bw_gbps = 1};
  EXPECT_EQ(error_of([&] {
              fit_ring_line(synthetic(2, 1, CollectiveKind::kAllGather, truth, {8192, 8192}));
            }),
            "calibration fit: all_gather on groups of 2 ranks (stride 1): needs at least 2 "
            "distinct message sizes to fit T_launch + (P-1)(L_sync + bytes/BW), got 1 (8192 "
            "bytes)");
  EXPECT_NE(error_of([&] {
              fit_ring_line(CollectiveSeries{
                  .size = 2, .stride = 1, .collective = CollectiveKind::kAllGather, .samples = {}});
            }).find("got 0 (no samples)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              fit_ring_line(synthetic(1, 1, CollectiveKind::kAllReduce, truth));
            }).find("a group needs at least 2 ranks"),
            std::string::npos);
  CollectiveSeries negative = synthetic(2, 1, CollectiveKind::kReduceScatter, truth);
  negative.samples[1].seconds = -1;
  EXPECT_NE(error_of([&] {
              fit_ring_line(negative);
            }).find("sample 1 (65536 bytes) has time -1 s, which must be positive and finite"),
            std::string::npos);
  CollectiveSeries nan = synthetic(2, 1, CollectiveKind::kReduceScatter, truth);
  nan.samples[0].seconds = std::nan("");
  EXPECT_NE(error_of([&] { fit_ring_line(nan); }).find("positive and finite"), std::string::npos);
  CollectiveSeries zero_bytes = synthetic(2, 1, CollectiveKind::kAllGather, truth);
  zero_bytes.samples[0].bytes = 0;
  EXPECT_NE(error_of([&] { fit_ring_line(zero_bytes); }).find("bytes=0, which must be positive"),
            std::string::npos);
  // Time falling with size: no bandwidth.
  CollectiveSeries falling{.size = 2,
                           .stride = 1,
                           .collective = CollectiveKind::kAllReduce,
                           .samples = {{1000, 3e-6}, {100000, 2e-6}}};
  EXPECT_NE(error_of([&] {
              fit_ring_line(falling);
            }).find("the time does not grow with the message size"),
            std::string::npos);
  // The same group and collective twice.
  const std::vector<CollectiveSeries> twice{synthetic(2, 1, CollectiveKind::kAllGather, truth),
                                            synthetic(2, 1, CollectiveKind::kAllGather, truth)};
  EXPECT_EQ(error_of([&] { fit_calibration(twice); }),
            "calibration fit: all_gather on groups of 2 ranks (stride 1) appears twice");
  EXPECT_EQ(error_of([&] { fit_calibration({}); }), "calibration fit: no measurements to fit");
}

// measured − predicted = a + h·steps, recovered exactly; the slice count is only a label.
TEST(CalibrationFit, StepOverheadIsTheSlopeOfWhatThePriceMisses) {
  const double h = 43e-6, a = 0.4e-3;
  std::vector<StepSample> samples;
  for (const int s : {1, 4, 16, 64}) {
    const double predicted = 5e-3 + 1e-3 / s;  // whatever the model says
    samples.push_back({.params = {.slices = s},
                       .steps = s,
                       .measured_s = predicted + a + h * s,
                       .predicted_s = predicted});
  }
  const StepOverheadFit fit = fit_step_overhead(samples);
  EXPECT_NEAR(fit.step_s, h, 1e-12);
  EXPECT_NEAR(fit.intercept_s, a, 1e-12);
  EXPECT_NEAR(fit.r_squared, 1, 1e-9);
  // Noise: the least-squares slope, R² below 1.
  samples[2].measured_s += 0.2e-3;
  const StepOverheadFit noisy = fit_step_overhead(samples);
  EXPECT_GT(noisy.step_s, 0);
  EXPECT_LT(noisy.r_squared, 1);
  EXPECT_GT(noisy.r_squared, 0.9);
}

TEST(CalibrationFit, StepOverheadNeverNegative) {
  // The price grows faster with S than the measurement: the steps cost nothing, not less.
  const std::vector<StepSample> samples{
      {.params = {.slices = 1}, .steps = 1, .measured_s = 2e-3, .predicted_s = 1e-3},
      {.params = {.slices = 8}, .steps = 8, .measured_s = 2e-3, .predicted_s = 1.5e-3}};
  const StepOverheadFit fit = fit_step_overhead(samples);
  EXPECT_EQ(fit.step_s, 0);
  EXPECT_NEAR(fit.intercept_s, 0.75e-3, 1e-12);  // the mean residual
}

TEST(CalibrationFit, StepOverheadRejectsDegenerateInput) {
  const std::vector<StepSample> one{
      {.params = {.slices = 4}, .steps = 4, .measured_s = 1, .predicted_s = 1},
      {.params = {.slices = 4}, .steps = 4, .measured_s = 2, .predicted_s = 1}};
  EXPECT_EQ(error_of([&] { fit_step_overhead(one); }),
            "step overhead fit: 1 distinct step count(s); the fit needs at least 2");
  const std::vector<StepSample> zero{
      {.params = {.slices = 1}, .steps = 1, .measured_s = 0, .predicted_s = 1},
      {.params = {.slices = 4}, .steps = 4, .measured_s = 2, .predicted_s = 1}};
  EXPECT_EQ(error_of([&] { fit_step_overhead(zero); }),
            "step overhead fit: S=1: measured 0 s and predicted 1 s must be positive");
}

TEST(CalibrationFit, DimSharingIsWhatTheSecondDimAdds) {
  EXPECT_DOUBLE_EQ(dim_sharing(3, 2, 1), 1);  // the two take turns
  EXPECT_DOUBLE_EQ(dim_sharing(2, 2, 1), 0);  // separate links
  EXPECT_DOUBLE_EQ(dim_sharing(2.5, 1, 2), 0.5);
  EXPECT_DOUBLE_EQ(dim_sharing(1.5, 2, 1), 0);  // faster than the slower alone: clamped
  EXPECT_DOUBLE_EQ(dim_sharing(9, 2, 1), 1);    // worse than taking turns: clamped
  EXPECT_EQ(error_of([] { dim_sharing(1, 0, 1); }),
            "dim sharing: times 1 s (both), 0 s and 1 s (each alone) must be positive");
}

}  // namespace
}  // namespace meshtp::plan
