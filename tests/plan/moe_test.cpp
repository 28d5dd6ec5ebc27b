// Mixture of experts: the model fields (layout/model_shape.hpp) and their counts, the
// planner's expert parallelism (plan/moe.hpp: folding, all-to-all, grouped GeMMs, memory)
// and `plan --3d` searching and evaluating ep and etp.
#include <gtest/gtest.h>

#include <string>

#include "error_of.hpp"
#include "layout/plan.hpp"
#include "plan/emit.hpp"
#include "plan/layout_search.hpp"
#include "plan/memory.hpp"
#include "plan/moe.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

using test_support::error_of;

std::string model_json(const std::string& extra) {
  return R"({"name": "m", "layers": 4, "hidden": 64, "heads": 4, "vocab": 256, "batch": 8,
             "seq": 64)" +
         extra + "}";
}

const std::string kMoe = R"(, "num_experts": 8, "top_k": 2, "moe_ffn_hidden": 128)";

TEST(MoeModel, FieldsReadAndWriteBack) {
  const ModelSpec m = parse_model(model_json(kMoe + R"(, "shared_experts": 1, "moe_every": 2,
      "capacity_factor": 1.25, "router_aux_loss": 0.01, "moe_force_balance": true)"),
                                  "test");
  EXPECT_TRUE(m.moe_force_balance);
  EXPECT_TRUE(m.is_moe());
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.top_k, 2);
  EXPECT_EQ(m.expert_ffn(), 128);
  EXPECT_EQ(m.shared_experts, 1);
  EXPECT_EQ(m.moe_every, 2);
  EXPECT_DOUBLE_EQ(m.capacity_factor, 1.25);
  EXPECT_DOUBLE_EQ(m.router_aux_loss, 0.01);
  // Layers 0 and 2 of 4 are MoE (Megatron-LM's --moe-layer-freq 2).
  EXPECT_TRUE(m.moe_layer(0));
  EXPECT_FALSE(m.moe_layer(1));
  EXPECT_EQ(m.moe_layers(), 2);
  EXPECT_EQ(model_from_json(to_json(m), "round trip"), m);
  // A dense model's JSON has none of the keys.
  const nlohmann::json dense = to_json(parse_model(model_json(""), "test"));
  for (const char* key : {"num_experts", "top_k", "moe_ffn_hidden", "shared_experts",
                          "moe_every", "capacity_factor", "router_aux_loss",
                          "moe_force_balance"}) {
    EXPECT_FALSE(dense.contains(key)) << key;
  }
  // moe_ffn_hidden 0: the model's ffn.
  EXPECT_EQ(parse_model(model_json(R"(, "num_experts": 4, "top_k": 1)"), "t").expert_ffn(), 256);
}

TEST(MoeModel, BadValuesAreRefusedNamingThem) {
  const auto error = [](const std::string& extra) {
    return error_of([&] { (void)parse_model(model_json(extra), "'m.json'"); });
  };
  EXPECT_EQ(error(R"(, "num_experts": 8, "top_k": 9)"),
            "model 'm': top_k=9 must be at most num_experts=8");
  EXPECT_EQ(error(R"(, "num_experts": 8)"), "model 'm': top_k=0 must be at least 1");
  EXPECT_EQ(error(R"(, "num_experts": -2)"), "model 'm': num_experts=-2 must be at least 0");
  EXPECT_EQ(error(R"(, "top_k": 2)"),
            "model 'm': top_k=2 without experts (num_experts=0 is a dense model)");
  EXPECT_EQ(error(kMoe + R"(, "moe_every": 5)"), "model 'm': moe_every=5 must be at most layers=4");
  EXPECT_EQ(error(kMoe + R"(, "moe_every": 0)"), "model 'm': moe_every=0 must be at least 1");
  EXPECT_EQ(error(kMoe + R"(, "capacity_factor": 0.5)"),
            "model 'm': capacity_factor=0.5 must be 0 (dropless) or at least 1");
  EXPECT_EQ(error(kMoe + R"(, "router_aux_loss": -1)"),
            "model 'm': router_aux_loss=-1 must be a non-negative number");
  EXPECT_EQ(error(kMoe + R"(, "shared_experts": -1)"),
            "model 'm': shared_experts=-1 must be at least 0");
  EXPECT_EQ(error(R"(, "moe_force_balance": true)"),
            "model 'm': moe_force_balance=true without experts (num_experts=0)");
  EXPECT_EQ(error(kMoe + R"(, "moe_force_balance": 1)"),
            "model 'm.json': moe_force_balance=1 must be true or false");
  EXPECT_NE(error(R"(, "num_expert": 8)").find("num_expert"), std::string::npos);
  EXPECT_NE(error(kMoe + R"(, "top_k": "two")").find("top_k"), std::string::npos);
}

