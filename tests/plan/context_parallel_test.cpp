// Context parallelism's price (plan/context_parallel.hpp), the plan's cp and uneven-stage
// fields, and `plan --3d --evaluate` with them: a price, checked term by term.
#include <gtest/gtest.h>

#include <string>

#include "error_of.hpp"
#include "layout/plan.hpp"
#include "plan/context_parallel.hpp"
#include "plan/emit.hpp"
#include "plan/layout_search.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

using layout::CpComm;
using test_support::error_of;

// A Llama-shaped microbatch: 1 sequence of 8192 tokens, h 1024, 16 heads (d 64), 4 KV heads.
ModelSpec model() {
  return parse_model(R"({"name": "m", "layers": 4, "hidden": 1024, "heads": 16, "kv_heads": 4,
                         "batch": 1, "seq": 8192, "precision": "bf16"})",
                     "test");
}

const GemmModel kFlat(100e12);  // 100 TFLOP/s, every shape

RingParams link(double gbps) { return {.t_launch_s = 0, .l_sync_s = 0, .bw_bytes_per_s = gbps * 1e9}; }

TEST(ContextParallel, OneRankCostsNothing) {
  const CpPrice p = cp_price(model(), 4, 1, 1, CpComm::kRing, kFlat, link(100));
  EXPECT_EQ(p.compute_s, 0);
  EXPECT_EQ(p.exposed_s, 0);
}

TEST(ContextParallel, RingAddsTheRestOfTheCoreAndHidesFastTransfers) {
  const ModelSpec m = model();
  const int cp = 4, tp = 2;
  const double block_f = attention_seconds(kFlat, 8192.0 / cp, 64, 1 * 16 / tp, 2, false);
  const double block_b = attention_seconds(kFlat, 8192.0 / cp, 64, 1 * 16 / tp, 2, true);
  const CpPrice fast = cp_price(m, 4, tp, cp, CpComm::kRing, kFlat, link(1e6));
  // The stage holds one (s/cp)² block per pair; the ring runs cp: cp − 1 more per layer.
  EXPECT_NEAR(fast.compute_s, 4 * (cp - 1) * (block_f + block_b), 1e-12);
  EXPECT_EQ(fast.exposed_s, 0);
  // One step moves K and V of s/cp tokens for max(1, g/tp) = 2 KV heads: 2·2048·2·64·2 bytes.
  const double bytes = 2.0 * 2048 * 2 * 64 * 2;
  EXPECT_NEAR(fast.step_transfer_s, bytes / 1e15, 1e-18);
  EXPECT_NEAR(fast.hidden_s, 4 * (cp - 1) * 2 * bytes / 1e15, 1e-15);
  // A slow link: each step's transfer outlasts the block, forward and backward.
  const double slow_bw = 1e6;  // 1 MB/s
  const CpPrice slow = cp_price(m, 4, tp, cp, CpComm::kRing, kFlat, link(slow_bw / 1e9));
  const double t = bytes / slow_bw;
  EXPECT_NEAR(slow.exposed_s, 4 * (cp - 1) * ((t - block_f) + (t - block_b)), 1e-9);
}

TEST(ContextParallel, KvHeadsReplicateBelowTensorParallelism) {
  // g = 4 KV heads over tp 8: one per rank (replicated), as Megatron-LM does.
  const CpPrice p = cp_price(model(), 1, 8, 2, CpComm::kRing, kFlat, link(1e6));
  EXPECT_NEAR(p.step_transfer_s, 2.0 * 4096 * 1 * 64 * 2 / 1e15, 1e-18);
}

TEST(ContextParallel, UlyssesPaysItsAllToAllsAndNoRing) {
  const CpPrice p = cp_price(model(), 4, 2, 4, CpComm::kA2a, kFlat, link(10));
  EXPECT_GT(p.exposed_s, 0);
  EXPECT_EQ(p.hidden_s, 0);
  EXPECT_EQ(p.step_transfer_s, 0);
  // Per layer: the core on whole s for a/(tp·cp) heads, less the stage's (s/cp)² block.
  const double whole_f = attention_seconds(kFlat, 8192, 64, 2, 2, false);
  const double block_f = attention_seconds(kFlat, 2048, 64, 8, 2, false);
  const double whole_b = attention_seconds(kFlat, 8192, 64, 2, 2, true);
  const double block_b = attention_seconds(kFlat, 2048, 64, 8, 2, true);
  EXPECT_NEAR(p.compute_s, 4 * (whole_f - block_f + whole_b - block_b), 1e-12);
}

