// Pipeline schedules as data: every schedule runs each (microbatch, stage) forward and
// backward exactly once on the stage's rank, never deadlocks, and — run by the simulator
// with uniform stages — idles exactly the textbook bubble; 1F1B bounds the activations in
// flight by the pipeline depth where GPipe keeps every microbatch's.
#include "layout/pipeline_schedule.hpp"

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <tuple>

#include "core/error.hpp"

namespace meshtp::layout {
namespace {

TEST(PipelineSchedule, EveryOperationOnceOnItsRank) {
  for (const Schedule kind : all<Schedule>()) {
    for (const int p : {1, 2, 4}) {
      for (const int m : {4, 8}) {
        const int v = kind == Schedule::kInterleaved ? 2 : 1;
        const PipelineSchedule s = make_schedule(kind, p, m, v);
        std::set<std::tuple<bool, int, int>> seen;
        for (int r = 0; r < p; ++r) {
          for (const PipeOp& op : s.ops[static_cast<std::size_t>(r)]) {
            EXPECT_EQ(s.rank_of(op.stage), r);
            EXPECT_TRUE(seen.emplace(op.forward, op.microbatch, op.stage).second)
                << kind << " p=" << p << " m=" << m << " repeats an op";
          }
        }
        EXPECT_EQ(seen.size(), static_cast<std::size_t>(2 * m * s.stages()));
      }
    }
  }
}

TEST(PipelineSchedule, SimulatedBubbleIsTheFormula) {
  for (const Schedule kind : all<Schedule>()) {
    for (const int p : {1, 2, 4}) {
      for (const int m : {4, 8, 16}) {
        const int v = kind == Schedule::kInterleaved ? 2 : 1;
        const PipelineSchedule s = make_schedule(kind, p, m, v);
        // A rank's whole forward takes 1 and its backward 2, split over its v chunks.
        const ScheduleTiming t = simulate(s, 1.0 / v, 2.0 / v);
        EXPECT_NEAR(t.bubble, bubble_fraction(kind, p, m, v), 1e-9)
            << kind << " p=" << p << " m=" << m << " v=" << v;
        if (kind == Schedule::kGpipe) {
          EXPECT_EQ(t.max_in_flight, m);
        }
        if (kind == Schedule::k1F1B) {
          EXPECT_EQ(t.max_in_flight, p);
        }
      }
    }
  }
}

// Transfers as the runtime overlaps them: each takes x, shorter than a forward. Of a rank's
// 2·v·(m+p−1) boundary crossings, GPipe exposes the fill and the drain, 2(p−1); interleaved
// one pass through every stage and back, 2(v·p−1), whatever m; 1F1B also its steady state,
// 2(p−2) + 2m(p−1)/p. Longer transfers are exposed more, never more than all of them.
TEST(PipelineSchedule, ExposedTransfersCountedByTheSchedule) {
  for (const Schedule kind : all<Schedule>()) {
    for (const int p : {2, 3, 4, 8}) {
      for (const int m : {p, 2 * p, 4 * p}) {
        for (const double backward_over_forward : {2.0, 3.0}) {
          const int v = kind == Schedule::kInterleaved ? 2 : 1;
          const PipelineSchedule s = make_schedule(kind, p, m, v);
          const double f = 1.0 / v, b = backward_over_forward / v, x = 0.1 * f;
          const double expected = kind == Schedule::kGpipe ? 2.0 * (p - 1)
                                  : kind == Schedule::kInterleaved
                                      ? 2.0 * (v * p - 1)
                                      : 2.0 * (p - 2) + 2.0 * m * (p - 1) / p;
          EXPECT_NEAR(exposed_transfer_s(s, f, b, x) / x, expected, 1e-9)
              << kind << " p=" << p << " m=" << m << " B/F=" << backward_over_forward;
          const double slow = 3 * f;
          const double exposed_slow = exposed_transfer_s(s, f, b, slow) / slow;
          EXPECT_GE(exposed_slow, expected - 1e-9) << kind << " p=" << p << " m=" << m;
          EXPECT_LE(exposed_slow, 2.0 * v * (m + p - 1) + 1e-9) << kind << " p=" << p << " m=" << m;
        }
      }
    }
  }
  // One rank: nothing crosses.
  EXPECT_EQ(exposed_transfer_s(make_schedule(Schedule::k1F1B, 1, 4), 1, 2, 5), 0);
}

TEST(PipelineSchedule, PrintsTheWorkedExample) {
  std::ostringstream os;
  os << make_schedule(Schedule::k1F1B, 2, 3);
  EXPECT_EQ(os.str(), "rank 0: F0.0 F1.0 B0.0 F2.0 B1.0 B2.0\nrank 1: F0.1 B0.1 F1.1 B1.1 F2.1 B2.1\n");
}

TEST(PipelineSchedule, BadShapesNameTheValues) {
  EXPECT_THROW(
      {
        try {
          make_schedule(Schedule::k1F1B, 4, 2);
        } catch (const Error& e) {
          EXPECT_STREQ(e.what(),
                       "pipeline: 1f1b needs at least as many microbatches as stages: "
                       "microbatches=2 < pp=4");
          throw;
        }
      },
      Error);
  EXPECT_THROW(make_schedule(Schedule::kInterleaved, 2, 3, 2), Error);  // m % p
  EXPECT_THROW(make_schedule(Schedule::kGpipe, 2, 4, 2), Error);        // v without interleaving
  EXPECT_THROW(make_schedule(Schedule::kInterleaved, 2, 4, 1), Error);
}

}  // namespace
}  // namespace meshtp::layout
