#include "bench/phase_profile.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace meshtp::bench {
namespace {

double at(const PhaseTimes& t, Phase p) { return t[static_cast<std::size_t>(p)]; }
double total(const PhaseTimes& t) { return std::accumulate(t.begin(), t.end(), 0.0); }

TraceSpan span(const char* name, double start, double end) {
  return {.name = name, .kind = SpanKind::kCompute, .start_s = start, .end_s = end};
}

TEST(PhaseProfile, WorkedExampleOfTheHeader) {
  // Recorded in destruction order, as ScopedSpan does: children before parents.
  const std::vector<TraceSpan> spans = {span("layernorm", 0, 1), span("gemm", 1, 5),
                                        span("gemm", 5, 7),      span("wait", 7, 8),
                                        span("attention", 5, 9), span("forward", 0, 10)};
  const PhaseTimes t = attribute_spans(spans, 0, 10);
  EXPECT_DOUBLE_EQ(at(t, Phase::kElementwise), 1);
  EXPECT_DOUBLE_EQ(at(t, Phase::kGemm), 4);
  EXPECT_DOUBLE_EQ(at(t, Phase::kAttention), 3);  // its own 2 + its gemm's 2 − nothing else
  EXPECT_DOUBLE_EQ(at(t, Phase::kCommWait), 1);
  EXPECT_DOUBLE_EQ(at(t, Phase::kOther), 1);
  EXPECT_DOUBLE_EQ(total(t), 10);
}

TEST(PhaseProfile, InFlightCollectivesAreSkippedAndTheirWaitCounts) {
  // An iall_reduce issued at 1 completes at 6, overlapping a gemm; the rank blocks 4..6.
  const std::vector<TraceSpan> spans = {span("gemm", 1, 4), span("wait", 4, 6),
                                        span("iall_reduce", 1, 6), span("backward", 0, 7)};
  const PhaseTimes t = attribute_spans(spans, 0, 7);
  EXPECT_DOUBLE_EQ(at(t, Phase::kGemm), 3);
  EXPECT_DOUBLE_EQ(at(t, Phase::kCommWait), 2);
  EXPECT_DOUBLE_EQ(at(t, Phase::kOther), 2);
  EXPECT_DOUBLE_EQ(total(t), 7);
}

TEST(PhaseProfile, GemmBelongsToTheNearestClaimingAncestor) {
  // lm_head ⊃ gemm; attention ⊃ (an unnamed helper ⊃ gemm); a gemm directly in forward.
  const std::vector<TraceSpan> spans = {
      span("gemm", 1, 3),   span("lm_head", 0, 4),  span("gemm", 5, 6),
      span("helper", 5, 7), span("attention", 4, 8), span("gemm", 8, 10)};
  const PhaseTimes t = attribute_spans(spans, 0, 10);
  EXPECT_DOUBLE_EQ(at(t, Phase::kEmbeddingHead), 4);
  EXPECT_DOUBLE_EQ(at(t, Phase::kAttention), 3);  // 1 own + 1 gemm; the helper's 1 is "other"
  EXPECT_DOUBLE_EQ(at(t, Phase::kOther), 1);
  EXPECT_DOUBLE_EQ(at(t, Phase::kGemm), 2);
}

TEST(PhaseProfile, OnlySpansInsideTheWindowCountAndUncoveredTimeIsOther) {
  const std::vector<TraceSpan> spans = {span("data", 0, 1), span("barrier", 1, 2),
                                        span("gelu", 3, 4), span("optimizer", 5, 8),
                                        span("all_reduce", 6, 7), span("validation", 9, 12)};
  const PhaseTimes t = attribute_spans(spans, 2, 8);
  EXPECT_DOUBLE_EQ(at(t, Phase::kData), 0);
  EXPECT_DOUBLE_EQ(at(t, Phase::kElementwise), 1);
  EXPECT_DOUBLE_EQ(at(t, Phase::kOptimizer), 2);
  EXPECT_DOUBLE_EQ(at(t, Phase::kCommWait), 1);  // the grad-norm all_reduce in the optimizer
  EXPECT_DOUBLE_EQ(at(t, Phase::kOther), 2);     // [2,3) and [4,5)
  EXPECT_DOUBLE_EQ(total(t), 6);
}

TEST(PhaseProfile, EveryPhaseHasAName) {
  for (std::size_t k = 0; k < kPhaseCount; ++k) {
    EXPECT_STRNE(to_string(static_cast<Phase>(k)), "?");
  }
  EXPECT_TRUE(role_of_span("iall_gather").skip);
  EXPECT_FALSE(role_of_span("step").phase.has_value());
  // Issuing and progressing a non-blocking collective is the rank's time in MPI.
  EXPECT_EQ(role_of_span("comm_issue").phase, Phase::kCommWait);
  EXPECT_EQ(role_of_span("progress").phase, Phase::kCommWait);
}

}  // namespace
}  // namespace meshtp::bench
