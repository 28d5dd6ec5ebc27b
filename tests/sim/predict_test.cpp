// The planner's prediction beside a simulation (sim/predict.hpp) prices the platform the
// simulation runs: the topology's graph with its modelled bandwidths, never measured group
// bandwidths the platform cannot hold.
//
// pcie-8xa100 (ATP IC1) carries ATP §5.3's calibrated all-reduce bandwidth B1 = 1.20 GB/s
// for mesh (2, 4)'s dim 0; its levels (the platform) share one 1.6975 GB/s socket link among
// the 4 groups of that dim, 0.42 GB/s each, which the simulation measures (docs/simulation.md:
// 2.8x the calibrated ring time). Priced with the calibration, the prediction was off by that
// factor on every layout with a socket-crossing dim.
#include "sim/predict.hpp"

#include <gtest/gtest.h>

#include "plan/layout_search.hpp"
#include "plan/mesh_links.hpp"
#include "plan/presets.hpp"

namespace meshtp::sim {
namespace {

RunSpec collectives_on(int d1, int d2, double bytes) {
  RunSpec spec;
  spec.what = What::kCollectives;
  spec.model.layout.mesh = {d1, d2};
  spec.sizes = {bytes};
  return spec;
}

TEST(SimulatePredict, PricesTheModelledLinksNotTheCalibratedGroups) {
  const plan::Topology t = plan::load_topology("pcie-8xa100");
  ASSERT_FALSE(t.calibration.groups.empty()) << "the preset no longer carries ATP's calibration";
  const plan::ModelSpec model = plan::load_model("atp-m1");
  const double bytes = 16 << 20;
  const Prediction p = predict(t, model, 8, collectives_on(2, 4, bytes));
  ASSERT_TRUE(p.available);
  // The modelled dim-0 link: 4 groups (0,4) (1,5) (2,6) (3,7) on one 1.6975 GB/s socket link.
  plan::Topology graph_only = t;
  graph_only.calibration.groups.clear();
  const plan::DimLinks modelled = plan::mesh_links(graph_only, 2, 4).dims[0];
  const plan::DimLinks calibrated = plan::mesh_links(t, 2, 4).dims[0];
  EXPECT_NEAR(modelled.all_reduce.bw_bytes_per_s, 1.6975e9 / 4, 1e3);
  EXPECT_NEAR(calibrated.all_reduce.bw_bytes_per_s, 1.2e9, 1e3);
  ASSERT_FALSE(p.collectives.empty());
  const CollectiveTime& ar = p.collectives.front();  // dim 0, all_reduce
  EXPECT_EQ(ar.dim, 0);
  EXPECT_EQ(ar.kind, layout::CollectiveKind::kAllReduce);
  EXPECT_DOUBLE_EQ(ar.seconds, plan::ring_all_reduce_time(modelled.all_reduce, 2, bytes));
}

TEST(SimulatePredict, KeepsTheCalibratedDeviceRates) {
  plan::Topology t = plan::load_topology("nvswitch-8xa100");
  t.calibration.gemm_tflops = 100;  // the platform's host speed is the calibrated rate too
  const plan::Topology simulated = simulated_topology(t);
  EXPECT_DOUBLE_EQ(simulated.effective_tflops(), 100);
  EXPECT_DOUBLE_EQ(simulated.effective_elementwise_gbps(), t.effective_elementwise_gbps());
}

// A pipeline step is priced as `plan --3d --evaluate` prices it with the meshtp runtime: the
// model's vocabulary (its head) and the plan's recomputation, on the simulated topology, in
// the model's precision. Full recomputation must cost more than none.
TEST(SimulatePredict, PipelineIsTheEvaluatedLayoutWithItsRecomputation) {
  const plan::Topology t = plan::load_topology("dgx-a100-8x8");
  const plan::ModelSpec model = plan::load_model("gpt3-175b");
  RunSpec spec;
  spec.what = What::kPipeline;
  spec.element_bytes = 2;
  layout::Plan& p = spec.model.layout;
  p.mesh = {8, 1};
  p.pp = 8;
  p.microbatches = 64;
  p.schedule = layout::Schedule::kInterleaved;
  p.virtual_stages = 3;
  double previous = 0;
  for (const layout::Recompute r : {layout::Recompute::kNone, layout::Recompute::kFull}) {
    p.recompute = r;
    const Prediction predicted = predict(t, model, 64, spec);
    ASSERT_TRUE(predicted.available) << predicted.note;
    plan::ModelSpec priced = model;
    priced.recompute = r;
    const plan::LayoutCandidate c = plan::evaluate_layout(
        {.topology = simulated_topology(t), .model = priced, .devices = 64}, p);
    EXPECT_DOUBLE_EQ(predicted.total_s, c.t_step_s);
    EXPECT_GT(c.t_head_s, 0) << "the head (vocabulary " << model.vocab << ") is priced";
    EXPECT_GT(predicted.total_s, previous);
    previous = predicted.total_s;
  }
}

}  // namespace
}  // namespace meshtp::sim
