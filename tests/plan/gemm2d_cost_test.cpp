// Per-algorithm 2D GeMM cost: traffic (steps, bytes) and the pipelined time, checked against
// numbers worked out by hand from the formulas in gemm2d_cost.hpp.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.hpp"
#include "plan/gemm2d_cost.hpp"
#include "plan/mesh_links.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

// A mesh whose links we choose: vertical (dim 0) 10 GB/s, L_sync 2 µs; horizontal (dim 1)
// 20 GB/s, L_sync 1 µs; T_launch 10 µs on both. Reduce-scatter = all-gather parameters.
MeshLinks links(int nr, int nc) {
  MeshLinks l;
  l.mesh = {nr, nc};
  const RingParams v{.t_launch_s = 10e-6, .l_sync_s = 2e-6, .bw_bytes_per_s = 10e9};
  const RingParams h{.t_launch_s = 10e-6, .l_sync_s = 1e-6, .bw_bytes_per_s = 20e9};
  l.dims[0].size = nr;
  l.dims[0].all_gather = l.dims[0].reduce_scatter = l.dims[0].all_reduce = v;
  l.dims[1].size = nc;
  l.dims[1].all_gather = l.dims[1].reduce_scatter = l.dims[1].all_reduce = h;
  // Cannon's skew as a ring prices it: ⌊P/2⌋ hops in sequence.
  for (DimLinks& d : l.dims) {
    const double hops = d.size / 2;
    const RingParams& r = d.all_gather;
    d.skew = {.t_launch_s = r.t_launch_s, .l_sync_s = hops * r.l_sync_s,
              .bw_bytes_per_s = r.bw_bytes_per_s / std::max(hops, 1.0)};
    // Wang's two-way step: both directions of each ring link at the one-way bandwidth.
    d.two_way = r;
  }
  return l;
}

constexpr double kFlops = 1e12;
constexpr double kTol = 1e-12;  // seconds; the formulas are a handful of flops each

Gemm2dShape shape(Dataflow d, std::int64_t m, std::int64_t n, std::int64_t k, int nr, int nc) {
  return Gemm2dShape{.dataflow = d, .m = m, .n = n, .k = k, .nr = nr, .nc = nc,
                     .element_bytes = 4};
}

// The runtime's step overhead h sits on every local GeMM call: compute grows by calls·h, and
// MeshSlice's many small steps pay it S times where Collective pays it once.
TEST(Gemm2dCost, StepOverheadIsChargedOncePerLocalGemmCall) {
  const double h = 50e-6;
  for (const Dataflow d : {Dataflow::kOS, Dataflow::kLS, Dataflow::kRS}) {
    const Gemm2dShape s = shape(d, 1024, 1024, 1024, 2, 2);
    for (const Algorithm a : {Algorithm::kCollective, Algorithm::kMeshSlice, Algorithm::kSumma,
                              Algorithm::kWang, Algorithm::kCannon}) {
      const Gemm2dParams p{.slices = 4};
      const PipelineEstimate without = gemm2d_estimate(a, s, p, links(2, 2), kFlops);
      const PipelineEstimate with = gemm2d_estimate(a, s, p, links(2, 2), kFlops, h);
      const double calls = static_cast<double>(gemm2d_traffic(a, s, p).gemm_calls);
      EXPECT_NEAR(with.compute_s - without.compute_s, calls * h, kTol) << name(a);
      EXPECT_EQ(with.comm_s, without.comm_s) << name(a);
      EXPECT_GT(with.total_s, without.total_s) << name(a);
    }
  }
  // Compute-bound MeshSlice OS (steady = gemm/S): the total grows by exactly S·h.
  const Gemm2dShape os = shape(Dataflow::kOS, 1024, 1024, 1024, 2, 2);
  for (const int slices : {1, 4, 16}) {
    const auto t = [&](double overhead) {
      return gemm2d_estimate(Algorithm::kMeshSlice, os, {.slices = slices}, links(2, 2), kFlops,
                             overhead)
          .total_s;
    };
    EXPECT_NEAR(t(h) - t(0), slices * h, kTol) << slices;
  }
}

