// calibrate --from-step-log's reading of a Megatron-LM log and of meshtp's own --metrics file,
// and its one-constant fit (plan/step_log.hpp), on a small synthetic log
// (tests/plan/data/step-logs: made-up times) and metrics lines written here.
#include <gtest/gtest.h>

#include <fmt/format.h>

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

// Two metrics lines as meshtp train --metrics writes them (train/metrics_log.hpp): the first
// carries the run.
const std::string kRun =
    R"({"format":"meshtp-metrics","version":1,"loop":"mesh","precision":"fp32","ranks":4,)"
    R"("model":{"batch":8,"heads":4,"hidden":64,"layers":2,"seq":64,"vocab":256},)"
    R"("plan":{"dp":2,"mesh":[2,1],"microbatches":1,"pp":1,"recompute":"none","zero":1}})";
std::string metrics_line(int step, double s, bool with_run) {
  return fmt::format(R"({{"step":{},"loss":5.0,"step_s":{}{}}})", step, s,
                     with_run ? ",\"run\":" + kRun : "") +
         "\n";
}
const std::string kMetrics = metrics_line(1, 0.5, true) + metrics_line(2, 0.010, false) +
                             metrics_line(3, 0.012, false) + metrics_line(4, 0.011, false);

std::string metrics_refusal(const std::string& text) {
  try {
    (void)parse_step_log(text, "m.jsonl");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(StepLog, ReadsMeshtpMetrics) {
  const StepLog log = parse_step_log(kMetrics, "m.jsonl");
  EXPECT_EQ(log.format, "meshtp --metrics");
  EXPECT_EQ(log.runtime, layout::Runtime::kMeshtp);
  EXPECT_EQ(log.model.hidden, 64);
  EXPECT_EQ(log.model.batch, 8);
  EXPECT_EQ(log.model.precision, Precision::kFp32);
  EXPECT_EQ(log.plan.dp, 2);
  EXPECT_EQ(log.plan.mesh[0], 2);
  EXPECT_EQ(log.plan.zero, 1);
  EXPECT_EQ(log.world_size, 4);
  ASSERT_EQ(log.iteration_ms.size(), 4u);
  EXPECT_DOUBLE_EQ(log.step_s, 0.011);  // the first (0.5 s, the warm-up) dropped
  // A resumed run appends a second run record: the same one is accepted.
  EXPECT_NO_THROW(parse_step_log(kMetrics + metrics_line(5, 0.01, true), "m.jsonl"));
}

TEST(StepLog, ABadMetricsFileIsRefusedInOneLine) {
  const auto one_line = [](const std::string& why) {
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
    return why;
  };
  EXPECT_NE(one_line(metrics_refusal(kMetrics.substr(0, kMetrics.size() - 20)))
                .find("m.jsonl:4: not a JSON object (the last line is cut short: a truncated "
                      "file?)"),
            std::string::npos);
  EXPECT_NE(one_line(metrics_refusal("\n\n")).find("m.jsonl: the file is empty"),
            std::string::npos);
  std::string v2 = kMetrics;
  v2.replace(v2.find("\"version\":1"), 11, "\"version\":2");
  EXPECT_NE(one_line(metrics_refusal(v2))
                .find("m.jsonl:1: metrics version 2 is not the one this meshtp reads (1)"),
            std::string::npos);
  EXPECT_NE(one_line(metrics_refusal(metrics_line(1, 0.5, false) + metrics_line(2, 0.5, false)))
                .find("m.jsonl: no line carries the run's model and layout"),
            std::string::npos);
  EXPECT_NE(one_line(metrics_refusal(R"({"loss":1})" "\n")).find("m.jsonl:1: no integer \"step\""),
            std::string::npos);
  EXPECT_NE(one_line(metrics_refusal(metrics_line(1, 0, true))).find("step 1 has no positive"),
            std::string::npos);
  std::string other = metrics_line(5, 0.01, true);
  other.replace(other.find("\"dp\":2"), 6, "\"dp\":1");
  EXPECT_NE(one_line(metrics_refusal(kMetrics + other))
                .find("m.jsonl:5: this run's model or layout differs from line 1's"),
            std::string::npos);
  std::string ranks = kMetrics;
  ranks.replace(ranks.find("\"ranks\":4"), 9, "\"ranks\":8");
  EXPECT_NE(one_line(metrics_refusal(ranks)).find("m.jsonl:1 run"), std::string::npos);
}

TEST(StepLog, AMetricsFileFitsLikeAMegatronLog) {
  const StepLog log = parse_step_log(kMetrics, "m.jsonl");
  const LayoutRequest r{.topology = load_topology("nvlink-network-4"),
                        .model = log.model,
                        .devices = log.world_size,
                        .runtime = log.runtime};
  LayoutRequest at = r;
  at.topology.ranges = {{.constant = "/launch_us", .low = 5, .high = 20, .source = "test"}};
  // A step 1.5x what the given launch time prices (tiny's step is mostly launches): a longer
  // launch fits it.
  const double priced = fit_step_constant(at, log.plan, 1.0, "/launch_us").priced_given_s;
  const ConstantFit fit = fit_step_constant(at, log.plan, 1.5 * priced, "/launch_us");
  EXPECT_LT(std::abs(fit.residual()), 1e-3);
  EXPECT_GT(fit.fitted, fit.given);
}

// The fit set of docs/validation.md's "A fit on one published run": Narayanan et al. 2021
// Table 1's 39.1B row as a Megatron-LM log (synthesised by scripts/validate_narayanan.py).
TEST(StepLog, ReadsTheNarayananFitLog) {
  const StepLog log = parse_step_log(read_file(kData + "narayanan2021-table1-39b.log"), "fit");
  EXPECT_EQ(log.format, "Megatron-LM");
  EXPECT_EQ(log.model.layers, 48);
  EXPECT_EQ(log.model.hidden, 8192);
  EXPECT_EQ(log.world_size, 512);
  EXPECT_EQ(log.plan.dp, 32);
  EXPECT_EQ(log.plan.pp, 2);
  EXPECT_EQ(log.plan.microbatches, 48);
  EXPECT_EQ(log.plan.recompute, Recompute::kFull);
  EXPECT_DOUBLE_EQ(log.step_s, 14.4535);
}

}  // namespace
}  // namespace meshtp::plan
