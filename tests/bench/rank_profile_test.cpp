// bench rank (bench/rank_profile.hpp): one rank of a layout run alone. For `tiny` on layouts of
// 2 to 8 ranks — Megatron 1D, ATP 2x2, a pipeline with data parallelism and ZeRO — the rank's
// tensor high-water mark is within 10% of the planner's memory for it (the bound train's
// memory-model test holds real runs to), its losses are finite, and the traffic it counted is
// the layout's kinds: tensor-parallel collectives, pipeline transfers, gradient reductions.
// No MPI: every group is an alone group.
#include "bench/rank_profile.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "error_of.hpp"
#include "inverted_device.hpp"
#include "plan/presets.hpp"

namespace meshtp::bench {
namespace {

namespace fs = std::filesystem;
using layout::CollectiveKind;

class RankProfile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("meshtp_rank_profile_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream text(dir_ / "corpus.txt");
    for (int i = 0; i < 400; ++i) text << "one rank alone, step " << i * 7919 % 1000 << "\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  RankBenchOptions options(const layout::Plan& p, int rank) const {
    RankBenchOptions o{.model = plan::load_model("tiny"), .layout = p,
                       .data = (dir_ / "corpus.txt").string()};
    o.model.precision = plan::Precision::kFp32;
    o.model.vocab = 256;
    o.rank = rank;
    o.warmup_steps = 1;
    o.steps = 1;
    return o;
  }
  static bool has(const RankBenchResult& r, CollectiveKind kind) {
    return std::any_of(r.skipped.begin(), r.skipped.end(),
                       [&](const SkippedCollective& s) { return s.kind == kind; });
  }
  fs::path dir_;
};

TEST_F(RankProfile, MemoryWithinTenPercentOfThePlannersAndTrafficOfTheLayoutsKinds) {
  struct Case {
    layout::Plan plan;
    int rank;
    std::vector<CollectiveKind> kinds;  // counted by this rank
  };
  layout::Plan megatron{.mesh = {4, 1}};  // ATP on (t, 1) with sequence parallelism: Megatron-SP
  megatron.sequence_parallel = true;
  const layout::Plan atp{.mesh = {2, 2}};
  const layout::Plan pipeline{.dp = 2, .pp = 2, .microbatches = 2,
                              .schedule = layout::Schedule::k1F1B, .zero = 1, .mesh = {2, 1}};
  const std::vector<Case> cases{
      {megatron, 3, {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter}},
      {atp, 1, {CollectiveKind::kAllReduce}},
      // ZeRO-1: gradients all-reduced over dp, each replica's updated shard all-gathered
      {pipeline, 0, {CollectiveKind::kSendRecv, CollectiveKind::kAllReduce, CollectiveKind::kAllGather}},
      {pipeline, 7, {CollectiveKind::kSendRecv, CollectiveKind::kAllReduce}},
  };
  for (const Case& c : cases) {
    const RankBenchResult r = run_rank_bench(options(c.plan, c.rank));
    const std::string what = "rank " + std::to_string(c.rank) + " of " +
                             std::to_string(c.plan.ranks()) + " ranks";
    EXPECT_EQ(r.ranks, c.plan.ranks()) << what;
    EXPECT_EQ(r.pipeline_rank, c.rank / (c.plan.mesh[0] * c.plan.mesh[1]) % c.plan.pp) << what;
    const double ratio = r.predicted_memory.total_bytes() / r.measured_memory_bytes;
    EXPECT_NEAR(ratio, 1.0, 0.10) << what << ": predicted " << r.predicted_memory.total_bytes()
                                  << " B, measured " << r.measured_memory_bytes << " B";
    ASSERT_FALSE(r.run.losses.empty()) << what;
    for (const double loss : r.run.losses) EXPECT_TRUE(std::isfinite(loss)) << what;
    EXPECT_GT(r.measured_compute_s, 0.0) << what;
    for (const CollectiveKind kind : c.kinds) {
      EXPECT_TRUE(has(r, kind)) << what << " counted no " << layout::name(kind);
    }
  }
}

// On a device (--device cuda): the rank's model, buckets and messages in the inverted
// stand-in's memory (tests/inverted_device.hpp), its alone groups host-staged, train the host
// run's losses and count the same traffic.
TEST_F(RankProfile, ARankOnADeviceTrainsTheHostsLosses) {
  const layout::Plan pipeline{.dp = 2,
                              .pp = 2,
                              .microbatches = 2,
                              .schedule = layout::Schedule::k1F1B,
                              .zero = 1,
                              .mesh = {2, 1}};
  for (const int rank : {0, 7}) {
    const RankBenchResult host = run_rank_bench(options(pipeline, rank));
    testing::InvertedBackend stand_in;
    RankBenchOptions o = options(pipeline, rank);
    o.backend = &stand_in;
    const RankBenchResult device = run_rank_bench(o);
    ASSERT_EQ(device.run.losses.size(), host.run.losses.size());
    for (std::size_t i = 0; i < host.run.losses.size(); ++i) {
      EXPECT_NEAR(device.run.losses[i], host.run.losses[i], 1e-6 * std::abs(host.run.losses[i]))
          << "rank " << rank << ", step " << i + 1;
    }
    ASSERT_EQ(device.skipped.size(), host.skipped.size()) << "rank " << rank;
    for (std::size_t i = 0; i < host.skipped.size(); ++i) {
      EXPECT_EQ(device.skipped[i].kind, host.skipped[i].kind);
      EXPECT_EQ(device.skipped[i].bytes_per_step, host.skipped[i].bytes_per_step);
    }
    EXPECT_GT(stand_in.gemm_calls, 0);
    EXPECT_GT(device.run.blas_gflops, 0.0);  // the backend's own GeMM as the baseline
  }
}

TEST_F(RankProfile, ATopologyPricesTheComputeAndTheSkippedParts) {
  RankBenchOptions o = options(layout::Plan{.mesh = {2, 1}}, 1);
  o.topology = plan::load_topology("nvlink-network-2");
  const RankBenchResult r = run_rank_bench(o);
  ASSERT_TRUE(r.priced.has_value());
  EXPECT_GT(r.predicted_compute_s, 0.0);
  EXPECT_LE(r.predicted_compute_s, r.priced->t_step_s);
}

TEST_F(RankProfile, RefusesARankOutsideTheLayoutAndARankTooBigForTheDevice) {
  EXPECT_NE(test_support::error_of([&] { run_rank_bench(options(layout::Plan{.mesh = {2, 2}}, 4)); })
                .find("--rank 4 is outside the layout's 4 ranks (0..3)"),
            std::string::npos);
  RankBenchOptions o = options(layout::Plan{.mesh = {2, 1}}, 0);
  o.device_memory_bytes = 1024;
  const std::string message = test_support::error_of([&] { run_rank_bench(o); });
  EXPECT_NE(message.find("rank 0 of this layout needs"), std::string::npos) << message;
  EXPECT_NE(message.find("more than the device's"), std::string::npos) << message;
}

}  // namespace
}  // namespace meshtp::bench