// Dims that share links (a measured MeshLinks::dim_sharing): where both dims' collectives run
// at once the step pays max + sharing·min. MeshSlice OS, communication-bound (a slow GeMM
// rate), 1024³ on 2×2, S = 4: the steady step is c_v + c_h at sharing 1, c_v + c_h/2 at 0.5.
TEST(Gemm2dCost, SharedLinksSlowConcurrentDims) {
  const Gemm2dShape s = shape(Dataflow::kOS, 1024, 1024, 1024, 2, 2);
  const double v4 = 10e-6 + (2e-6 + 1048576.0 / 4 / 10e9),
               h4 = 10e-6 + (1e-6 + 1048576.0 / 4 / 20e9);
  MeshLinks l = links(2, 2);
  const GemmModel fast(1e15);  // g ≪ c: communication-bound
  const auto steady = [&](double sharing) {
    l.dim_sharing = sharing;
    return gemm2d_estimate(Algorithm::kMeshSlice, s, {.slices = 4}, l, fast).steady_s;
  };
  EXPECT_NEAR(steady(0), std::max(v4, h4), kTol);
  EXPECT_NEAR(steady(1), v4 + h4, kTol);
  EXPECT_NEAR(steady(0.5), std::max(v4, h4) + 0.5 * std::min(v4, h4), kTol);
  l.dim_sharing = 1;
  EXPECT_NEAR(gemm2d_estimate(Algorithm::kMeshSlice, s, {.slices = 4}, l, fast).prologue_s, v4 + h4,
              kTol);
  // LS: the gather and the reduce-scatter of a step are on different dims, at once too.
  const Gemm2dShape ls = shape(Dataflow::kLS, 1024, 1024, 1024, 2, 2);
  l.dim_sharing = 0;
  const double apart = gemm2d_estimate(Algorithm::kMeshSlice, ls, {.slices = 4}, l, fast).steady_s;
  l.dim_sharing = 1;
  EXPECT_GT(gemm2d_estimate(Algorithm::kMeshSlice, ls, {.slices = 4}, l, fast).steady_s,
            apart * 1.2);
}

TEST(Gemm2dCost, CollectiveAndMeshSliceOsByHand) {
  // OS, m = n = k = 1024 on 2×2, fp32: shard(A) = shard(B) = 1024²/4·4 B = 1 MiB.
  const Gemm2dShape s = shape(Dataflow::kOS, 1024, 1024, 1024, 2, 2);
  const double shard = 1048576;
  EXPECT_EQ(s.shard_bytes(Direction::kVertical), shard);
  EXPECT_EQ(s.shard_bytes(Direction::kHorizontal), shard);
  const double gemm = 2.0 * 1024 * 1024 * 1024 / 4 / kFlops;
  const double ag_v = 10e-6 + 1 * (2e-6 + shard / 10e9);  // B along mesh columns
  const double ag_h = 10e-6 + 1 * (1e-6 + shard / 20e9);  // A along mesh rows
  const PipelineEstimate c = gemm2d_estimate(Algorithm::kCollective, s, {}, links(2, 2), kFlops);
  EXPECT_NEAR(c.total_s, std::max(ag_v, ag_h) + gemm, kTol);
  EXPECT_NEAR(c.comm_s, ag_v + ag_h, kTol);
  EXPECT_NEAR(c.compute_s, gemm, kTol);

  // MeshSlice S = 4: prologue max(AG/4) + 3 steady max(AG/4, gemm/4) + epilogue gemm/4.
  const double v4 = 10e-6 + (2e-6 + shard / 4 / 10e9), h4 = 10e-6 + (1e-6 + shard / 4 / 20e9);
  const PipelineEstimate m =
      gemm2d_estimate(Algorithm::kMeshSlice, s, {.slices = 4}, links(2, 2), kFlops);
  EXPECT_NEAR(m.prologue_s, std::max(v4, h4), kTol);
  EXPECT_NEAR(m.steady_s, gemm / 4, kTol);  // compute-bound here: 134 µs vs 38 µs
  EXPECT_NEAR(m.epilogue_s, gemm / 4, kTol);
  EXPECT_EQ(m.iterations, 4);
  EXPECT_NEAR(m.total_s, std::max(v4, h4) + 3 * gemm / 4 + gemm / 4, kTol);
  EXPECT_NEAR(m.comm_s, 4 * (v4 + h4), kTol);
  EXPECT_LT(m.total_s, c.total_s);
}

