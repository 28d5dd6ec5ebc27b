// ATP's cost model: Eq. 2 and the paper's worked numbers (Fig. 12, PCIe 46%, Table 2).
#include <gtest/gtest.h>

#include <cmath>

#include "plan/atp_cost.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

ModelSpec small_model() {
  return parse_model(R"({"name": "test", "layers": 3, "hidden": 1024, "heads": 16, "batch": 4,
                         "seq": 256, "precision": "fp16"})", "small_model()");
}

TEST(AtpCost, Figure12ClosedForm) {
  // ATP §5.4: with B1' = B2' = GroupBW,
  //   T_comm = (2·L·b·s·h / GroupBW) · (14·d2 + 4·d1 − 18) / (d1·d2).
  // Eq. 2 counts elements; our bytes carry e = 2 (fp16) on both sides. Exact up to rounding.
  const ModelSpec m = small_model();
  for (const int n : {4, 8, 16, 64, 256}) {
    const Topology t = nvlink_network_topology(n);
    const double group_bw = t.levels[0].group_gbps * 1e9;
    const double delta = 2.0 * m.layers * m.batch * m.seq * m.hidden * m.element_bytes() /
                         group_bw;
    for (int d1 = 1; d1 <= n; ++d1) {
      if (n % d1 != 0) continue;
      const int d2 = n / d1;
      const MeshLinks l = mesh_links(t, d1, d2);
      const double b1 = d1 > 1 ? *l.dims[0].allreduce_gbps * 1e9 : 0;
      const double b2 = d2 > 1 ? *l.dims[1].allreduce_gbps * 1e9 : 0;
      const double expected = delta * (14.0 * d2 + 4.0 * d1 - 18.0) / (d1 * d2);
      EXPECT_NEAR(atp_comm_time(m, d1, d2, b1, b2), expected, 1e-12 * delta)
          << "N=" << n << " mesh " << d1 << "x" << d2;
    }
  }
}

TEST(AtpCost, Figure12ClosedFormOnTheTorusGraph) {
  // IC6, the 2D torus, as a graph with ring-folded meshes: every mesh gets B1' = B2' = one
  // link (25 GB/s), so Eq. 2 + Eq. 4 reduce to Fig. 12's closed form with GroupBW = 25.
  const ModelSpec m = small_model();
  const Topology t = load_topology("torus-4x4");
  const double delta = 2.0 * m.layers * m.batch * m.seq * m.hidden * m.element_bytes() / 25e9;
  for (const auto& [d1, d2] : {std::pair{16, 1}, {8, 2}, {4, 4}, {2, 8}, {1, 16}}) {
    const MeshLinks l = mesh_links(t, d1, d2);
    const double b1 = d1 > 1 ? *l.dims[0].allreduce_gbps * 1e9 : 0;
    const double b2 = d2 > 1 ? *l.dims[1].allreduce_gbps * 1e9 : 0;
    EXPECT_NEAR(atp_comm_time(m, d1, d2, b1, b2),
                delta * (14.0 * d2 + 4.0 * d1 - 18.0) / (d1 * d2), 1e-12 * delta)
        << d1 << "x" << d2;
  }
}

TEST(AtpCost, Figure12ShapeOfTheCurves) {
  // ATP-1 = mesh (N,1) grows with N; ATP-2 = (N/2,2) and ATP-4 = (N/4,4) shrink.
  auto coeff = [](double d1, double d2) { return (14 * d2 + 4 * d1 - 18) / (d1 * d2); };
  EXPECT_LT(coeff(8, 1), coeff(64, 1));
  EXPECT_GT(coeff(8, 2), coeff(64, 2));
  EXPECT_GT(coeff(8, 4), coeff(64, 4));
  // ATP §5.3: on one fully connected level ATP-1 wins below 8 devices, ATP-2 above.
  EXPECT_LT(coeff(4, 1), coeff(2, 2));
  EXPECT_LT(coeff(8, 2), coeff(16, 1));
}

