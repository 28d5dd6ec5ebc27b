// The elementwise term: per-rank element counts per layout (exact, on a model small enough
// to count by hand), its place in t_compute_s / t_step_s, and the topology field behind it.
#include "plan/elementwise.hpp"

#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"
#include "error_of.hpp"

namespace meshtp::plan {
namespace {

using meshtp::test_support::error_of;

// M = b·s = 8 tokens, h = 8, a = 4, s = 4, fp32. Serial tensors: stream M·h = 64,
// qkv M·3h = 192, mlp1 M·4h = 256, scores b·a·s² = 128.
ModelSpec tiny_model() {
  return parse_model(R"({"name": "tiny", "layers": 2, "hidden": 8, "heads": 4, "batch": 2,
                         "seq": 4, "precision": "fp32"})", "tiny_model()");
}

const ElementwiseOp& op(const ElementwiseEstimate& e, const std::string& name, bool backward) {
  for (const ElementwiseOp& o : e.ops) {
    if (o.name == name && o.backward == backward) return o;
  }
  throw Error("no op " + name);
}

// Per-rank elements of (ln, qkv bias fwd, qkv bias bwd, mlp1/gelu, row bias bwd, softmax).
void expect_elements(const ElementwiseEstimate& e, double stream, double qkv_fwd, double qkv_bwd,
                     double mlp1, double row_bias_bwd, double scores) {
  for (const bool bwd : {false, true}) {
    for (const char* s : {"ln1", "ln2", "residual1", "residual2"}) {
      EXPECT_EQ(op(e, s, bwd).elements, stream) << s << (bwd ? " bwd" : " fwd");
    }
    EXPECT_EQ(op(e, "gelu", bwd).elements, mlp1);
    EXPECT_EQ(op(e, "mlp1 bias", bwd).elements, mlp1);
    EXPECT_EQ(op(e, "softmax", bwd).elements, scores);
  }
  EXPECT_EQ(op(e, "qkv bias", false).elements, qkv_fwd);
  EXPECT_EQ(op(e, "qkv bias", true).elements, qkv_bwd);
  EXPECT_EQ(op(e, "proj bias", false).elements, stream);
  EXPECT_EQ(op(e, "mlp2 bias", false).elements, stream);
  EXPECT_EQ(op(e, "proj bias", true).elements, row_bias_bwd);
  EXPECT_EQ(op(e, "mlp2 bias", true).elements, row_bias_bwd);
  EXPECT_EQ(e.ops.size(), 20u);
}

// Touches: forward 16·stream + 2·qkv_fwd + 3.5·scores + 4·mlp1;
//          backward 16·stream + 2·row_bias_bwd + 6·mlp1 + 3·scores + qkv_bwd.
TEST(Elementwise, MegatronReplicatesTheStream) {
  const ElementwiseEstimate e =
      elementwise_estimate(tiny_model(), ElementwiseLayout::kAtp, 4, 1, 1);
  expect_elements(e, 64, 48, 48, 64, 64, 32);
  EXPECT_EQ(e.touched(false), 1024 + 96 + 112 + 256);      // 1488
  EXPECT_EQ(e.touched(true), 1024 + 128 + 384 + 96 + 48);  // 1680
  // 1 GB/s, 4 bytes per touch.
  EXPECT_NEAR(e.forward_s, 1488 * 4e-9, 1e-18);
  EXPECT_NEAR(e.backward_s, 1680 * 4e-9, 1e-18);
}

TEST(Elementwise, AtpSplitsTheStreamByD2AndGeluByD1) {
  const ModelSpec m = tiny_model();
  const ElementwiseEstimate e = elementwise_estimate(m, ElementwiseLayout::kAtp, 2, 2, 1);
  expect_elements(e, 32, 48, 96, 128, 32, 32);
  EXPECT_EQ(e.touched(false), 512 + 96 + 112 + 512);     // 1232
  EXPECT_EQ(e.touched(true), 512 + 64 + 768 + 96 + 96);  // 1536
  // Mesh (1, 4): the stream is split 4 ways but GeLU's input is replicated on every rank.
  const ElementwiseEstimate r = elementwise_estimate(m, ElementwiseLayout::kAtp, 1, 4, 1);
  expect_elements(r, 16, 48, 192, 256, 16, 32);
  EXPECT_EQ(r.touched(false), 256 + 96 + 112 + 1024);
  EXPECT_EQ(r.touched(true), 256 + 32 + 1536 + 96 + 192);
}

TEST(Elementwise, SequenceParallelSplitsEverythingButTheGatheredBiasGradient) {
  const ModelSpec m = tiny_model();
  const ElementwiseEstimate e =
      elementwise_estimate(m, ElementwiseLayout::kSequenceParallel, 4, 1, 1);
  expect_elements(e, 16, 48, 48, 64, 64, 32);
  EXPECT_EQ(e.touched(false), 256 + 96 + 112 + 256);      // 720
  EXPECT_EQ(e.touched(true), 256 + 128 + 384 + 96 + 48);  // 912
  const ElementwiseEstimate f = elementwise_estimate(m, ElementwiseLayout::kFullySharded, 2, 2, 1);
  expect_elements(f, 16, 48, 48, 64, 16, 32);
  // One rank holds everything: all layouts agree.
  for (const ElementwiseLayout l : {ElementwiseLayout::kAtp, ElementwiseLayout::kSequenceParallel,
                                    ElementwiseLayout::kFullySharded}) {
    expect_elements(elementwise_estimate(m, l, 1, 1, 1), 64, 192, 192, 256, 64, 128);
  }
}

TEST(Elementwise, RecomputationAndBadRates) {
  const ModelSpec m = tiny_model();
  const ElementwiseEstimate e = elementwise_estimate(m, ElementwiseLayout::kAtp, 2, 2, 2);
  EXPECT_NEAR(e.softmax_forward_s, 32 * 3.5 * 4 / 2e9, 1e-18);
  EXPECT_DOUBLE_EQ(e.layer_s(Recompute::kNone), e.forward_s + e.backward_s);
  EXPECT_DOUBLE_EQ(e.layer_s(Recompute::kFull), 2 * e.forward_s + e.backward_s);
  EXPECT_DOUBLE_EQ(e.layer_s(Recompute::kSelective),
                   e.forward_s + e.backward_s + e.softmax_forward_s);
  EXPECT_NE(error_of([&] {
              elementwise_estimate(m, ElementwiseLayout::kAtp, 2, 2, 0);
            }).find("elementwise_gbps=0 must be positive"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              elementwise_estimate(m, ElementwiseLayout::kSequenceParallel, 2, 2, 1);
            }).find("sequence parallelism runs on a mesh (N, 1), got 2x2"),
            std::string::npos);
}