TEST(MoeModel, CountsFollowTheExperts) {
  const ModelSpec m = parse_model(model_json(kMoe), "test");
  const double h = 64, fe = 128, E = 8, k = 2;
  // GeLU experts: 2·h·f_e weights and f_e + h biases each; the router h·E.
  EXPECT_DOUBLE_EQ(m.expert_weights(), 2 * h * fe);
  EXPECT_DOUBLE_EQ(m.expert_params(), 2 * h * fe + fe + h);
  const double attention = h * 3 * h + h * h + (3 * h + h) + 2 * 2 * h;  // weights, biases, norms
  EXPECT_DOUBLE_EQ(m.moe_layer_params(), attention + E * (2 * h * fe + fe + h) + h * E);
  EXPECT_DOUBLE_EQ(m.total_params(), 4 * m.moe_layer_params() + 256 * h);
  EXPECT_DOUBLE_EQ(m.active_params(), m.total_params() - 4 * (E - k) * m.expert_params());
  // FLOPs: a token runs the attention, k experts and the router.
  const double tokens = 8 * 64;
  EXPECT_DOUBLE_EQ(m.moe_layer_flops(),
                   6 * tokens * (4 * h * h + k * 2 * h * fe + h * E) + 12 * tokens * 64 * h);
  EXPECT_DOUBLE_EQ(m.model_flops(), 4 * m.moe_layer_flops());
  // Every other layer MoE: two dense layers, two MoE.
  const ModelSpec half = parse_model(model_json(kMoe + R"(, "moe_every": 2)"), "test");
  EXPECT_DOUBLE_EQ(half.model_flops(), 2 * half.layer_flops() + 2 * half.moe_layer_flops());
  EXPECT_DOUBLE_EQ(half.total_params(),
                   2 * half.layer_params() + 2 * half.moe_layer_params() + 256 * h);
  // SwiGLU experts: 3·h·f_e.
  const ModelSpec swiglu =
      parse_model(model_json(kMoe + R"(, "activation": "swiglu", "norm": "rmsnorm")"), "test");
  EXPECT_DOUBLE_EQ(swiglu.expert_params(), 3 * h * fe);
}

TEST(MoeModel, PresetsCountTheirSourcesParameters) {
  // Jiang et al. 2024: 46.7B total, 12.9B active; Mixtral 8x22B 141B / 39B; Qwen2-57B-A14B
  // 57B / 14B (Yang et al. 2024, Table 1).
  const ModelSpec a = load_model("mixtral-8x7b");
  EXPECT_NEAR(a.total_params() / 1e9, 46.70, 0.01);
  EXPECT_NEAR(a.active_params() / 1e9, 12.88, 0.01);
  const ModelSpec b = load_model("mixtral-8x22b");
  EXPECT_NEAR(b.total_params() / 1e9, 140.6, 0.1);
  EXPECT_NEAR(b.active_params() / 1e9, 39.15, 0.1);
  const ModelSpec q = load_model("qwen2-57b-a14b");
  EXPECT_NEAR(q.total_params() / 1e9, 57.4, 0.1);
  EXPECT_NEAR(q.active_params() / 1e9, 14.25, 0.1);
  const ModelSpec t = load_model("tiny-moe");
  EXPECT_EQ(t.num_experts, 4);
  EXPECT_EQ(t.top_k, 2);
  // A GPT with experts: the training loop runs it; the runtimes without the layer refuse it.
  EXPECT_EQ(error_of([&] { t.require_gpt("model 'tiny-moe'"); }), "");
  EXPECT_NE(error_of([&] { t.require_dense("model 'tiny-moe'"); }).find("num_experts=4"),
            std::string::npos);
}