TEST(Gemm2dCost, LeftStationaryIsThreeStages) {
  // LS on 4×2: B (n×k) all-gathered vertically (P = 4), C reduce-scattered horizontally
  // (P = 2). m = 4096, n = 2048, k = 1024.
  const Gemm2dShape s = shape(Dataflow::kLS, 4096, 2048, 1024, 4, 2);
  const double shard_b = 2048.0 * 1024 / 8 * 4, shard_c = 4096.0 * 2048 / 8 * 4;
  EXPECT_EQ(s.shard_bytes(Direction::kVertical), shard_b);
  EXPECT_EQ(s.shard_bytes(Direction::kHorizontal), shard_c);
  const double gemm = 2.0 * 4096 * 2048 * 1024 / 8 / kFlops;
  const double ag = 10e-6 + 3 * (2e-6 + shard_b / 10e9);
  const double rs = 10e-6 + 1 * (1e-6 + shard_c / 20e9);
  const PipelineEstimate c = gemm2d_estimate(Algorithm::kCollective, s, {}, links(4, 2), kFlops);
  EXPECT_NEAR(c.total_s, ag + gemm + rs, kTol);
  const Gemm2dTraffic t = gemm2d_traffic(Algorithm::kCollective, s, {});
  EXPECT_EQ(t.vertical.kind, CollectiveKind::kAllGather);
  EXPECT_EQ(t.vertical.matrix, 'B');
  EXPECT_EQ(t.vertical.steps, 3);
  EXPECT_EQ(t.vertical.bytes_per_rank, 3 * shard_b);
  EXPECT_EQ(t.horizontal.kind, CollectiveKind::kReduceScatter);
  EXPECT_EQ(t.horizontal.matrix, 'C');
  EXPECT_EQ(t.horizontal.bytes_per_rank, shard_c);
}

TEST(Gemm2dCost, MeshSliceWithOneSliceIsCollective) {
  for (const Dataflow d : {Dataflow::kOS, Dataflow::kLS, Dataflow::kRS}) {
    for (const auto& [nr, nc] : {std::pair{2, 4}, {4, 2}, {8, 1}, {1, 8}, {4, 4}}) {
      const Gemm2dShape s = shape(d, 2048, 1024, 512, nr, nc);
      const MeshLinks l = links(nr, nc);
      const auto a = gemm2d_estimate(Algorithm::kCollective, s, {}, l, kFlops);
      const auto b = gemm2d_estimate(Algorithm::kMeshSlice, s, {.slices = 1}, l, kFlops);
      EXPECT_NEAR(a.total_s, b.total_s, kTol) << name(d) << " " << nr << "x" << nc;
      EXPECT_NEAR(a.comm_s, b.comm_s, kTol);
    }
  }
}

TEST(Gemm2dCost, EveryAlgorithmMovesTheSameBytes) {
  // Bytes on the wire per rank and direction: (P−1)·shard for Collective, MeshSlice, Wang
  // and SUMMA (MeshSlice §2.3.1: only the synchronisation differs); Cannon adds its skew.
  const Gemm2dShape s = shape(Dataflow::kRS, 1024, 2048, 4096, 4, 4);
  const Gemm2dParams p{.slices = 8, .summa_packets = 2};  // SUMMA: Kp = lcm(4, 4)·8 = 32
  for (const Direction d : {Direction::kVertical, Direction::kHorizontal}) {
    const double expected = 3 * s.shard_bytes(d);
    auto bytes = [&](Algorithm a) {
      const Gemm2dTraffic t = gemm2d_traffic(a, s, p);
      return d == Direction::kVertical ? t.vertical.bytes_per_rank : t.horizontal.bytes_per_rank;
    };
    EXPECT_DOUBLE_EQ(bytes(Algorithm::kCollective), expected);
    EXPECT_DOUBLE_EQ(bytes(Algorithm::kMeshSlice), expected);
    EXPECT_DOUBLE_EQ(bytes(Algorithm::kWang), expected);
    EXPECT_DOUBLE_EQ(bytes(Algorithm::kSumma), expected);
    EXPECT_DOUBLE_EQ(bytes(Algorithm::kCannon), expected + s.shard_bytes(d));
  }
  // Steps and launches: S partial collectives of P−1 steps; Kp broadcasts of D+P−1 steps.
  const Gemm2dTraffic ms = gemm2d_traffic(Algorithm::kMeshSlice, s, p);
  EXPECT_EQ(ms.vertical.launches, 8);
  EXPECT_EQ(ms.vertical.steps, 8 * 3);
  EXPECT_EQ(ms.gemm_calls, 8);
  const Gemm2dTraffic su = gemm2d_traffic(Algorithm::kSumma, s, p);
  EXPECT_EQ(su.horizontal.kind, CollectiveKind::kBroadcast);  // RS: A is an input
  EXPECT_EQ(su.vertical.kind, CollectiveKind::kReduce);       // RS: C is the output
  EXPECT_EQ(su.vertical.steps, 32 * 3);                       // Kp·(P−1) pipeline-fill steps
  EXPECT_EQ(su.vertical.launches, 32);
  EXPECT_EQ(su.gemm_calls, 32);
  const Gemm2dTraffic w = gemm2d_traffic(Algorithm::kWang, s, p);
  EXPECT_EQ(w.horizontal.kind, CollectiveKind::kSendRecv);  // decomposed (default)
  EXPECT_EQ(w.horizontal.launches, 6);  // 3 steps, half a shard to each neighbour
  EXPECT_EQ(w.horizontal.steps, 3);
  EXPECT_EQ(w.gemm_calls, 8);  // two halves per step
  EXPECT_EQ(w.vertical.kind, CollectiveKind::kReduceScatter);
  EXPECT_EQ(w.vertical.launches, 1);
}

