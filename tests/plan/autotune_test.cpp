// FC layers as 2D GeMMs (dataflow table) and the per-layer autotuner.
#include <gtest/gtest.h>

#include <algorithm>

#include "plan/autotune.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

TEST(Linears, LargestMatrixStaysStationary) {
  ModelSpec m = load_model("gpt3-175b");  // M = 128·2048 = 262144 tokens ≫ h = 12288
  auto layers = fc_layers(m);
  EXPECT_EQ(choose_stationary(layers[0]), Stationary::kOutput);  // qkv: Y is M×3h
  EXPECT_EQ(choose_stationary(layers[1]), Stationary::kOutput);  // proj: X = Y, tie → Y
  EXPECT_EQ(choose_stationary(layers[2]), Stationary::kOutput);  // mlp1: Y is M×4h
  EXPECT_EQ(choose_stationary(layers[3]), Stationary::kInput);   // mlp2: X is M×4h
  m.batch = 1;
  m.seq = 1024;  // M = 1024 ≪ h: the weights are the largest
  layers = fc_layers(m);
  for (const FcShape& fc : layers) EXPECT_EQ(choose_stationary(fc), Stationary::kWeight);
}

TEST(Linears, EachMatrixFlowsOneWayInAllThreePasses) {
  // Same direction, same bytes for a matrix and its gradient in fwd, bwd-data, bwd-weight;
  // every pass does the same FLOPs; every shape is a valid canonical GeMM.
  const FcShape fc{Linear::kMlp1, 512, 256, 1024};
  for (const Stationary st : {Stationary::kOutput, Stationary::kInput, Stationary::kWeight}) {
    const Gemm2dShape f = fc_gemm(fc, st, Pass::kForward, 4, 2, 2);
    for (const Pass p : kPasses) {
      const Gemm2dShape g = fc_gemm(fc, st, p, 4, 2, 2);
      SCOPED_TRACE(std::string(name(st)) + " " + name(p));
      EXPECT_FALSE(g.invalid_reason().has_value());
      EXPECT_DOUBLE_EQ(g.flops_per_rank(), 2.0 * 512 * 256 * 1024 / 8);
      EXPECT_DOUBLE_EQ(g.shard_bytes(Direction::kVertical), f.shard_bytes(Direction::kVertical));
      EXPECT_DOUBLE_EQ(g.shard_bytes(Direction::kHorizontal),
                       f.shard_bytes(Direction::kHorizontal));
    }
  }
  // Y stationary: X (M·K) moves horizontally, W (K·N) vertically.
  const Gemm2dShape y = fc_gemm(fc, Stationary::kOutput, Pass::kForward, 4, 2, 2);
  EXPECT_EQ(y.dataflow, Dataflow::kOS);
  EXPECT_DOUBLE_EQ(y.shard_bytes(Direction::kHorizontal), 512.0 * 256 / 8 * 2);
  EXPECT_DOUBLE_EQ(y.shard_bytes(Direction::kVertical), 256.0 * 1024 / 8 * 2);
  // The dataflows of the table: Y-stn OS/LS/RS, X-stn LS/OS/RS, W-stn LS/RS/OS.
  EXPECT_EQ(fc_gemm(fc, Stationary::kOutput, Pass::kBackwardData, 4, 2, 2).dataflow,
            Dataflow::kLS);
  EXPECT_EQ(fc_gemm(fc, Stationary::kOutput, Pass::kBackwardWeight, 4, 2, 2).dataflow,
            Dataflow::kRS);
  EXPECT_EQ(fc_gemm(fc, Stationary::kInput, Pass::kBackwardData, 4, 2, 2).dataflow,
            Dataflow::kOS);
  EXPECT_EQ(fc_gemm(fc, Stationary::kWeight, Pass::kBackwardWeight, 4, 2, 2).dataflow,
            Dataflow::kOS);
}

TEST(Linears, OneDimensionalTpCollectives) {
  const FcShape qkv{Linear::kQkv, 1024, 256, 768}, proj{Linear::kProj, 1024, 256, 256};
  EXPECT_EQ(tp1d_pass(qkv, Pass::kForward, 4, 2).kind, CollectiveKind::kAllGather);
  EXPECT_EQ(tp1d_pass(qkv, Pass::kBackwardData, 4, 2).kind, CollectiveKind::kReduceScatter);
  EXPECT_EQ(tp1d_pass(qkv, Pass::kBackwardWeight, 4, 2).kind, CollectiveKind::kNone);
  EXPECT_EQ(tp1d_pass(proj, Pass::kForward, 4, 2).kind, CollectiveKind::kReduceScatter);
  EXPECT_EQ(tp1d_pass(proj, Pass::kBackwardData, 4, 2).kind, CollectiveKind::kAllGather);
  EXPECT_EQ(tp1d_pass(proj, Pass::kBackwardWeight, 4, 2).kind, CollectiveKind::kNone);
  // (P−1)·|X|/P·e = 3·1024·256/4·2 bytes.
  EXPECT_DOUBLE_EQ(tp1d_pass(qkv, Pass::kForward, 4, 2).bytes_per_rank, 3.0 * 1024 * 256 / 4 * 2);
}