TEST(MoePlan, EpAndEtpReadAndWriteBack) {
  layout::Plan p;
  p.dp = 8;
  p.ep = 4;
  p.etp = 1;
  const layout::Plan back = layout::plan_from_json(layout::to_json(p), "test");
  EXPECT_EQ(back.ep, 4);
  EXPECT_EQ(back.etp, 1);
  EXPECT_FALSE(layout::to_json(layout::Plan{}).contains("ep"));
  EXPECT_EQ(layout::Plan{}.expert_tp(), 1);
  p.mesh = {4, 1};
  p.etp = 0;
  EXPECT_EQ(p.expert_tp(), 4);  // etp 0: the attention's tp
  p.ep = 0;
  EXPECT_EQ(error_of([&] { p.validate(); }), "plan: ep=0 must be at least 1");
}

TEST(MoePlan, FoldingRefusesBadCombinationsNamingTheNumbers) {
  const ModelSpec m = parse_model(model_json(kMoe), "test");
  layout::Plan p;
  p.dp = 8;
  p.ep = 3;
  EXPECT_EQ(*moe_invalid_reason(m, p), "num_experts=8 of 'm' do not split over ep=3");
  p.ep = 4;
  EXPECT_FALSE(moe_invalid_reason(m, p));
  EXPECT_EQ(expert_dp(p), 2);
  p.dp = 2;
  p.mesh = {3, 1};
  EXPECT_EQ(*moe_invalid_reason(m, p),
            "moe_ffn_hidden=128 of 'm' does not split over etp=3");
  p.mesh = {1, 1};
  p.dp = 6;
  p.ep = 4;
  p.etp = 1;
  EXPECT_EQ(*moe_invalid_reason(m, p),
            "etp=1 × ep=4 = 4 does not divide a stage's tp=1 × cp=1 × dp=6 = 6 ranks (expert "
            "data parallelism edp = 6/4 is not an integer)");
  const ModelSpec dense = parse_model(model_json(""), "test");
  p.dp = 4;
  EXPECT_EQ(*moe_invalid_reason(dense, p), "ep=4 etp=1: model 'm' has no experts (num_experts=0)");
  EXPECT_NE(error_of([] { check_imbalance(0.5); }).find("--moe-imbalance=0.5 must be at least 1"),
            std::string::npos);
}

RingParams link(double gbps, double latency_s = 0) {
  return {.t_launch_s = 0, .l_sync_s = latency_s, .bw_bytes_per_s = gbps * 1e9};
}

TEST(MoePrice, AllToAllMovesTkhBytesTimesEpMinusOneOverEp) {
  // One link: (ep − 1)/ep of the bytes, (ep − 1) latencies.
  MoeRings one{.ep_inner = link(100, 1e-6), .ep_outer = link(100, 1e-6), .ep_inner_size = 8};
  EXPECT_NEAR(a2a_time(one, 8, 8e9), 7 * 1e-6 + 8e9 * 7 / 8 / 100e9, 1e-12);
  EXPECT_EQ(a2a_time(one, 1, 8e9), 0);
  // Two levels: 4 near peers at 400 GB/s (3 of them others), 4 far ones at 50.
  MoeRings two{.ep_inner = link(400), .ep_outer = link(50), .ep_inner_size = 4};
  EXPECT_NEAR(a2a_time(two, 8, 8e9), 8e9 * 3 / 8 / 400e9 + 8e9 * 4 / 8 / 50e9, 1e-12);
}