TEST(ContextParallel, AllGatherPaysItsGathersExposedAndTheRanksOwnQueries) {
  // The Llama 3 paper's CP (§3.3.2): K and V gathered before the core, not overlapped; the
  // backward gathers them again and reduce-scatters dK, dV. Unfused, the full products, as
  // the ring's: the rank's s/cp queries against all s keys.
  const ModelSpec m = model();  // recompute none: one forward run
  const int cp = 4, tp = 2;
  const double pairs = 16.0 / tp;
  const auto products = [&](bool backward) {
    return kFlat.seconds(2048, 8192, 64, 2, pairs) +
           (backward ? 3 : 1) * kFlat.seconds(2048, 64, 8192, 2, pairs);
  };
  const double block_f = attention_seconds(kFlat, 8192.0 / cp, 64, pairs, 2, false);
  const double block_b = attention_seconds(kFlat, 8192.0 / cp, 64, pairs, 2, true);
  const CpPrice p = cp_price(m, 4, tp, cp, CpComm::kAllGather, kFlat, link(10));
  EXPECT_NEAR(p.compute_s, 4 * (products(false) - block_f + products(true) - block_b), 1e-12);
  // The flat rate: the same products as the ring's cp blocks.
  EXPECT_NEAR(p.compute_s, cp_price(m, 4, tp, cp, CpComm::kRing, kFlat, link(1e6)).compute_s,
              1e-12);
  // Each rank's share: s/cp tokens of K and V for max(1, g/tp) = 2 KV heads; a ring
  // all-gather moves (cp − 1) shares; forward 1, backward 2 (gather, reduce-scatter).
  const double share = 2048.0 * 2 * 2 * 64 * 2;
  const double gather = (cp - 1) * share / 10e9;
  EXPECT_NEAR(p.step_transfer_s, gather, 1e-15);
  EXPECT_NEAR(p.exposed_s, 4 * 3 * gather, 1e-12);
  EXPECT_EQ(p.hidden_s, 0);
  // Full recomputation gathers once more for the re-run forward.
  ModelSpec full = m;
  full.recompute = Recompute::kFull;
  EXPECT_NEAR(cp_price(full, 4, tp, cp, CpComm::kAllGather, kFlat, link(10)).exposed_s,
              4 * 4 * gather, 1e-12);
  // It needs the zigzag's 2·cp chunks too.
  ModelSpec odd = m;
  odd.seq = 1000;
  EXPECT_EQ(error_of([&] { check_cp(odd, 1, 16, CpComm::kAllGather); }),
            "cp=16: seq=1000 of 'm' does not split into 2·cp=32 chunks (the ring's zigzag)");
}

TEST(ContextParallel, TheFusedCoreCostsTheCausalShareInEveryMode) {
  // Fused (flash_attention_seconds: the tiles the causal mask leaves), every rank's core is
  // about 1/cp of the whole sequence's, the zigzag balancing it: ring, all_gather and a2a
  // alike (tile rounding aside), about half the unfused products.
  ModelSpec m = model();
  m.attention = layout::Attention::kFused;
  const int cp = 4, tp = 2;
  const double pairs = 16.0 / tp;
  const double share =
      (flash_attention_seconds(kFlat, 8192, 64, pairs, false) +
       flash_attention_seconds(kFlat, 8192, 64, pairs, true)) / cp -
      (flash_attention_seconds(kFlat, 2048, 64, pairs, false) +
       flash_attention_seconds(kFlat, 2048, 64, pairs, true));
  for (const CpComm comm : {CpComm::kRing, CpComm::kAllGather, CpComm::kA2a}) {
    const CpPrice p = cp_price(m, 1, tp, cp, comm, kFlat, link(1e6));
    EXPECT_NEAR(p.compute_s / share, 1.0, 0.02) << comm;
  }
  ModelSpec unfused = m;
  unfused.attention = layout::Attention::kUnfused;
  EXPECT_LT(cp_price(m, 1, tp, cp, CpComm::kRing, kFlat, link(1e6)).compute_s,
            0.6 * cp_price(unfused, 1, tp, cp, CpComm::kRing, kFlat, link(1e6)).compute_s);
  // The fused ring's later steps are half blocks: what a transfer hides behind.
  EXPECT_NEAR(cp_price(m, 1, tp, cp, CpComm::kRing, kFlat, link(1e6)).step_compute_s,
              2.0 * 2 * 2048.0 * 2048 * 64 * pairs / 2 / 100e12, 1e-15);
}

TEST(ContextParallel, ABadCombinationIsRefusedNamingTheNumbers) {
  ModelSpec m = model();
  m.seq = 1000;
  EXPECT_EQ(error_of([&] { check_cp(m, 1, 16, CpComm::kRing); }),
            "cp=16: seq=1000 of 'm' does not split into 2·cp=32 chunks (the ring's zigzag)");
  EXPECT_EQ(error_of([&] { check_cp(model(), 8, 4, CpComm::kA2a); }),
            "--cp-comm a2a with cp=4: heads=16 over tp=8 leave 2 per rank, not divisible by cp=4");
  EXPECT_EQ(error_of([&] { check_cp(model(), 16, 4, CpComm::kA2aRing); }),
            "--cp-comm a2a+ring with cp=4: no a2a degree 1 < u < 4 divides both cp and the 1 "
            "heads per TP rank (heads=16, tp=16)");
  EXPECT_EQ(cp_a2a_size(CpComm::kA2aRing, 8, 4), 4);
  EXPECT_EQ(error_of([&] { check_cp(model(), 2, 4, CpComm::kA2aRing); }), "");
}