TEST(AtpCost, PcieMesh2x4Is46PercentCheaperThan8x1) {
  // ATP §5.3: calibrated B1 = 0.97 GB/s on (8,1); B1 = 1.20, B2 = 4.95 GB/s on (2,4);
  // "Using Equation 2, the T_comm of ATP-4 was theoretically 46% lower than that of ATP-1."
  // Eq. 2: 2/0.97 = 2.0619 vs 7/(2·4.95) + 2/(4·1.20) = 1.1237 (per 2Lbsh), 45.5% lower
  // with the rounded bandwidths the paper prints.
  const ModelSpec m = load_model("atp-m4");
  const double t81 = atp_comm_time(m, 8, 1, 0.97e9, 0);
  const double t24 = atp_comm_time(m, 2, 4, 1.20e9, 4.95e9);
  EXPECT_NEAR(1 - t24 / t81, 0.455, 0.001);

  // The same through the preset's calibration and the candidate model's Eq. 2 term.
  const Topology pcie = load_topology("pcie-8xa100");
  const MeshLinks a = mesh_links(pcie, 8, 1), b = mesh_links(pcie, 2, 4);
  const double via81 = atp_comm_time(m, 8, 1, *a.dims[0].allreduce_gbps * 1e9, 0);
  const double via24 = atp_comm_time(m, 2, 4, *b.dims[0].allreduce_gbps * 1e9,
                                     *b.dims[1].allreduce_gbps * 1e9);
  EXPECT_NEAR(via24 / via81, t24 / t81, 1e-12);
}

TEST(AtpCost, EstimatePricesTheBlocksCollectivesAndOverlap) {
  const ModelSpec m = small_model();
  const Topology t = load_topology("nvlink-hdr-4x4");
  const MeshLinks l = mesh_links(t, 8, 2);
  const double flops = t.tflops * 1e12;
  // GeMMs and collectives only: the elementwise term is elementwise_test.cpp's.
  const AtpEstimate e1 = atp_estimate(m, l, 1, flops, ElementwiseEstimate{});
  // Per pass (layout/atp_traffic.hpp), M tokens, e = 2: on dim 1 (P = 2) two LayerNorm
  // statistics all-reduces of 16·M bytes, QKV's reduce-scatter of M·3h/8·e, the projection's
  // all-gather of M·h/8·e, MLP1's all-reduce of M·4h/8·e; on dim 0 (P = 8) two all-reduces
  // of M·h/2·e. Backward transposes them: the same times.
  const double M = 4 * 256, h = 1024, e = 2;
  const RingParams &ar0 = l.dims[0].all_reduce, &ar1 = l.dims[1].all_reduce;
  const double pass = 2 * ring_all_reduce_time(ar1, 2, 16 * M) +
                      ring_collective_time(l.dims[1].reduce_scatter, 2, M * 3 * h / 8 * e / 2) +
                      ring_collective_time(l.dims[1].all_gather, 2, M * h / 8 * e / 2) +
                      ring_all_reduce_time(ar1, 2, M * 4 * h / 8 * e) +
                      2 * ring_all_reduce_time(ar0, 8, M * h / 2 * e);
  EXPECT_NEAR(e1.t_comm_s, m.layers * 2 * pass, 1e-12);
  // Compute: layer FLOPs (ATP §5, Table 2) over N ranks.
  EXPECT_NEAR(e1.t_compute_s, m.model_flops() / 16 / flops, 1e-12);
  // c = 1: forward serial; backward hides each linear's collectives under its own dW GeMM
  // only, so less than all of them under all the dW GeMMs.
  EXPECT_NEAR(e1.forward_s, e1.compute_fwd_s + e1.comm_fwd_s, 1e-15);
  EXPECT_GT(e1.backward_s, e1.compute_bwd_s / 2 + std::max(e1.compute_bwd_s / 2,
                                                           e1.comm_bwd_s));
  EXPECT_LT(e1.backward_s, e1.compute_bwd_s + e1.comm_bwd_s);
  // Chunks overlap the forward (on a model big enough that bandwidth, not latency, rules).
  const ModelSpec big = load_model("atp-m4");
  const AtpEstimate b1 = atp_estimate(big, l, 1, flops, ElementwiseEstimate{});
  const AtpEstimate e4 = atp_estimate(big, l, 4, flops, ElementwiseEstimate{});
  EXPECT_LT(e4.forward_s, b1.forward_s);
  EXPECT_GE(e4.forward_s, e4.compute_fwd_s);
}