TEST(MoePrice, PricesDispatchCombineAndGroupedGemms) {
  ModelSpec mb = parse_model(model_json(kMoe), "test");
  mb.batch = 2;  // one microbatch: 2 × 64 tokens
  layout::Plan p;
  p.dp = 4;
  p.ep = 4;
  p.etp = 1;
  const MoeRings rings{.ep_inner = link(100), .ep_outer = link(100), .ep_inner_size = 4};
  const GemmModel flat(100e12);
  const MoePrice one = moe_price(mb, 3, p, 1.0, flat, 1e12, rings);
  // T = 128 tokens dispatched, k = 2, h = 64, 2 bytes (fp16): dispatch + combine, forward +
  // backward.
  const double bytes = 128.0 * 2 * 64 * 2;
  EXPECT_NEAR(one.a2a_s, 3 * 4 * bytes * 3 / 4 / 100e9, 1e-15);
  EXPECT_EQ(one.etp_comm_s, 0);
  // The flat GeMM model: 6·T·k·(2·h·f_e) + router 6·T·h·E FLOPs per layer, permutation 8·T·k·h·e
  // bytes at the elementwise rate.
  const double flops = 6 * 128.0 * 2 * (2 * 64 * 128) + 6 * 128.0 * 64 * 8;
  EXPECT_NEAR(one.compute_s, 3 * (flops / 100e12 + 8 * 128.0 * 2 * 64 * 2 / 1e12), 1e-12);
  // Imbalance F = 2: the slowest rank's a2a and expert GeMMs double (the router does not).
  const MoePrice skewed = moe_price(mb, 3, p, 2.0, flat, 1e12, rings);
  EXPECT_NEAR(skewed.a2a_s, 2 * one.a2a_s, 1e-15);
  EXPECT_GT(skewed.compute_s, 1.9 * one.compute_s);
  // Full recomputation re-runs the forward: dispatch and combine once more.
  mb.recompute = Recompute::kFull;
  EXPECT_NEAR(moe_price(mb, 3, p, 1.0, flat, 1e12, rings).a2a_s, 1.5 * one.a2a_s, 1e-15);
  // etp 2 on tp 2: the dispatched tokens gathered and the outputs scattered over etp.
  mb.recompute = Recompute::kNone;
  p.mesh = {2, 1};
  p.dp = 4;
  p.etp = 2;
  const MoeRings with_etp{.ep_inner = link(100), .ep_outer = link(100), .ep_inner_size = 4,
                          .etp = link(100)};
  const MoePrice e = moe_price(mb, 1, p, 1.0, flat, 1e12, with_etp);
  const double t_half = 64.0;  // 128 tokens over tp 2
  EXPECT_NEAR(e.etp_comm_s, 2 * 2 * (t_half * 2 * 64 * 2) / 100e9, 1e-15);
}

TEST(MoePrice, GroupedGemmsArePricedByShapeNotAtPeak) {
  // Qwen2-57B-A14B: 64 experts of 2560, top-8 — tiny GeMMs per expert at small microbatches.
  ModelSpec mb = load_model("qwen2-57b-a14b");
  mb.batch = 1;
  layout::Plan p;
  p.dp = 8;
  p.ep = 8;
  p.etp = 1;
  const Topology t = load_topology("dgx-h100-1x8");
  const MoePrice price = moe_price(mb, 1, p, 1.0, t.gemm_model(), 1e15, MoeRings{});
  const double T = 4096, flops = 6 * T * 8 * mb.expert_weights();
  // Slower than the same FLOPs at the tiled model's sustained rate.
  EXPECT_GT(price.compute_s, flops / t.gemm_model().flops_per_s());
}

TEST(MoeMemory, ExpertsSplitOverEpAndActivationsGrowWithTopK) {
  const ModelSpec m = load_model("mixtral-8x7b");
  layout::Plan p;
  p.dp = 8;
  p.pp = 4;
  p.microbatches = 32;
  p.schedule = layout::Schedule::k1F1B;
  p.zero = 1;
  p.ep = 1;
  p.etp = 1;
  const double one = expert_params_per_rank(m, p, 8);
  p.ep = 8;
  const double eight = expert_params_per_rank(m, p, 8);
  EXPECT_DOUBLE_EQ(one, 8 * (8 * m.expert_params() + 4096.0 * 8));
  EXPECT_DOUBLE_EQ(eight, 8 * (m.expert_params() + 4096.0 * 8));
  const MemoryEstimate at8 = peak_rank_memory(m, p, HeadBuffers::kSharded);
  p.ep = 1;
  const MemoryEstimate at1 = peak_rank_memory(m, p, HeadBuffers::kSharded);
  EXPECT_NEAR(at1.params_bytes - at8.params_bytes, 4 * (one - eight), 1e3);  // fp32 masters
  // Kept for the backward: top_k assignments per token.
  ModelSpec k1 = m;
  k1.top_k = 1;
  const MoeFloats f2 = moe_floats(m, p, 1.0), f1 = moe_floats(k1, p, 1.0);
  EXPECT_GT(f2.kept, 1.9 * f1.kept);
  EXPECT_NEAR(f2.buffers, 2 * f1.buffers, 1e-6 * f2.buffers);
  // ZeRO shards the expert optimizer state over edp = 8·1·1/(1·1) = 8.
  p.zero = 0;
  const MemoryEstimate z0 = peak_rank_memory(m, p, HeadBuffers::kSharded);
  p.zero = 1;
  EXPECT_LT(peak_rank_memory(m, p, HeadBuffers::kSharded).optimizer_bytes, z0.optimizer_bytes / 4);
}