TEST(Gemm2dCost, WangAndCannonByHand) {
  const Gemm2dShape s = shape(Dataflow::kOS, 1024, 1024, 1024, 2, 2);
  const double shard = 1048576, gemm = 2.0 * 1024 * 1024 * 1024 / 4 / kFlops;
  // Wang, horizontal (A) decomposed: blocking vertical all-gather of B, then 2 iterations of
  // gemm/2, each overlapping one two-way step T_launch + L_sync + (shard/2)/BW_two_way.
  const double ag_v = 10e-6 + (2e-6 + shard / 10e9);
  MeshLinks wl = links(2, 2);
  const double send_h = 10e-6 + 1e-6 + shard / 2 / 20e9;
  const auto w = gemm2d_estimate(Algorithm::kWang, s, {}, wl, kFlops);
  EXPECT_NEAR(w.total_s, ag_v + std::max(send_h, gemm / 2) + gemm / 2, kTol);
  EXPECT_EQ(w.iterations, 2);
  // Where the two directions share the links (half the bandwidth each), a step takes what a
  // whole block one way would.
  wl.dims[1].two_way.bw_bytes_per_s = 10e9;
  const double send_shared = 10e-6 + 1e-6 + shard / 20e9;
  EXPECT_NEAR(gemm2d_estimate(Algorithm::kWang, s, {}, wl, kFlops).comm_s,
              ag_v + send_shared, kTol);
  // Cannon 2×2: the skews of A along the rows and of B along the columns at once (each a
  // launch and ⌊2/2⌋ = 1 hop), then 2 iterations of gemm/2 with one shift per direction.
  const double sv = 2e-6 + shard / 10e9, sh = 1e-6 + shard / 20e9;
  const auto c = gemm2d_estimate(Algorithm::kCannon, s, {}, links(2, 2), kFlops);
  EXPECT_NEAR(c.prologue_s, 10e-6 + std::max(sh, sv), kTol);
  EXPECT_NEAR(c.total_s, c.prologue_s + std::max({sv, sh, gemm / 2}) + gemm / 2, kTol);
  // 4×4: the farthest rotation is ⌊4/2⌋ = 2 hops, and a priced skew replaces it.
  const Gemm2dShape s4 = shape(Dataflow::kOS, 1024, 1024, 1024, 4, 4);
  const double shard4 = shard / 4;
  MeshLinks l4 = links(4, 4);
  EXPECT_NEAR(gemm2d_estimate(Algorithm::kCannon, s4, {}, l4, kFlops).prologue_s,
              10e-6 + 2 * (2e-6 + shard4 / 10e9), kTol);  // the slower, vertical
  l4.dims[0].skew = {.t_launch_s = 10e-6, .l_sync_s = 3e-6, .bw_bytes_per_s = 40e9};
  EXPECT_NEAR(gemm2d_estimate(Algorithm::kCannon, s4, {}, l4, kFlops).prologue_s,
              10e-6 + 2 * (1e-6 + shard4 / 20e9), kTol);  // now the horizontal
}