TEST(AtpCost, ChunksPipelineTheTwoMeshDims) {
  // With c chunks, chunk i's all-reduce on one mesh dim runs while chunk i+1's runs on the
  // other (and under compute): the device, dim 0's and dim 1's engines work at once. On a
  // communication-bound mesh whose dims both carry traffic, 4 chunks cost less than the
  // pass's whole communication — what the simulation measures (ATP IC1,
  // docs/simulation.md), and what max(C_f, X_f) could never price. (The exact schedule is
  // ChunkStagesWaitForTheSameChunkOfThePreviousStage's and
  // ChunkedBackwardWaitsForEachLinearsAllReduce's.)
  const ModelSpec m = load_model("atp-m1");
  const Topology t = load_topology("nvlink-hdr-4x4");
  const MeshLinks l = mesh_links(t, 8, 2);
  const double flops = t.tflops * 1e12;
  for (const int c : {1, 2, 4}) {
    const AtpEstimate e = atp_estimate(m, l, c, flops, ElementwiseEstimate{});
    double x[2][2] = {{0, 0}, {0, 0}};  // [backward][dim]: every chunk's calls there
    for (const AtpOp& op : e.ops) {
      for (const layout::AtpCall& call : op.calls) {
        x[op.backward][call.mesh_dim] +=
            call.launches * collective_time(l.dims[static_cast<std::size_t>(call.mesh_dim)],
                                            call.kind, call.message_bytes);
      }
    }
    const double xf = x[0][0] + x[0][1], xb = x[1][0] + x[1][1];
    EXPECT_NEAR(e.comm_fwd_s, xf, 1e-14) << c;
    EXPECT_NEAR(e.comm_bwd_s, xb, 1e-14) << c;
    const double cf = e.compute_fwd_s, gb = e.compute_bwd_s;  // no elementwise term here
    // Never faster than the busiest resource, never slower than everything in sequence.
    EXPECT_GE(e.forward_s, std::max({cf, x[0][0], x[0][1]}) - 1e-15) << c;
    EXPECT_LE(e.forward_s, cf + xf + 1e-15) << c;
    EXPECT_GE(e.backward_s, std::max({gb, x[1][0], x[1][1]}) - 1e-15) << c;
    EXPECT_LE(e.backward_s, gb + xb + 1e-15) << c;
    if (c == 4) {
      ASSERT_GT(xf, 2 * cf) << "the case must be communication-bound";
      EXPECT_LT(e.forward_s, xf);
      EXPECT_LT(e.backward_s, gb / 2 + xb);
    }
  }
}

