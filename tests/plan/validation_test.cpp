// Plan validation, the pure half: the collectives a candidate is charged for add up to its
// t_comm_s, and the comparison ranks, scores and rejects as documented.
#include "plan/validation.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.hpp"
#include "plan/presets.hpp"
#include "error_of.hpp"

namespace meshtp::plan {
namespace {

using meshtp::test_support::error_of;

// 4 devices, calibrated like `meshtp calibrate --mesh all` would: every group shape.
PlanRequest small_request(Recompute recompute = Recompute::kNone) {
  PlanRequest r;
  r.topology = load_topology("nvlink-network-4");
  for (const auto& [p, stride, bw] : {std::tuple{4, 1, 3.0}, {2, 2, 1.5}, {2, 1, 6.0}}) {
    GroupCalibration g;
    g.size = p;
    g.stride = stride;
    g.all_reduce = CollectiveFit{.t_launch_us = 5, .l_sync_us = 2, .bw_gbps = bw};
    g.all_gather = CollectiveFit{.t_launch_us = 4, .l_sync_us = 3, .bw_gbps = bw * 1.1};
    g.reduce_scatter = CollectiveFit{.t_launch_us = 6, .l_sync_us = 1, .bw_gbps = bw * 0.9};
    r.topology.calibration.groups.push_back(g);
  }
  r.topology.calibration.gemm_tflops = 0.05;
  r.model.name = "tiny";
  r.model.layers = 2;
  r.model.hidden = 256;
  r.model.heads = 8;
  r.model.batch = 4;
  r.model.seq = 64;
  r.model.precision = Precision::kFp32;
  r.model.recompute = recompute;
  r.devices = 4;
  r.strategies = {Strategy::kAtp, Strategy::kMegatron, Strategy::kTp1d};
  r.chunks = {1, 2};
  return r;
}

TEST(PlannedCollectives, AddUpToTheCandidatesCommTime) {
  for (const Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    const PlanRequest request = small_request(recompute);
    const PlanResult result = plan(request);
    int checked = 0;
    for (const Candidate& c : result.candidates) {
      if (!c.valid) continue;
      SCOPED_TRACE(fmt::format("{} {}x{} c={} recompute {}", name(c.strategy), c.mesh[0], c.mesh[1],
                               c.chunks, name(recompute)));
      double total = 0;
      for (const PlannedCollective& p : planned_collectives(request, c)) {
        EXPECT_GT(p.bytes, 0);
        EXPECT_GT(p.count, 0);
        EXPECT_EQ(p.group_size, c.mesh[static_cast<std::size_t>(p.mesh_dim)]);
        EXPECT_EQ(p.stride, p.mesh_dim == 0 ? c.mesh[1] : 1);
        // The per-call time is the calibration fit of that group shape.
        const CollectiveFit& fit =
            *(p.collective == CollectiveKind::kAllReduce
                  ? request.topology.calibrated_group(p.group_size, p.stride)->all_reduce
              : p.collective == CollectiveKind::kAllGather
                  ? request.topology.calibrated_group(p.group_size, p.stride)->all_gather
                  : request.topology.calibrated_group(p.group_size, p.stride)->reduce_scatter);
        EXPECT_NEAR(p.predicted_s, fitted_time(fit, p.collective, p.group_size, p.bytes), 1e-15);
        total += p.count * p.predicted_s;
      }
      EXPECT_NEAR(total, c.t_comm_s, 1e-12 * c.t_comm_s);
      ++checked;
    }
    EXPECT_EQ(checked, 7);  // atp/megatron 4x1, 2x2, 1x4 × chunks 1, 2 + tp1d 4x1
  }
}

TEST(PlannedCollectives, OneCallPerChunkOfEachBlockCollective) {
  const PlanRequest request = small_request();
  const Candidate c = evaluate(request, Strategy::kAtp, 2, 2, 2);
  const std::vector<PlannedCollective> calls = planned_collectives(request, c);
  // layout/atp_traffic.hpp per pass: ln1, qkv RS, proj AG + AR, ln2, mlp1, mlp2; backward
  // transposed: 7 + 7.
  ASSERT_EQ(calls.size(), 14u);
  // qkv forward: reduce-scatter of [M/2, 3h/d1] fp32 per chunk on dim 1, 2 chunks × L = 2.
  const double M = 4 * 64;
  EXPECT_EQ(calls[1].mesh_dim, 1);
  EXPECT_EQ(calls[1].collective, CollectiveKind::kReduceScatter);
  EXPECT_DOUBLE_EQ(calls[1].bytes, M / 2 * 3 * 256 / 2 * 4);
  EXPECT_DOUBLE_EQ(calls[1].count, 2 * 2);
  // ln1's row statistics: (Σx, Σx²) in double per row of a chunk.
  EXPECT_EQ(calls[0].collective, CollectiveKind::kAllReduce);
  EXPECT_DOUBLE_EQ(calls[0].bytes, M / 2 * 16);
  // The backward twin of qkv's reduce-scatter: an all-gather of the same buffer per chunk.
  EXPECT_EQ(calls[8].collective, CollectiveKind::kAllGather);
  EXPECT_DOUBLE_EQ(calls[8].bytes, M / 2 * 3 * 256 / 2 * 4);
  EXPECT_DOUBLE_EQ(calls[8].count, 2 * 2);
}

TEST(PlannedCollectives, RejectsWhatCannotBeReplayed) {
  PlanRequest request = small_request();
  request.strategies = {Strategy::kMeshSlice};
  const Candidate ms = evaluate(request, Strategy::kMeshSlice, 2, 2, 1);
  ASSERT_TRUE(ms.valid) << ms.reason;
  EXPECT_NE(error_of([&] { planned_collectives(request, ms); }).find("is a 2D GeMM strategy"),
            std::string::npos);
  Candidate invalid = evaluate(request, Strategy::kAtp, 2, 2, 3);  // batch 4 % chunks 3
  EXPECT_FALSE(invalid.valid);
  EXPECT_NE(error_of([&] {
              planned_collectives(request, invalid);
            }).find("is not a valid candidate (batch=4 is not divisible by chunks=3"),
            std::string::npos);
}

ValidationRow row(Strategy s, int d1, int d2, double pred_step, double pred_comm, double meas_step,
                  double meas_replay, double meas_wait) {
  ValidationRow r;
  r.predicted.strategy = s;
  r.predicted.mesh = {d1, d2};
  r.predicted.valid = r.predicted.feasible = true;
  r.predicted.t_step_s = pred_step;
  r.predicted.t_comm_s = pred_comm;
  r.predicted.t_compute_s = pred_step - pred_comm / 2;
  r.measured.step_s = meas_step;
  r.measured.replay_comm_s = meas_replay;
  r.measured.wait_s = meas_wait;
  return r;
}

TEST(Validation, SummaryScoresAndRanks) {
  const std::vector<ValidationRow> rows{
      row(Strategy::kMegatron, 2, 1, 1.0, 0.2, 1.3, 0.25, 0.1),  // predicted best
      row(Strategy::kAtp, 2, 2, 1.1, 0.4, 1.2, 0.4, 0.2),        // measured best
      row(Strategy::kTp1d, 4, 1, 1.2, 0.3, 1.5, 0.2, 0.15)};
  const ValidationSummary s = summarize(rows);
  EXPECT_EQ(s.predicted_best, 0u);
  EXPECT_EQ(s.measured_best, 1u);
  EXPECT_FALSE(s.best_agrees);
  EXPECT_NEAR(s.regret, 1.3 / 1.2 - 1, 1e-12);
  // comm errors: −20%, 0%, +50%.
  EXPECT_NEAR(s.comm.mean_abs, (0.2 + 0 + 0.5) / 3, 1e-12);
  EXPECT_NEAR(s.comm.max_abs, 0.5, 1e-12);
  // exposed = step − compute = comm/2: 0.1 vs 0.1, 0.2 vs 0.2, 0.15 vs 0.15.
  EXPECT_NEAR(s.exposed.max_abs, 0, 1e-12);
  // Predicted order 1,2,3; measured 2,1,3: Spearman = 1 − 6·Σd²/(n(n²−1)) = 1 − 12/24.
  ASSERT_TRUE(s.step_rank_correlation.has_value());
  EXPECT_NEAR(*s.step_rank_correlation, 0.5, 1e-12);
  const std::string text = format_validation(rows, s);
  EXPECT_NE(text.find("predicted best: megatron 2x1 c=1; measured best: atp 2x2 c=1; DISAGREE "
                      "(the predicted best measured 8.3% slower)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("communication estimate vs replayed collectives: mean |error| 23.3%, "
                      "max 50.0%"),
            std::string::npos)
      << text;
  const nlohmann::json j = to_json(rows, s);
  EXPECT_EQ(j["summary"]["best_agrees"], false);
  EXPECT_EQ(j["rows"].size(), 3u);
  EXPECT_NEAR(j["rows"][2]["comm_rel_error"].get<double>(), 0.5, 1e-12);
  EXPECT_EQ(j["rows"][0]["measured"]["step_s"], 1.3);
}

TEST(Validation, AgreementAndOneRow) {
  const std::vector<ValidationRow> one{row(Strategy::kAtp, 2, 2, 1.0, 0.2, 1.0, 0.2, 0.1)};
  const ValidationSummary s = summarize(one);
  EXPECT_TRUE(s.best_agrees);
  EXPECT_EQ(s.regret, 0);
  EXPECT_FALSE(s.step_rank_correlation.has_value());
  EXPECT_NE(format_validation(one, s).find("; AGREE"), std::string::npos);
}

// A 2D GeMM row has no replay (its collectives are pipelined): its comm error is NaN, left
// out of the comm summary and printed "-", while its step still ranks.
TEST(Validation, Gemm2dRowsHaveNoReplay) {
  const std::vector<ValidationRow> rows{row(Strategy::kAtp, 2, 2, 1.0, 0.2, 1.0, 0.25, 0.1),
                                        row(Strategy::kMeshSlice, 2, 2, 0.9, 0.3, 0.8, 0, 0.2)};
  const ValidationSummary s = summarize(rows);
  EXPECT_EQ(s.measured_best, 1u);
  EXPECT_EQ(s.comm.count, 1);
  EXPECT_NEAR(s.comm.max_abs, 0.2, 1e-12);
  EXPECT_TRUE(std::isnan(rows[1].comm_rel_error()));
  const std::string text = format_validation(rows, s);
  EXPECT_NE(text.find("meshslice 2x2      |   900.00   800.00   +12% |   300.00        -      -"),
            std::string::npos)
      << text;
  EXPECT_TRUE(to_json(rows, s)["rows"][1]["comm_rel_error"].is_null());
  const ValidationSummary none = summarize({rows[1]});
  EXPECT_NE(format_validation({rows[1]}, none)
                .find("communication estimate vs replayed collectives: - (no candidate"),
            std::string::npos);
}

// Measured compute far above the prediction (MeshSlice's slices on a CPU) is pointed out,
// and a row whose compute is near its price is not.
TEST(Validation, UnpricedComputeIsNoted) {
  // MeshSlice: compute predicted 0.3 − 0.5/2 = 50 ms, measured 0.6 − 0.25 = 350 ms (7x).
  const std::vector<ValidationRow> rows{row(Strategy::kAtp, 2, 2, 1.0, 0.2, 1.0, 0.25, 0.1),
                                        row(Strategy::kMeshSlice, 2, 2, 0.3, 0.5, 0.6, 0, 0.25)};
  const std::string text = format_validation(rows, summarize(rows));
  EXPECT_NE(text.find("note: meshslice 2x2: compute measured 350.0 ms, 7.0x the 50.0 ms "
                      "predicted"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("note: atp"), std::string::npos) << text;
}

TEST(Validation, RejectsBadRows) {
  EXPECT_EQ(error_of([] { summarize({}); }), "plan validation: no candidate was run");
  std::vector<ValidationRow> rows{row(Strategy::kAtp, 2, 2, 1.0, 0.2, 1.0, 0.0, 0.1)};
  EXPECT_NE(error_of([&] { summarize(rows); })
                .find("atp 2x2 c=1: measured step 1 s, wait 0.1 "
                      "s and replayed comm 0 s must be positive"),
            std::string::npos);
  rows[0].measured.replay_comm_s = 0.1;
  rows[0].predicted.valid = false;
  rows[0].predicted.reason = "hidden=7 is not divisible by mesh dim 0 (size 2)";
  EXPECT_NE(error_of([&] { summarize(rows); }).find("is not a valid candidate (hidden=7"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtp::plan