TEST(MoeSearch, FindsExpertParallelismForMixtralOnDgxH100) {
  const LayoutRequest r{.topology = load_topology("dgx-h100-2x8"),
                        .model = load_model("mixtral-8x7b"),
                        .devices = 16,
                        .runtime = layout::Runtime::kMegatron};
  const LayoutSearch s = search_layouts(r, 3);
  ASSERT_FALSE(s.ranked.empty());
  const LayoutCandidate& best = s.ranked.front();
  EXPECT_TRUE(best.feasible);
  EXPECT_GT(best.plan.ep, 1);
  EXPECT_GT(best.t_moe_a2a_s, 0);
  // The same layout evaluated is priced the same.
  EXPECT_NEAR(evaluate_layout(r, best.plan).t_step_s, best.t_step_s, 1e-9 * best.t_step_s);
}

TEST(MoeSearch, EvaluateRefusesWhatCannotRun) {
  LayoutRequest r{.topology = load_topology("dgx-h100-1x8"),
                  .model = load_model("mixtral-8x7b"),
                  .devices = 8,
                  .runtime = layout::Runtime::kMegatron};
  layout::Plan p;
  p.dp = 8;
  p.microbatches = 32;
  p.schedule = layout::Schedule::k1F1B;
  p.ep = 3;
  EXPECT_NE(error_of([&] { (void)evaluate_layout(r, p); })
                .find("num_experts=8 of 'mixtral-8x7b' do not split over ep=3"),
            std::string::npos);
  p.ep = 8;
  p.etp = 1;
  const LayoutCandidate c = evaluate_layout(r, p);
  EXPECT_GT(c.t_moe_a2a_s, 0);
  EXPECT_GT(c.t_moe_compute_s, 0);
  // A dense model with ep.
  r.model = load_model("llama3-8b");
  EXPECT_NE(error_of([&] { (void)evaluate_layout(r, p); }).find("has no experts"),
            std::string::npos);
  // More imbalance, a slower step.
  r.model = load_model("mixtral-8x7b");
  r.moe_imbalance = 1.5;
  EXPECT_GT(evaluate_layout(r, p).t_step_s, c.t_step_s);
}

layout::Plan mixtral_layout() {
  layout::Plan p;
  p.dp = 4;
  p.pp = 2;
  p.microbatches = 64;
  p.schedule = layout::Schedule::k1F1B;
  p.zero = 1;
  p.mesh = {2, 1};
  p.strategy = Strategy::kTp1d;
  p.sequence_parallel = true;
  p.ep = 8;
  p.etp = 1;
  return p;
}