PlanRequest tiny_request(double elementwise_gbps) {
  PlanRequest r;
  r.topology = load_topology("nvlink-network-4");
  r.topology.elementwise_gbps = elementwise_gbps;
  r.model = tiny_model();
  r.devices = 4;
  return r;
}

// The term adds exactly L·(E_f + E_b) to compute and, with nothing to hide it, to the step.
TEST(Elementwise, AppearsInComputeAndStepOfEveryStrategy) {
  const double slow = 0.001, fast = 1e12;  // GB/s; `fast` makes the term ~0
  struct Case {
    Strategy strategy;
    int d1, d2;
    ElementwiseLayout layout;
  };
  for (const Case& k : {Case{Strategy::kMegatron, 4, 1, ElementwiseLayout::kAtp},
                        Case{Strategy::kAtp, 2, 2, ElementwiseLayout::kAtp},
                        Case{Strategy::kTp1d, 4, 1, ElementwiseLayout::kSequenceParallel},
                        Case{Strategy::kCollective, 2, 2, ElementwiseLayout::kFullySharded}}) {
    SCOPED_TRACE(name(k.strategy));
    const Candidate with = evaluate(tiny_request(slow), k.strategy, k.d1, k.d2, 1);
    const Candidate without = evaluate(tiny_request(fast), k.strategy, k.d1, k.d2, 1);
    ASSERT_TRUE(with.valid) << with.reason;
    const ElementwiseEstimate e = elementwise_estimate(tiny_model(), k.layout, k.d1, k.d2, slow);
    const double term = 2 * (e.forward_s + e.backward_s);
    EXPECT_NEAR(with.t_elementwise_s, term, 1e-12 * term);
    EXPECT_NEAR(with.t_compute_s - without.t_compute_s, term, 1e-9 * term);
    // c = 1 and compute ≫ comm here: the whole term shows in the step, but in the ATP
    // block less what it hides of the communication exposed without it (the bias
    // gradients run under the dX all-reduces, model/block.cpp).
    const double exposed = without.t_step_s - without.t_compute_s;
    if (k.layout == ElementwiseLayout::kAtp) {
      EXPECT_LE(with.t_step_s - without.t_step_s, term * (1 + 1e-9));
      EXPECT_GE(with.t_step_s - without.t_step_s, term - exposed);
    } else {
      EXPECT_NEAR(with.t_step_s - without.t_step_s, term, 1e-6 * term);
    }
    EXPECT_EQ(with.t_comm_s, without.t_comm_s);
  }
  // Where elementwise work dominates, sequence parallelism beats replicated Megatron.
  const Candidate mega = evaluate(tiny_request(slow), Strategy::kMegatron, 4, 1, 1);
  const Candidate sp = evaluate(tiny_request(slow), Strategy::kTp1d, 4, 1, 1);
  EXPECT_LT(sp.t_step_s, mega.t_step_s);
  // --explain carries the per-op breakdown.
  const Explanation x = explain(tiny_request(slow), mega);
  EXPECT_EQ(x.elementwise.ops.size(), 20u);
  EXPECT_EQ(x.elementwise_layout, ElementwiseLayout::kAtp);
  ASSERT_TRUE(x.atp);
  EXPECT_NEAR(x.atp->elementwise_fwd_s, x.elementwise.forward_s, 1e-18);
}

