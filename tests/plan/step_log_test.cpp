// calibrate --from-step-log's reading of a Megatron-LM log and its one-constant fit
// (plan/step_log.hpp), on a small synthetic log (tests/plan/data/step-logs: made-up times).
#include <gtest/gtest.h>

#include <cmath>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "plan/presets.hpp"
#include "plan/step_log.hpp"

namespace meshtp::plan {
namespace {

const std::string kData = std::string(MESHTP_SOURCE_DIR) + "/tests/plan/data/step-logs/";

std::string refusal(const std::string& text) {
  try {
    (void)parse_megatron_log(text, "run.log");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(StepLog, ReadsTheArgumentsAndTheMedianStep) {
  const StepLog log =
      parse_megatron_log(read_file(kData + "megatron-22b-synthetic.log"), "synthetic");
  EXPECT_EQ(log.model.layers, 48);
  EXPECT_EQ(log.model.hidden, 6144);
  EXPECT_EQ(log.model.heads, 64);
  EXPECT_EQ(log.model.seq, 2048);
  EXPECT_EQ(log.model.batch, 4);
  EXPECT_EQ(log.model.vocab, 51200);
  EXPECT_EQ(log.model.precision, Precision::kFp16);
  EXPECT_EQ(log.plan.mesh[0], 8);
  EXPECT_EQ(log.plan.pp, 1);
  EXPECT_EQ(log.plan.dp, 1);
  EXPECT_EQ(log.plan.microbatches, 1);
  EXPECT_EQ(log.plan.recompute, Recompute::kFull);
  EXPECT_FALSE(log.plan.sequence_parallel);
  EXPECT_EQ(log.world_size, 8);
  ASSERT_EQ(log.iteration_ms.size(), 4u);
  EXPECT_DOUBLE_EQ(log.step_s, 1.6);  // the median of 1610.2, 1600.0, 1590.4: the first dropped
}

TEST(StepLog, ABadLogIsRefusedNamingWhat) {
  const std::string log = read_file(kData + "megatron-22b-synthetic.log");
  EXPECT_NE(refusal(read_file(kData + "no-arguments.log")).find("no Megatron-LM arguments block"),
            std::string::npos);
  std::string no_steps = log.substr(0, log.find(" [2024"));
  EXPECT_NE(refusal(no_steps).find("no 'elapsed time per iteration (ms)' line"),
            std::string::npos);
  std::string no_layers = log;
  no_layers.erase(no_layers.find("  num_layers ."), no_layers.find("  num_layers_per") -
                                                        no_layers.find("  num_layers ."));
  EXPECT_NE(refusal(no_layers).find("run.log: argument 'num_layers' is missing"),
            std::string::npos);
  std::string bad_time = log;
  bad_time.replace(bad_time.find("1600.0"), 6, "-3");
  EXPECT_NE(refusal(bad_time).find("'-3' is not a positive number"), std::string::npos);
  std::string bad_world = log;
  bad_world.replace(bad_world.find("world_size ...................................... 8"),
                    std::string("world_size ...................................... 8").size(),
                    "world_size ...................................... 12");
  EXPECT_NE(refusal(bad_world).find("world_size=12 is not a multiple"), std::string::npos);
}

TEST(StepLog, OneConstantFitsTheStepAndSaysItsRange) {
  const StepLog log =
      parse_megatron_log(read_file(kData + "megatron-22b-synthetic.log"), "synthetic");
  const LayoutRequest r{.topology = load_topology("dgx-a100-1x8"),
                        .model = log.model,
                        .devices = log.world_size,
                        .runtime = layout::Runtime::kMegatron};
  const ConstantFit fit = fit_step_constant(r, log.plan, log.step_s, "/device/elementwise_gbps");
  EXPECT_EQ(fit.given, 1600);
  EXPECT_EQ(fit.range.low, 1244);
  EXPECT_LT(std::abs(fit.residual()), 1e-3);
  EXPECT_LT(fit.fitted, fit.given);  // 1.6 s is slower than priced: a slower elementwise rate
  EXPECT_GT(fit.priced_given_s, 0);
  // Default: the non-integer range that moves the step the most; never the tile.
  const ConstantFit any = fit_step_constant(r, log.plan, log.step_s, "");
  EXPECT_NE(any.range.constant, "/device/gemm/tile/1");
  // A step no value reaches: the nearer end, and the residual says how far.
  const ConstantFit far = fit_step_constant(r, log.plan, 100 * log.step_s, "/levels/0/group_gbps");
  EXPECT_FALSE(far.inside());
  EXPECT_LT(far.residual(), -0.5);
  EXPECT_THROW(fit_step_constant(r, log.plan, log.step_s, "/device/gemm/tile/1"), Error);
  EXPECT_THROW(fit_step_constant(r, log.plan, log.step_s, "/launch_us"), Error);
}

}  // namespace
}  // namespace meshtp::plan