TEST(AtpCost, ChunkStagesWaitForTheSameChunkOfThePreviousStage) {
  // Two chunks, three stages (ms), like the backward's mlp2 → mlp1 → ln2:
  //   1: dX 1 per chunk, then its collective 3 per chunk on dim 1; dW 1 after the loop
  //   2: dX 1 per chunk once stage 1's collective of that chunk is done, 3 on dim 0; dW 1
  //   3: 1 per chunk once stage 2's collective of that chunk is done
  //   stage 1: dX(0) 0–1, X¹(0) 1–4;  dX(1) 1–2, X¹(1) 4–7;  dW 2–3
  //   stage 2: dX(0) 4–5 (X¹(0)), X⁰(0) 5–8;  dX(1) 7–8 (X¹(1)), X⁰(1) 8–11;  dW 8–9
  //   stage 3: 9–10 (X⁰(0) done at 8);  11–12 (X⁰(1))                          T = 12
  // Without the wait (every dX as soon as the device is free) stage 2 would run 3–4, 4–5,
  // its collectives 4–7, 7–10, and T = 10.
  std::vector<ChunkStage> stages = {
      {.compute_s = 1, .mesh_dim = 1, .comm_s = 3, .after_s = 1},
      {.compute_s = 1, .mesh_dim = 0, .comm_s = 3, .after_s = 1},
      {.compute_s = 1},
  };
  EXPECT_DOUBLE_EQ(chunk_stages_time(stages, 2), 12);
  // One engine per mesh dim, in the order started: with stage 2 on dim 1 as well, X¹(0) of
  // stage 2 queues behind X¹(1) of stage 1: 7–10, 10–13; stage 3 runs 10–11, 13–14.
  stages[1].mesh_dim = 1;
  EXPECT_DOUBLE_EQ(chunk_stages_time(stages, 2), 14);
  // A blocking stage (LayerNorm statistics, 0.5 on dim 1) holds the device: back on dim 0,
  // stage 3 runs 9–10, statistics 10–10.5; 11–12, 12–12.5.
  stages[1].mesh_dim = 0;
  stages[2] = {.compute_s = 1, .mesh_dim = 1, .comm_s = 0.5, .blocking = true};
  EXPECT_DOUBLE_EQ(chunk_stages_time(stages, 2), 12.5);
  // One chunk (twice the work per chunk): in sequence, each collective hidden under its own
  // dW only: dX 0–2, X¹ 2–8 (dW 2–3), 8–10, X⁰ 10–16 (dW 10–11), 16–18, statistics 18–19.
  for (ChunkStage& st : stages) {
    st.compute_s *= 2;
    st.comm_s *= 2;
  }
  EXPECT_DOUBLE_EQ(chunk_stages_time(stages, 1), 19);
  // Sharing: back to the first case (T = 12), the dims slow each other where their engines
  // overlap. Stage 2's X⁰(0) starts at 5 while X¹(1) runs to 7: with sharing 1 it takes
  // 3 + 2 = 5 (5–10); X⁰(1) starts at 10 (after dX(1) 7–8 and the engine), the other engine
  // idle: 10–13; stage 3 runs 10–11 (X⁰(0) done at 10), 13–14: T = 14. Sharing 0.5: X⁰(0)
  // 5–9, X⁰(1) 9–12, stage 3 9–10 and 12–13: T = 13. Sharing 0 is the first case.
  stages = {
      {.compute_s = 1, .mesh_dim = 1, .comm_s = 3, .after_s = 1},
      {.compute_s = 1, .mesh_dim = 0, .comm_s = 3, .after_s = 1},
      {.compute_s = 1},
  };
  EXPECT_DOUBLE_EQ(chunk_stages_time(stages, 2, 0), 12);
  EXPECT_DOUBLE_EQ(chunk_stages_time(stages, 2, 1), 14);
  EXPECT_DOUBLE_EQ(chunk_stages_time(stages, 2, 0.5), 13);
}

