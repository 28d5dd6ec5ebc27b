// Memory model: Korthikanti et al.'s activation formulas and 16 bytes per parameter.
#include <gtest/gtest.h>

#include "plan/memory.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

ModelSpec gpt(int batch) {
  ModelSpec m = load_model("gpt3-175b");
  m.batch = batch;
  m.recompute = Recompute::kNone;
  return m;
}

TEST(Memory, AtpOnNx1IsMegatronTensorParallel) {
  // Korthikanti: TP over t ranks stores sbh·(10 + 24/t + 5as/(ht)) bytes per layer (fp16).
  const ModelSpec m = gpt(1);
  const double s = m.seq, b = m.batch, h = m.hidden, a = m.heads;
  for (const int t : {1, 2, 8, 64}) {
    EXPECT_NEAR(layer_activation_bytes(m, ActivationLayout::kAtp, t, 1),
                s * b * h * (10 + 24.0 / t + 5 * a * s / (h * t)), 1e-3)
        << t;
  }
  // With sequence parallelism: sbh/t·(34 + 5as/h).
  EXPECT_NEAR(layer_activation_bytes(m, ActivationLayout::kSequenceParallel, 8, 1),
              s * b * h / 8 * (34 + 5 * a * s / h), 1e-3);
  // t = 1 both reduce to the unsharded sbh·(34 + 5as/h).
  EXPECT_NEAR(layer_activation_bytes(m, ActivationLayout::kAtp, 1, 1),
              layer_activation_bytes(m, ActivationLayout::kSequenceParallel, 1, 1), 1e-3);
}

TEST(Memory, AtpTwoDimensionalSharding) {
  // sbh·(10/d2 + 6/N + 18/d1) + 5as²b/N.
  const ModelSpec m = gpt(2);
  const double s = m.seq, b = m.batch, h = m.hidden, a = m.heads;
  EXPECT_NEAR(layer_activation_bytes(m, ActivationLayout::kAtp, 2, 4),
              s * b * h * (10.0 / 4 + 6.0 / 8 + 18.0 / 2) + 5 * a * s * s * b / 8, 1e-3);
}

TEST(Memory, SixteenBytesPerParameterInBothPrecisions) {
  ModelSpec m = gpt(1);
  for (const Precision p : {Precision::kFp16, Precision::kFp32}) {
    m.precision = p;
    const MemoryEstimate e = estimate_memory(m, ActivationLayout::kAtp, 8, 1, 0);
    const double per_rank = m.total_params() / 8;
    EXPECT_NEAR(e.params_bytes + e.grads_bytes + e.optimizer_bytes, 16 * per_rank,
                1e-6 * per_rank);
    EXPECT_NEAR(e.params_bytes, m.element_bytes() * per_rank, 1e-6 * per_rank);
  }
}

TEST(Memory, RecomputationShrinksActivations) {
  ModelSpec m = gpt(8);
  const double none = estimate_memory(m, ActivationLayout::kSequenceParallel, 16, 16, 0)
                          .activations_bytes;
  m.recompute = Recompute::kSelective;
  const double selective = estimate_memory(m, ActivationLayout::kSequenceParallel, 16, 16, 0)
                               .activations_bytes;
  m.recompute = Recompute::kFull;
  const double full = estimate_memory(m, ActivationLayout::kSequenceParallel, 16, 16, 0)
                          .activations_bytes;
  const double s = m.seq, b = m.batch, h = m.hidden, a = m.heads, n = 256, L = m.layers;
  EXPECT_NEAR(none, L * s * b * h / n * (34 + 5 * a * s / h), 1);
  EXPECT_NEAR(selective, L * s * b * h / n * 34, 1);  // Korthikanti's selective recompute
  EXPECT_NEAR(full, L * 2 * s * b * h / n + s * b * h / n * (34 + 5 * a * s / h), 1);
  EXPECT_LT(full, selective);
  EXPECT_LT(selective, none);
}

}  // namespace
}  // namespace meshtp::plan