TEST(Elementwise, ChunksOverlapBothPassesWithTheElementwiseWork) {
  // The elementwise ops run per chunk where the block runs them (atp_cost.hpp's stages), so
  // a chunk's collective hides under the next chunk's elementwise work, and the bias
  // gradients under the dX all-reduces; the LayerNorm statistics' all-reduces are waited at
  // once and hide under nothing.
  ModelSpec m = tiny_model();
  m.batch = 4;
  const Topology t = load_topology("nvlink-network-4");
  const MeshLinks l = mesh_links(t, 2, 2);
  const ElementwiseEstimate ew = elementwise_estimate(m, ElementwiseLayout::kAtp, 2, 2, 0.01);
  const AtpEstimate a = atp_estimate(m, l, 2, t.tflops * 1e12, ew);
  const AtpEstimate g = atp_estimate(m, l, 2, t.tflops * 1e12, ElementwiseEstimate{});
  EXPECT_DOUBLE_EQ(a.compute_fwd_s, g.compute_fwd_s + ew.forward_s);
  EXPECT_DOUBLE_EQ(a.compute_bwd_s, g.compute_bwd_s + ew.backward_s);
  // At 0.01 GB/s the elementwise work outweighs every all-reduce: compute sets the pace.
  ASSERT_GT(ew.backward_s, 2 * a.comm_bwd_s);
  double stats[2] = {0, 0};  // [backward]: the LayerNorm statistics' all-reduces
  for (const AtpOp& op : a.ops) {
    if (op.name == "ln1" || op.name == "ln2") stats[op.backward ? 1 : 0] += op.comm_s;
  }
  ASSERT_GT(stats[0], 0);
  EXPECT_GE(a.forward_s, a.compute_fwd_s + stats[0] - 1e-15);
  EXPECT_LT(a.forward_s, a.compute_fwd_s + a.comm_fwd_s);
  EXPECT_GE(a.backward_s, a.compute_bwd_s + stats[1] - 1e-15);
  EXPECT_LT(a.backward_s, a.compute_bwd_s + a.comm_bwd_s);
  EXPECT_LT(a.backward_s, g.backward_s + ew.backward_s);
}

TEST(ElementwiseTopology, FieldRoundTripsAndIsOptional) {
  const std::string base = R"({"name": "t", "device": {"memory_gib": 80, "tflops": 100},
                               "levels": [{"members": 4, "group_gbps": 5}]})";
  const Topology plain = parse_topology(base, "'t'");
  EXPECT_FALSE(plain.elementwise_gbps);
  EXPECT_EQ(plain.effective_elementwise_gbps(), kDefaultElementwiseGbps);
  EXPECT_EQ(plain.elementwise_source(), RateSource::kDefault);
  EXPECT_FALSE(to_json(plain)["device"].contains("elementwise_gbps"));
  EXPECT_EQ(parse_topology(to_json(plain).dump(), "back"), plain);

  Topology t = plain;
  t.elementwise_gbps = 1500;
  EXPECT_EQ(t.effective_elementwise_gbps(), 1500);
  EXPECT_EQ(t.elementwise_source(), RateSource::kNominal);
  t.calibration.elementwise_gbps = 7.5;
  EXPECT_EQ(t.effective_elementwise_gbps(), 7.5);
  EXPECT_EQ(t.elementwise_source(), RateSource::kCalibrated);
  const nlohmann::json j = to_json(t);
  EXPECT_EQ(j["device"]["elementwise_gbps"], 1500);
  EXPECT_EQ(j["calibration"]["elementwise_gbps"], 7.5);
  EXPECT_EQ(parse_topology(j.dump(2), "back"), t);

  // A calibration holding only the elementwise rate is not empty.
  Topology only = plain;
  only.calibration.elementwise_gbps = 3;
  EXPECT_EQ(parse_topology(to_json(only).dump(), "back").calibration.elementwise_gbps, 3);

  for (const char* bad : {"0", "-2"}) {
    const std::string device = std::string(R"({"name": "t", "device": {"memory_gib": 80,
        "tflops": 100, "elementwise_gbps": )") +
                               bad + R"(}, "levels": [{"members": 4,
        "group_gbps": 5}]})";
    EXPECT_NE(error_of([&] {
                parse_topology(device, "'t'");
              }).find(std::string("elementwise_gbps=") + bad + " must be positive"),
              std::string::npos)
        << bad;
    const std::string calibrated = std::string(R"({"name": "t", "device": {"memory_gib": 80,
        "tflops": 100}, "levels": [{"members": 4, "group_gbps": 5}],
        "calibration": {"elementwise_gbps": )") +
                                   bad + "}}";
    EXPECT_NE(error_of([&] {
                parse_topology(calibrated, "'t'");
              }).find(std::string("calibration elementwise_gbps=") + bad + " must be positive"),
              std::string::npos)
        << bad;
  }
}

TEST(ElementwiseTopology, PresetsCarryNominalRates) {
  EXPECT_EQ(load_topology("nvswitch-8xa100").effective_elementwise_gbps(), 1600);
  EXPECT_EQ(load_topology("tpuv4-torus-16x16").effective_elementwise_gbps(), 1200);
  EXPECT_EQ(load_topology("nvlink-network-8").elementwise_source(), RateSource::kNominal);
}

}  // namespace
}  // namespace meshtp::plan