TEST(PlanFields, CpAndUnevenStagesRoundTripAndTheRuntimeRefusesThem) {
  layout::Plan p{.dp = 2, .pp = 4, .microbatches = 4, .schedule = layout::Schedule::k1F1B};
  p.cp = 4;
  p.cp_comm = CpComm::kA2aRing;
  p.first_stage_layers = 3;
  p.last_stage_layers = 3;
  EXPECT_EQ(p.ranks(), 2 * 4 * 4);
  EXPECT_EQ(layout::plan_from_json(layout::to_json(p), "test"), p);
  EXPECT_EQ(p.stage_layers(14, 0), 3);
  EXPECT_EQ(p.stage_layers(14, 1), 4);
  EXPECT_EQ(p.stage_layers(14, 3), 3);
  EXPECT_EQ(error_of([&] { (void)p.stage_layers(13, 1); }),
            "layers=13 with first_stage_layers=3 and last_stage_layers=3 leave 7 for the other 2 "
            "stages of pp=4: not a positive whole number each");
  EXPECT_NE(error_of([&] { p.require_runtime("plan"); })
                .find("plan: cp=4 (a2a+ring): only `meshtp train` runs context parallelism"),
            std::string::npos);
  p.cp_comm = CpComm::kAllGather;
  EXPECT_NE(error_of([&] { p.require_runtime("plan"); })
                .find("plan: cp_comm=all_gather (the Llama 3 paper's all-gather context "
                      "parallelism): meshtp's runtime exchanges K and V by ring, a2a or "
                      "a2a+ring only"),
            std::string::npos);
  EXPECT_EQ(layout::plan_from_json(layout::to_json(p), "test"), p);
  p.cp_comm = CpComm::kA2aRing;
  p.cp = 1;
  EXPECT_NE(error_of([&] { p.require_runtime("plan"); }).find("first_stage_layers=3"),
            std::string::npos);
  // A plan without them reads and writes as before.
  EXPECT_FALSE(layout::to_json(layout::Plan{}).contains("cp"));
  EXPECT_NE(error_of([] {
              (void)layout::plan_from_json(nlohmann::json{{"cp", 0}}, "'p.json'");
            }).find("cp=0 must be at least 1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              (void)layout::plan_from_json(nlohmann::json{{"cp_comm", "p2p"}}, "'p.json'");
            }).find("unknown cp communication 'p2p' (valid: ring, a2a, a2a+ring, all_gather)"),
            std::string::npos);
}

TEST(LayoutEvaluateCp, CpDividesActivationsAndAddsTheCoresRest) {
  LayoutRequest r{.topology = load_topology("dgx-h100-2x8"), .model = load_model("llama3-8b"),
                  .devices = 16, .runtime = layout::Runtime::kMegatron};
  r.model.batch = 4;
  r.model.seq = 32768;
  // dp 2 × tp 8, microbatches of one sequence; then cp 2 for dp 2: each rank holds half the
  // tokens of a microbatch.
  const layout::Plan dp2{.dp = 2, .microbatches = 2, .recompute = layout::Recompute::kSelective,
                         .mesh = {8, 1}, .strategy = Strategy::kTp1d, .sequence_parallel = true};
  layout::Plan cp2 = dp2;
  cp2.dp = 1;
  cp2.cp = 2;
  cp2.microbatches = 4;
  const LayoutCandidate a = evaluate_layout(r, dp2), c = evaluate_layout(r, cp2);
  EXPECT_EQ(a.t_cp_compute_s, 0);
  EXPECT_GT(c.t_cp_compute_s, 0);
  EXPECT_GT(c.t_cp_exposed_s + c.t_cp_hidden_s, 0);
  EXPECT_LT(c.memory.activations_bytes, 0.75 * a.memory.activations_bytes);
  // The same parameters over dp·cp = 2 ranks: ZeRO-1 shards them alike.
  layout::Plan z = cp2, zd = dp2;
  z.zero = zd.zero = 1;
  EXPECT_DOUBLE_EQ(evaluate_layout(r, z).memory.optimizer_bytes,
                   evaluate_layout(r, zd).memory.optimizer_bytes);
  layout::Plan bad = cp2;
  bad.cp = 3;
  EXPECT_NE(error_of([&] { (void)evaluate_layout(r, bad); }).find("cp=3"), std::string::npos);
}

TEST(EmitCp, UnevenInterleavedStagesRunWhereTheirLayersDivide) {
  layout::Plan p{.dp = 1, .pp = 4, .microbatches = 4,
                 .schedule = layout::Schedule::kInterleaved, .virtual_stages = 2};
  p.first_stage_layers = 3;
  p.last_stage_layers = 3;
  const auto why = inexpressible(Framework::kMegatron, p, Precision::kFp32);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("uneven stages of 3 and 3 layers first and last, interleaved over 2"),
            std::string::npos)
      << *why;
  p.first_stage_layers = p.last_stage_layers = 2;
  EXPECT_FALSE(inexpressible(Framework::kMegatron, p, Precision::kFp32).has_value());
  EXPECT_TRUE(inexpressible(Framework::kTorchtitan, p, Precision::kFp32).has_value());
}

}  // namespace
}  // namespace meshtp::plan