TEST(AtpCost, HostStagedDimsTakeTurns) {
  // Two comm-only stages, 3 per chunk, dim 0 then dim 1, 2 chunks. Separate engines: X⁰(0)
  // 0–3, X⁰(1) 3–6; X¹(0) 3–6 under X⁰(1), X¹(1) 6–9: T = 9. Sharing 1 (one resource, a
  // host-staged topology): X¹(0) starts at 3 while X⁰(1) runs to 6, so it takes 3 + 3 (3–9),
  // X¹(1) 9–12: T = 12, the four collectives one after the other.
  const std::vector<ChunkStage> stages = {{.mesh_dim = 0, .comm_s = 3},
                                          {.mesh_dim = 1, .comm_s = 3}};
  EXPECT_DOUBLE_EQ(chunk_stages_time(stages, 2, 0), 9);
  EXPECT_DOUBLE_EQ(chunk_stages_time(stages, 2, 1), 12);
  // ATP IC1 (pcie-8xa100, NCCL_P2P_DISABLE=1: both dims through host memory): on mesh (2, 4)
  // the dims share (sharing 1), so chunks can no longer run one dim's collective under the
  // other's: ATP M2's chunk gain, communication-bound, is what compute overlap gives (under
  // 10%), where the same box with separate links per dim gains over 25%.
  const Topology pcie = load_topology("pcie-8xa100");
  ASSERT_TRUE(pcie.host_staged) << "the preset no longer says its traffic is host-staged";
  Topology separate = pcie;
  separate.host_staged = false;
  const MeshLinks shared = mesh_links(pcie, 2, 4), own = mesh_links(separate, 2, 4);
  EXPECT_EQ(shared.dim_sharing, 1);
  EXPECT_EQ(own.dim_sharing, 0);
  EXPECT_EQ(mesh_links(pcie, 8, 1).dim_sharing, 0);  // one dim communicates: nothing shared
  const ModelSpec m = load_model("atp-m2");
  const double flops = pcie.tflops * 1e12;
  const auto gain = [&](const MeshLinks& l) {
    const double t1 = atp_estimate(m, l, 1, flops, ElementwiseEstimate{}).t_step_s;
    const double t4 = atp_estimate(m, l, 4, flops, ElementwiseEstimate{}).t_step_s;
    return t1 / t4 - 1;
  };
  // Without chunks the dims never run at once: the same price either way.
  EXPECT_DOUBLE_EQ(atp_estimate(m, shared, 1, flops, ElementwiseEstimate{}).t_step_s,
                   atp_estimate(m, own, 1, flops, ElementwiseEstimate{}).t_step_s);
  EXPECT_GT(gain(own), 0.25);
  EXPECT_LT(gain(shared), 0.10);
  // A measured sharing for the mesh wins over the assumption.
  Topology measured = pcie;
  measured.calibration.meshes.push_back({.mesh = {2, 4}, .sharing = 0.25});
  EXPECT_EQ(mesh_links(measured, 2, 4).dim_sharing, 0.25);
}

TEST(AtpCost, ChunkedBackwardWaitsForEachLinearsAllReduce) {
  // Megatron (8, 1), 2 chunks, GeMMs and collectives only: the backward's calls are mlp1's
  // and qkv's dX all-reduces over dim 0 (x₁, x_q per chunk); g₂, g₁, g_p, g_q are the four
  // linears' dX GeMMs per chunk (each dW GeMM, whole batch, is 2·g), A the attention core's
  // backward. The stages (atp_cost.hpp):
  //   mlp2  dX 0–g₂, g₂–2g₂; dW 2g₂–4g₂                               t = 4g₂
  //   mlp1  dX(0) ends 4g₂+g₁, x₁(0) after it; dX(1) ends 4g₂+2g₁, x₁(1) after both;
  //         dW to 4g₂+4g₁
  //   ln2   waits x₁(0), x₁(1):  t₃ = 4g₂ + g₁ + max(3g₁, max(g₁, x₁) + x₁)
  //   proj  4g_p, attention A, then qkv like mlp1, ln1 waiting its all-reduces:
  //   T_b = t₃ + 4g_p + A + g_q + max(3g_q, max(g_q, x_q) + x_q)
  // On dual-nvlink-8xa100 with ATP M1 (ms): g₂ = g₁ = 0.0687, g_p = 0.0172, g_q = 0.0515,
  // A = 0.1374, x₁ = x_q = 1.3453 (each all-reduce 20× its dX GeMM), so
  //   t₃ = 0.2749 + 0.0687 + 2·1.3453 = 3.0343
  //   T_b = 3.0343 + 0.0687 + 0.1374 + 0.0515 + 2·1.3453 = 5.983
  // — each linear's two all-reduces in a row, hidden only under its own dW GeMM.
  const ModelSpec m = load_model("atp-m1");
  const Topology t = load_topology("dual-nvlink-8xa100");
  const MeshLinks l = mesh_links(t, 8, 1);
  const AtpEstimate e = atp_estimate(m, l, 2, t.tflops * 1e12, ElementwiseEstimate{});
  auto op = [&](const std::string& name) {
    for (const AtpOp& a : e.ops) {
      if (a.backward && a.name == name) return a;
    }
    ADD_FAILURE() << name;
    return AtpOp{};
  };
  const double g2 = op("mlp2").compute_s / 4, g1 = op("mlp1").compute_s / 4;
  const double gp = op("proj").compute_s / 4, gq = op("qkv").compute_s / 4;
  const double a = op("attention").compute_s;
  ASSERT_EQ(op("mlp1").calls.size(), 1u);
  ASSERT_EQ(op("qkv").calls.size(), 1u);
  const double x1 = op("mlp1").comm_s / 2, xq = op("qkv").comm_s / 2;
  const double t3 = 4 * g2 + g1 + std::max(3 * g1, std::max(g1, x1) + x1);
  const double expected = t3 + 4 * gp + a + gq + std::max(3 * gq, std::max(gq, xq) + xq);
  EXPECT_NEAR(e.backward_s, expected, 1e-12 * expected);
  // What the backward cost when one pipeline of both linears' calls hid under all the dX
  // and dW GeMMs (the model before): 5.622, 6% less.
  const double gb = e.compute_bwd_s, xb = e.comm_bwd_s;
  const double one_pipeline = gb / 2 / 2 + std::max(gb / 2 + gb / 4, xb / 2 + xb / 2);
  EXPECT_GT(e.backward_s, one_pipeline * 1.01);
}