TEST(Gemm2dCost, SummaPacketsMinimiseThePanelTime) {
  const RingParams r{.t_launch_s = 5e-6, .l_sync_s = 1e-6, .bw_bytes_per_s = 1e9};
  const double panel = 4e6;
  const int best = summa_best_packets(r, 8, panel);
  // D* = sqrt((P−2)·x/(BW·L)) = sqrt(6·4e6/(1e9·1e-6)) = 154.9
  EXPECT_TRUE(best == 154 || best == 155) << best;
  for (const int d : {1, 10, 100, 500}) {
    EXPECT_LE(summa_panel_time(r, 8, panel, best), summa_panel_time(r, 8, panel, d));
  }
  // A chain of 8 in 10 packets: 9 stages at the root, 7 hops for the last packet.
  EXPECT_NEAR(summa_panel_time(r, 8, panel, 10), 5e-6 + 16 * (1e-6 + 4e5 / 1e9), 1e-15);
}

TEST(Gemm2dCost, SummaPanelsAreTheLibrarysSegments) {
  // Open MPI's pipelined broadcast (SMPI's ompi_pipeline, what the simulator runs): 16 MiB
  // over 4 ranks is 128 segments of 128 KiB, (128 + 4 − 2) stages — nvlink-network-16 4x4's
  // row: 10 + 130 · (3 + 0.146) µs = 419 µs (simulated: 409 µs + the 10 µs launch).
  const double mib16 = 16.0 * 1048576;
  EXPECT_EQ(library_segment_bytes(CollectiveKind::kBroadcast, 4, mib16), 131072);
  EXPECT_EQ(library_segment_bytes(CollectiveKind::kBroadcast, 8, 1e6), 32768);
  EXPECT_EQ(library_segment_bytes(CollectiveKind::kBroadcast, 4, 4096), 4096);  // one segment
  EXPECT_EQ(library_segment_bytes(CollectiveKind::kReduce, 4, mib16), 65536);
  EXPECT_EQ(library_segment_bytes(CollectiveKind::kReduce, 64, 1e6), 1024);
  EXPECT_THROW(library_segment_bytes(CollectiveKind::kAllGather, 4, mib16), Error);
  const RingParams r{.t_launch_s = 10e-6, .l_sync_s = 3e-6, .bw_bytes_per_s = 900e9};
  EXPECT_NEAR(summa_panel_time(r, 4, mib16, 0), 10e-6 + 130 * (3e-6 + 131072 / 900e9), 1e-12);
  // A last segment shorter than the others crosses the P − 1 hops at its own size.
  const double odd = 131072 * 10 + 1000;  // 128 KiB segments (P = 4 < 1.6134e-6·odd + 2.11)
  EXPECT_NEAR(summa_panel_time(r, 4, odd, 0),
              10e-6 + 10 * (3e-6 + 131072 / 900e9) + 3 * (3e-6 + 1000 / 900e9), 1e-12);
  EXPECT_EQ(summa_panel_time(r, 1, mib16, 0), 0);
}

TEST(Gemm2dCost, SummaPanelsBackToBackOverlapTheChainsFill) {
  // 36 MiB panels over a chain of 32: 288 segments of 128 KiB (the whole chain's choice, not
  // a two-rank chain's); alone 287 + 31 stages, back to back 287 + 1.
  const RingParams r{.t_launch_s = 10e-6, .l_sync_s = 3e-6, .bw_bytes_per_s = 900e9};
  const double panel = 36.0 * 1048576, stage = 3e-6 + 131072 / 900e9;
  EXPECT_NEAR(summa_panel_time(r, 32, panel, 0), 10e-6 + 318 * stage, 1e-12);
  EXPECT_NEAR(summa_panel_interval(r, 32, panel, 0), 10e-6 + 288 * stage, 1e-12);
  // 9 MiB over 32 is cut in 32 KiB segments (P = 32 ≥ 1.6134e-6·bytes + 2.11): the interval
  // keeps them.
  const double small = 9.0 * 1048576;
  EXPECT_NEAR(summa_panel_interval(r, 32, small, 0), 10e-6 + 288 * (3e-6 + 32768 / 900e9),
              1e-12);
  // SUMMA OS on 32x2, communication-bound: prologue one whole broadcast, then the intervals.
  const Gemm2dShape s = shape(Dataflow::kOS, 65536, 49152, 12288, 32, 2);
  MeshLinks l = links(32, 2);
  for (DimLinks& d : l.dims) d.all_gather = d.reduce_scatter = d.all_reduce = r;
  // Kp = lcm(32, 2)·1 = 32 panels.
  const PipelineEstimate e = gemm2d_estimate(Algorithm::kSumma, s, {.slices = 1}, l, 600e12);
  const DirectionTraffic& col = gemm2d_traffic(Algorithm::kSumma, s, {.slices = 1}).vertical;
  EXPECT_EQ(col.launches, 32);
  EXPECT_NEAR(e.steady_s, summa_panel_interval(r, 32, col.message_bytes, 0), 1e-12);
  EXPECT_NEAR(e.prologue_s, summa_panel_time(r, 32, col.message_bytes, 0), 1e-12);
}