TEST(Autotune, MeshSlicePicksTheBestSliceCount) {
  const Topology t = load_topology("tpuv4-torus-16x16");
  const ModelSpec m = load_model("gpt3-175b");
  const MeshLinks l = mesh_links(t, 16, 16);
  const double flops = t.tflops * 1e12;
  for (const FcShape& fc : fc_layers(m)) {
    const FcTuning ms = tune_fc(Algorithm::kMeshSlice, fc, l, flops, 2, 1);
    ASSERT_FALSE(ms.invalid_reason) << *ms.invalid_reason;
    ASSERT_GT(ms.sweep.size(), 3u);
    // The chosen S is the argmin of every S tried (exhaustive search) …
    const auto best = std::min_element(ms.sweep.begin(), ms.sweep.end(),
                                       [](auto& a, auto& b) { return a.total_s < b.total_s; });
    EXPECT_EQ(ms.params.slices, best->knob) << name(fc.layer);
    EXPECT_DOUBLE_EQ(ms.total_s, best->total_s);
    // … S = 1 is the Collective algorithm, so MeshSlice is never slower …
    const FcTuning coll = tune_fc(Algorithm::kCollective, fc, l, flops, 2, 1);
    EXPECT_EQ(ms.sweep.front().knob, 1);
    EXPECT_NEAR(ms.sweep.front().total_s, coll.total_s, 1e-12);
    EXPECT_LE(ms.total_s, coll.total_s);
    // … and here overlapping pays: the best S > 1 (MeshSlice Fig. 14 has an interior optimum).
    EXPECT_GT(ms.params.slices, 1) << name(fc.layer);
    // Without overlap (serial_s = comm + compute), S = 1 is Collective's and slicing only
    // adds launches and ring steps: never cheaper, and never cheaper than overlapped.
    EXPECT_NEAR(ms.sweep.front().serial_s, coll.comm_s + coll.compute_s, 1e-12);
    for (std::size_t i = 0; i < ms.sweep.size(); ++i) {
      EXPECT_LE(ms.sweep[i].total_s, ms.sweep[i].serial_s * (1 + 1e-12)) << ms.sweep[i].knob;
      if (i > 0) {
        EXPECT_GT(ms.sweep[i].serial_s, ms.sweep[i - 1].serial_s) << ms.sweep[i].knob;
      }
    }
  }
}

TEST(Autotune, WangDecomposesTheRowDirectionLikeTheRuntime) {
  const Topology t = load_topology("tpuv4-torus-16x16");
  const MeshLinks l = mesh_links(t, 32, 8);
  const FcShape fc{Linear::kMlp1, 262144, 12288, 49152};
  const FcTuning w = tune_fc(Algorithm::kWang, fc, l, t.tflops * 1e12, 2, 1);
  EXPECT_EQ(w.params.wang_decomposed, Direction::kHorizontal);
  // Per pass: the blocking vertical collective, then Nc = 8 overlapped ring steps.
  const PipelineEstimate& f = w.passes[0].estimate;
  EXPECT_EQ(f.iterations, 8);
  EXPECT_NEAR(f.total_s, f.prologue_s + 7 * f.steady_s + f.epilogue_s, 1e-15);
}

TEST(Autotune, FullRecomputationCountsTheForwardTwice) {
  const Topology t = load_topology("nvlink-network-16");
  const MeshLinks l = mesh_links(t, 4, 4);
  const FcShape fc{Linear::kQkv, 8192, 4096, 12288};
  const FcTuning once = tune_fc(Algorithm::kCollective, fc, l, 1e14, 2, 1);
  const FcTuning twice = tune_fc(Algorithm::kCollective, fc, l, 1e14, 2, 2);
  EXPECT_NEAR(twice.total_s - once.total_s, once.passes[0].estimate.total_s, 1e-12);
}

}  // namespace
}  // namespace meshtp::plan