TEST(AtpCost, InvalidMeshesNameTheValues) {
  ModelSpec m = small_model();
  m.hidden = 1000;
  m.heads = 8;
  EXPECT_EQ(atp_invalid_reason(m, 2, 3, 1), "hidden=1000 is not divisible by d2=3 (mesh 2x3)");
  m = small_model();
  EXPECT_EQ(atp_invalid_reason(m, 32, 1, 1),
            "heads=16 is not divisible by d1·d2=32 (mesh 32x1): the fully sharded attention "
            "core needs whole heads on every rank");
  EXPECT_EQ(atp_invalid_reason(m, 2, 2, 8),
            "batch=4 is not divisible by chunks=8 (chunks hold whole sequences)");
  EXPECT_FALSE(atp_invalid_reason(m, 4, 4, 4).has_value());
}

// The planner accepts exactly the meshes the runtime's block runs (one check,
// layout::atp_block_invalid_reason): 16 heads on 32 devices have no ATP mesh, although (8, 4)
// splits a dim-0 shard's 2 heads' batch of 4 over d2 = 4 (which the runtime does not do).
TEST(AtpCost, ValidMeshesAreTheRuntimes) {
  const ModelSpec m = small_model();  // 16 heads, batch 4
  for (const auto& [d1, d2] : {std::pair{1, 32}, {2, 16}, {4, 8}, {8, 4}, {16, 2}, {32, 1}}) {
    const auto reason = atp_invalid_reason(m, d1, d2, 1);
    ASSERT_TRUE(reason.has_value()) << d1 << "x" << d2;
    EXPECT_NE(reason->find("heads=16 is not divisible by d1·d2=32"), std::string::npos)
        << *reason;
  }
  for (const auto& [d1, d2] : {std::pair{1, 16}, {2, 8}, {4, 4}, {8, 2}, {16, 1}}) {
    EXPECT_FALSE(atp_invalid_reason(m, d1, d2, 1).has_value()) << d1 << "x" << d2;
  }
}

TEST(ModelSpec, AtpTable2FlopsAndParams) {
  // ATP Table 2, b = 4, s = 2048: TFLOPs per layer in units of 2^40 and billions of
  // parameters per layer (the paper's "billion" here is 2^20·10^3).
  const struct {
    const char* name;
    double tflops;
    double bparams;
  } rows[] = {{"atp-m1", 2.625, 0.048}, {"atp-m2", 9.75, 0.192}, {"atp-m3", 37.5, 0.768},
              {"atp-m4", 83.25, 1.728}};
  for (const auto& r : rows) {
    const ModelSpec m = load_model(r.name);
    EXPECT_NEAR(m.layer_flops() / std::pow(2.0, 40), r.tflops, 1e-9) << r.name;
    const double h = m.hidden;
    EXPECT_NEAR(12 * h * h / (1 << 20) / 1e3, r.bparams, 5e-4) << r.name;
    EXPECT_NEAR(m.layer_params(), 12 * h * h + 13 * h, 0) << r.name;
  }
}

}  // namespace
}  // namespace meshtp::plan