TEST(Gemm2dCost, InvalidShapesAndParamsAreExplained) {
  EXPECT_EQ(*gemm2d_invalid_reason(Algorithm::kCannon, shape(Dataflow::kOS, 64, 64, 64, 2, 4), {}),
            "Cannon's algorithm needs a square mesh, got 2x4 (use summa, collective, wang or "
            "meshslice on rectangular meshes)");
  EXPECT_EQ(*shape(Dataflow::kOS, 1000, 64, 64, 3, 1).invalid_reason(),
            "m=1000 is not divisible by mesh dim 0 (size 3)");
  EXPECT_TRUE(gemm2d_invalid_reason(Algorithm::kMeshSlice, shape(Dataflow::kOS, 64, 64, 64, 2, 2),
                                    {.slices = 3})
                  .has_value());
  // SUMMA's S = 3 on 2x4 is Kp = lcm(2, 4)·3 = 12 panels, which do not divide k = 64.
  EXPECT_EQ(*gemm2d_invalid_reason(Algorithm::kSumma, shape(Dataflow::kOS, 64, 64, 64, 2, 4),
                                   {.slices = 3}),
            "SUMMA slices=3 cuts k=64 into Kp = lcm(Nr, Nc)·S = 4·3 = 12 panels (D=0 packets ≥ "
            "0), which does not divide it (mesh 2x4)");
  EXPECT_FALSE(gemm2d_invalid_reason(Algorithm::kSumma, shape(Dataflow::kOS, 64, 64, 64, 2, 4),
                                     {.slices = 2})
                   .has_value());  // Kp = 8
  EXPECT_THROW(gemm2d_estimate(Algorithm::kCannon, shape(Dataflow::kOS, 64, 64, 64, 2, 4), {},
                               links(2, 4), kFlops),
               Error);
}

// MeshSlice Fig. 14: GPT-3's mlp1 forward (b·s = 128·2048 tokens, h = 12288, fp16) on the 32x8
// mesh of 256 TPUv4 chips has an interior optimum over the slice count K: each slice pays a
// collective's launch and its ring's per-step synchronisation, which the profile takes from
// MeshSlice's own TPUv4 fit (13 µs, 5 µs per step). With the nominal 5 µs / 1 µs the time fell
// monotonically to K = 32.
TEST(Gemm2dCost, MeshSliceSliceCountHasAnInteriorOptimumOnTpuv4) {
  const Topology t = load_topology("tpuv4-torus-16x16");
  const Gemm2dShape s{.dataflow = Dataflow::kOS, .m = 128 * 2048, .n = 4 * 12288, .k = 12288,
                      .nr = 32, .nc = 8, .element_bytes = 2};
  const MeshLinks l = mesh_links(t, s.nr, s.nc);
  std::vector<double> times;
  for (const int k : {1, 2, 4, 8, 16, 32}) {
    times.push_back(gemm2d_estimate(Algorithm::kMeshSlice, s, {.slices = k}, l,
                                    t.effective_tflops() * 1e12)
                        .total_s);
  }
  const auto best = std::min_element(times.begin(), times.end()) - times.begin();
  EXPECT_GT(best, 0);
  EXPECT_LT(best, static_cast<long>(times.size()) - 1);
  EXPECT_GE(times.back(), 1.02 * times[static_cast<std::size_t>(best)]);
}

}  // namespace
}  // namespace meshtp::plan