TEST(MoeEmit, MegatronGetsTheExpertArguments) {
  const ModelSpec m = load_model("mixtral-8x7b");
  const std::string text =
      emit(Framework::kMegatron, {.plan = mixtral_layout(), .model = m, .topology = "t"});
  for (const char* line : {"  --num-experts 8\n", "  --moe-router-topk 2\n",
                           "  --moe-ffn-hidden-size 14336\n",
                           "  --expert-model-parallel-size 8\n",
                           "  --expert-tensor-parallel-size 1\n", "  --moe-grouped-gemm\n",
                           "  --moe-token-dispatcher-type alltoall\n",
                           "  --moe-router-load-balancing-type aux_loss\n",
                           "  --moe-aux-loss-coeff 0.01\n", "  --sequence-parallel\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
  EXPECT_EQ(text.find("moe-layer-freq"), std::string::npos);
  EXPECT_EQ(text.find("moe-router-force-load-balancing"), std::string::npos);
  ModelSpec forced = m;
  forced.moe_force_balance = true;  // a benchmark's routing, as Megatron-LM forces it
  EXPECT_NE(emit(Framework::kMegatron, {.plan = mixtral_layout(), .model = forced, .topology = "t"})
                .find("  --moe-router-force-load-balancing\n"),
            std::string::npos);
  // Qwen2's shared experts: their total width.
  ModelSpec q = load_model("qwen2-57b-a14b");
  layout::Plan p = mixtral_layout();
  p.ep = 8;
  EXPECT_NE(emit(Framework::kMegatron, {.plan = p, .model = q, .topology = "t"})
                .find("  --moe-shared-expert-intermediate-size 20480\n"),
            std::string::npos);
}

TEST(MoeEmit, MegatronsMoeRulesAreFollowed) {
  const ModelSpec m = load_model("mixtral-8x7b");
  layout::Plan p = mixtral_layout();
  EXPECT_FALSE(inexpressible(Framework::kMegatron, p, m).has_value());
  // Tensor parallelism without sequence parallelism: MoELayer.forward refuses it.
  p.strategy = Strategy::kMegatron;
  p.sequence_parallel = false;
  EXPECT_NE(inexpressible(Framework::kMegatron, p, m).value_or("").find("without sequence parallelism"),
            std::string::npos);
  // The same layout for a dense model is fine.
  EXPECT_FALSE(inexpressible(Framework::kMegatron, p, load_model("llama3-8b")).has_value());
  // Expert parallelism in fp16.
  p = mixtral_layout();
  ModelSpec fp16 = m;
  fp16.precision = Precision::kFp16;
  EXPECT_NE(inexpressible(Framework::kMegatron, p, fp16).value_or("").find("in fp16"),
            std::string::npos);
  // GeLU experts (biases) with etp > 1.
  ModelSpec gelu = load_model("tiny-moe");
  p.ep = 2;
  p.etp = 2;
  EXPECT_NE(inexpressible(Framework::kMegatron, p, gelu).value_or("").find("etp=2"),
            std::string::npos);
  // No grouped GeMM outside bf16, and a comment says why.
  gelu.precision = Precision::kFp32;
  gelu.batch = 256;
  p.etp = 1;
  const std::string text = emit(Framework::kMegatron, {.plan = p, .model = gelu, .topology = "t"});
  EXPECT_EQ(text.find("  --moe-grouped-gemm"), std::string::npos);
  EXPECT_NE(text.find("no --moe-grouped-gemm"), std::string::npos);
}

TEST(MoeEmit, TorchtitanAndDeepSpeed) {
  const ModelSpec m = load_model("mixtral-8x7b");
  layout::Plan p = mixtral_layout();
  const std::string toml =
      emit(Framework::kTorchtitan, {.plan = p, .model = m, .topology = "t"});
  EXPECT_NE(toml.find("expert_parallel_degree = 8\n"), std::string::npos) << toml;
  EXPECT_NE(toml.find("expert_tensor_parallel_degree = 1\n"), std::string::npos);
  // etp neither 1 nor tp.
  p.mesh = {4, 1};
  p.dp = 2;
  p.ep = 4;
  p.etp = 2;
  EXPECT_NE(inexpressible(Framework::kTorchtitan, p, m).value_or("").find("etp 1 or etp = tp"),
            std::string::npos);
  layout::Plan data = mixtral_layout();  // DeepSpeed runs plain data parallelism
  data.dp = 16;
  data.pp = 1;
  data.mesh = {1, 1};
  data.strategy = Strategy::kMegatron;
  data.sequence_parallel = false;
  data.microbatches = 16;
  data.schedule = layout::Schedule::kGpipe;
  const std::string json =
      emit(Framework::kDeepSpeed, {.plan = data, .model = m, .topology = "t"});
  EXPECT_NE(json.find("deepspeed.moe.layer.MoE"), std::string::npos);
}

}  // namespace
}  // namespace meshtp::plan
