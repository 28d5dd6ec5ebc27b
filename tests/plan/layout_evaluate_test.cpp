// One layout priced without a search (plan/layout_search.hpp evaluate_layout) and the runtime
// it is priced as running on (layout::Runtime): evaluate gives every searched layout exactly
// its search price; meshtp's and Megatron-LM's prices differ by exactly the re-run forward
// (and memory by exactly the in-flight activations), nowhere else; the bubble is (p−1)/(v·m)
// of the busy time; a layout that cannot run is an error naming the value.
#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "plan/layout_search.hpp"
#include "plan/memory.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

using layout::Runtime;

LayoutRequest small_on(const std::string& topology, Runtime runtime = Runtime::kMeshtp) {
  LayoutRequest r{.topology = load_topology(topology), .model = load_model("small")};
  r.model.layers = 8;  // pp 4 × v 2 splits them
  r.devices = r.topology.device_count();
  r.runtime = runtime;
  return r;
}

// A layout both Megatron-LM and DeepSpeed's pipeline engine run: small on dp 2 × pp 4 ×
// tp 2, 1F1B over 4 microbatches, full recomputation.
layout::Plan deepspeed_pipeline() {
  return {.dp = 2,
          .pp = 4,
          .microbatches = 4,
          .schedule = layout::Schedule::k1F1B,
          .recompute = Recompute::kFull,
          .mesh = {2, 1},
          .strategy = Strategy::kMegatron};
}

std::string error_of(const LayoutRequest& r, const layout::Plan& p) {
  try {
    evaluate_layout(r, p);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Every layout the search ranks, on both runtimes, evaluated alone: the same numbers, not
// close ones (the same stage prices through the same price_layout and memory model).
TEST(LayoutEvaluate, EverySearchedLayoutIsPricedAsTheSearchPricesIt) {
  for (const Runtime runtime :
       {Runtime::kMeshtp, Runtime::kMegatron, Runtime::kDeepSpeed, Runtime::kMegatron2021}) {
    const LayoutRequest r = small_on("ib-2x8xa100", runtime);
    const std::vector<LayoutCandidate> all = search_layouts(r);
    ASSERT_GT(all.size(), 50u);
    for (const LayoutCandidate& s : all) {
      const LayoutCandidate e = evaluate_layout(r, s.plan);
      EXPECT_EQ(e.plan, s.plan);
      EXPECT_EQ(e.runtime, runtime);
      EXPECT_EQ(e.t_step_s, s.t_step_s) << s.plan;
      EXPECT_EQ(e.t_rerun_s, s.t_rerun_s) << s.plan;
      EXPECT_EQ(e.t_compute_s, s.t_compute_s) << s.plan;
      EXPECT_EQ(e.memory.total_bytes(), s.memory.total_bytes()) << s.plan;
      EXPECT_EQ(e.feasible, s.feasible) << s.plan;
    }
  }
}

// The per-phase parts add up to the step, and the bubble is (p−1)/(v·m) of the busy time
// (Narayanan et al. 2021 §2.2.2): small's 8 layers, pp 4 × v 2, m 8 on 16 devices.
TEST(LayoutEvaluate, PartsSumToTheStepAndTheInterleavedBubbleIsPMinus1OverVm) {
  for (const Runtime runtime : {Runtime::kMeshtp, Runtime::kMegatron}) {
    const LayoutRequest r = small_on("ib-2x8xa100", runtime);
    for (const int v : {1, 2}) {
      const layout::Plan p{.pp = 4,
                           .microbatches = 8,
                           .schedule = search_schedule(8, v),
                           .virtual_stages = v,
                           .mesh = {4, 1},
                           .strategy = Strategy::kMegatron};
      const LayoutCandidate c = evaluate_layout(r, p);
      const LayoutParts t = parts(c);
      EXPECT_NEAR(t.compute_s + t.tp_comm_s + t.bubble_s + t.p2p_s + t.dp_s + t.optimizer_s,
                  c.t_step_s, 1e-12 * c.t_step_s);
      EXPECT_GT(t.optimizer_s, 0);
      EXPECT_GT(t.compute_s, 0);
      EXPECT_GE(t.tp_comm_s, 0);
      EXPECT_NEAR(t.bubble_s / (t.compute_s + t.tp_comm_s), 3.0 / (v * 8), 1e-12) << v;
      EXPECT_GT(t.p2p_s, 0);
      EXPECT_EQ(t.dp_s, 0);
    }
  }
}

// Derived from the formulas: both runtimes price the same stage (recomputation included) the
// same but for Megatron-LM's dropout, the same head and optimizer, so for every layout
//   t_step(meshtp) − t_step(megatron) = m·(t_stage + t_rerun − t_stage')/(1 − bubble)
//                                        + Δp2p − overlap,
//   t_rerun = pp > 1 ? t_stage(full) − t_stage(none) : 0,
// one more forward per microbatch against the dropout (t_stage' > t_stage), and the head's
// collectives as each runtime runs them (head_comm_s: meshtp gathers a sharded stream
// whole, m·Δhead/(1 − bubble)); Δp2p: meshtp
// hides the transfers its schedule overlaps, Megatron-LM waits for each but scatters a
// replicated 1D-TP boundary; overlap: meshtp's ZeRO 0–1 gradient reduction runs under the
// last backwards, Megatron-LM's after them.
// Without a pipeline the memory differs by Megatron-LM's dropout (and sequence parallelism's
// re-gathered LayerNorm outputs); with one, recompute none, pipeline rank 0
// of 1F1B keeps p microbatches' activations on Megatron against one (and p saved inputs) on
// meshtp: exactly (p − 1)·layers·(kept + scores + input) more activations, and the dropout
// of the p.
TEST(LayoutEvaluate, RuntimesDifferExactlyByTheRerunForward) {
  const LayoutRequest mesh = small_on("ib-2x8xa100", Runtime::kMeshtp);
  LayoutRequest mega = mesh;
  mega.runtime = Runtime::kMegatron;
  int pipelined = 0, flat = 0;
  for (const LayoutCandidate& a : search_layouts(mesh)) {
    if (a.plan.zero >= 2) continue;  // Megatron's distributed optimizer is ZeRO-1
    const LayoutCandidate b = evaluate_layout(mega, a.plan);
    EXPECT_GT(b.t_stage_s, a.t_stage_s) << a.plan;  // the dropout
    EXPECT_NEAR(b.t_head_s - b.t_head_comm_s, a.t_head_s - a.t_head_comm_s, 1e-15) << a.plan;
    if (a.plan.mesh[0] * a.plan.mesh[1] > 1) {
      EXPECT_GT(a.t_head_comm_s, 0) << a.plan;
    }
    EXPECT_EQ(b.t_optimizer_s, a.t_optimizer_s) << a.plan;
    const double dropout = a.plan.microbatches * (b.t_stage_s - a.t_stage_s) / (1 - a.bubble);
    const double head = a.plan.microbatches * (b.t_head_s - a.t_head_s) / (1 - a.bubble);
    // Megatron's scatter/gather sends a replicated 1D-TP boundary activation in d1 slices;
    // otherwise it moves the same bytes, but waits for every transfer where meshtp's runtime
    // overlaps all but those its schedule exposes.
    const bool scattered = !a.plan.sequence_parallel && a.plan.mesh[1] == 1 && a.plan.mesh[0] > 1;
    if (a.plan.pp == 1) {
      EXPECT_EQ(b.t_p2p_s, 0) << a.plan;
      EXPECT_EQ(a.t_p2p_s, 0) << a.plan;
    } else if (!scattered) {
      EXPECT_LT(a.t_p2p_s, b.t_p2p_s) << a.plan;
    }
    // meshtp's ZeRO 0–1 reduction runs block by block under the last backwards (each
    // bucket paying its own latency); Megatron-LM's runs after them in one piece.
    if (a.plan.dp == 1) {
      EXPECT_EQ(a.t_dp_s, b.t_dp_s) << a.plan;
    }
    const double overlap = b.t_dp_s - a.t_dp_s;
    EXPECT_EQ(b.bubble, a.bubble) << a.plan;
    EXPECT_EQ(b.t_rerun_s, 0) << a.plan;
    if (a.plan.pp == 1) {
      ++flat;
      EXPECT_EQ(a.t_rerun_s, 0) << a.plan;
      EXPECT_NEAR(b.t_step_s - a.t_step_s, dropout + head + overlap, 1e-12 * a.t_step_s) << a.plan;
      // Megatron-LM keeps its dropout's masks (and the attention dropout's output): more;
      // Megatron-SP also re-gathers the LayerNorm outputs instead of keeping them
      // (memory.hpp), which may outweigh them.
      if (!(a.plan.sequence_parallel && a.plan.mesh[0] > 1)) {
        EXPECT_GT(b.memory.total_bytes(), a.memory.total_bytes()) << a.plan;
      }
      EXPECT_EQ(b.memory.params_bytes, a.memory.params_bytes) << a.plan;
      continue;
    }
    ++pipelined;
    EXPECT_GT(a.t_rerun_s, 0) << a.plan;
    EXPECT_NEAR(a.t_step_s - b.t_step_s,
                a.plan.microbatches * a.t_rerun_s / (1 - a.bubble) - dropout - head +
                    (a.t_p2p_s - b.t_p2p_s) - overlap,
                1e-12 * a.t_step_s)
        << a.plan;
  }
  EXPECT_GT(pipelined, 10);
  EXPECT_GT(flat, 10);

  // The memory difference, by the formula above: pp 2, 1F1B, m 4, mesh 8x1, recompute none.
  const layout::Plan p{.pp = 2,
                       .microbatches = 4,
                       .schedule = layout::Schedule::k1F1B,
                       .mesh = {8, 1},
                       .strategy = Strategy::kMegatron};
  ModelSpec mb = mesh.model;
  mb.batch /= 4;
  const BlockFloats f = block_floats(mb, p);
  const int layers = mesh.model.layers / 2;
  const MemoryEstimate m0 = rank_memory(mesh.model, p, 0, HeadBuffers::kSharded);
  const MemoryEstimate g0 =
      rank_memory(mesh.model, p, 0, HeadBuffers::kSharded, Runtime::kMegatron);
  // Megatron-LM's dropout in each of its 2 microbatches in flight: two masks of a stream
  // slice (1 byte an element) and the attention dropout's mask and output.
  const double e = mb.element_bytes();
  const double dropout = 2 * f.input * 1 + f.scores * (1 + e);
  EXPECT_NEAR(g0.activations_bytes - m0.activations_bytes,
              (2 - 1) * layers * (f.kept + f.scores + f.input) * e + 2 * layers * dropout, 1e-6);
  EXPECT_EQ(g0.params_bytes, m0.params_bytes);
  EXPECT_EQ(g0.optimizer_bytes, m0.optimizer_bytes);
}

// Full recomputation on Megatron with a pipeline keeps only the layer inputs of the in-flight
// microbatches (and, with the buffers, one block's kept set while it re-runs it): far less
// than recompute none.
TEST(LayoutEvaluate, MegatronFullRecomputationKeepsLayerInputsOnly) {
  const LayoutRequest r = small_on("ib-2x8xa100", Runtime::kMegatron);
  layout::Plan p{.pp = 2,
                 .microbatches = 4,
                 .schedule = layout::Schedule::k1F1B,
                 .recompute = Recompute::kFull,
                 .mesh = {8, 1},
                 .strategy = Strategy::kMegatron};
  const double full = evaluate_layout(r, p).memory.activations_bytes;
  p.recompute = Recompute::kNone;
  const double none = evaluate_layout(r, p).memory.activations_bytes;
  ModelSpec mb = r.model;
  mb.batch /= 4;
  const BlockFloats f = block_floats(mb, p);
  const int layers = r.model.layers / 2;
  // none − full = in_flight·layers·(kept + scores + dropout), in_flight = p = 2: the re-run
  // block is counted with the buffers (it is not kept from the forward).
  const double e = mb.element_bytes(), dropout = 2 * f.input * 1 + f.scores * (1 + e);
  EXPECT_NEAR(none - full, 2 * layers * ((f.kept + f.scores) * e + dropout), 1e-6);
}

// DeepSpeed's pipeline engine (--runtime deepspeed): no interleaving, ZeRO 0–1 with a
// pipeline (0–3 without one); every refusal names the value.
TEST(LayoutEvaluate, DeepSpeedRefusesInterleavingAndZeroAboveOneWithAPipeline) {
  const LayoutRequest r = small_on("ib-2x8xa100", Runtime::kDeepSpeed);
  layout::Plan p{.dp = 2,
                 .pp = 4,
                 .microbatches = 4,
                 .schedule = layout::Schedule::kInterleaved,
                 .virtual_stages = 2,
                 .mesh = {2, 1},
                 .strategy = Strategy::kMegatron};
  const std::string interleaved = error_of(r, p);
  EXPECT_NE(interleaved.find("virtual stages=2 (interleaved): DeepSpeed's pipeline engine"),
            std::string::npos)
      << interleaved;
  p.virtual_stages = 1;
  p.schedule = layout::Schedule::k1F1B;
  EXPECT_EQ(error_of(r, p), "no error");
  p.zero = 2;
  const std::string zero = error_of(r, p);
  EXPECT_NE(zero.find("zero=2 with pp=4: DeepSpeed's pipeline engine takes ZeRO stages 0 and 1"),
            std::string::npos)
      << zero;
  p.zero = 3;
  EXPECT_NE(error_of(r, p).find("zero=3 with pp=4"), std::string::npos);
  // Without a pipeline DeepSpeed runs every ZeRO stage.
  p.pp = 1;
  p.dp = 8;
  p.microbatches = 1;
  p.schedule = layout::Schedule::kGpipe;
  EXPECT_EQ(error_of(r, p), "no error");
  // The search keeps to the same rules.
  bool zero3 = false;
  for (const LayoutCandidate& c : search_layouts(r)) {
    EXPECT_EQ(c.plan.virtual_stages, 1) << c.plan;
    EXPECT_TRUE(c.plan.pp == 1 || c.plan.zero <= 1) << c.plan;
    EXPECT_EQ(c.t_rerun_s, 0) << c.plan;
    zero3 = zero3 || c.plan.zero == 3;
  }
  EXPECT_TRUE(zero3);
}

// The same layout as Megatron-LM and as DeepSpeed runs it (no interleaving, dp 2, pp 4, m 4):
// the same stage prices; DeepSpeed's pipeline is its TrainSchedule's lockstep replay
// (deepspeed_makespan) with its blocking transfers, its data-parallel term larger by the tied
// embedding's all-reduce at the flush, its memory larger by its pipe buffers' partitioned
// outputs.
TEST(LayoutEvaluate, DeepSpeedDiffersFromMegatronOnlyInItsPipelineAndFlush) {
  const LayoutRequest mega = small_on("ib-2x8xa100", Runtime::kMegatron);
  LayoutRequest ds = mega;
  ds.runtime = Runtime::kDeepSpeed;
  const layout::Plan p = deepspeed_pipeline();
  const LayoutCandidate a = evaluate_layout(mega, p), b = evaluate_layout(ds, p);
  EXPECT_EQ(a.t_stage_s, b.t_stage_s);
  EXPECT_EQ(a.t_head_s, b.t_head_s);
  EXPECT_EQ(a.t_optimizer_s, b.t_optimizer_s);
  EXPECT_GT(a.t_p2p_s, 0);
  EXPECT_GT(b.t_p2p_s, 0);
  EXPECT_GT(b.t_dp_s, a.t_dp_s);  // small ties its head: the tied all-reduce
  EXPECT_NEAR(b.bubble, a.bubble, 1e-12);  // even stages: the lockstep idles as 1F1B does
  EXPECT_GT(b.t_p2p_s, a.t_p2p_s);         // a send and a receive one after the other
  // The step: the TrainSchedule replay with its transfers, then the flush and the optimizer.
  const double forward = b.t_forward_s + b.t_head_s / 3;
  const double backward = b.t_stage_s + b.t_head_s - forward;
  const double free = deepspeed_makespan(p.pp, p.microbatches, forward, backward, 0);
  EXPECT_NEAR(b.t_step_s, free + b.t_p2p_s + b.t_dp_s + b.t_optimizer_s, 1e-9 * b.t_step_s);
  EXPECT_NEAR(b.bubble, 1 - (b.t_stage_s + b.t_head_s) * p.microbatches / free, 1e-12);
  // Stage 0 keeps min(p, m) = 4 pipe buffers' outputs, a 1/t slice of the stream each.
  ModelSpec mb = mega.model;
  mb.batch /= p.dp * p.microbatches;
  const BlockFloats f = block_floats(mb, p);
  const double extra = 4 * f.input / 2 * mb.element_bytes();
  EXPECT_NEAR(rank_memory(ds.model, p, 0, HeadBuffers::kSharded, Runtime::kDeepSpeed).total_bytes() -
                  rank_memory(mega.model, p, 0, HeadBuffers::kSharded, Runtime::kMegatron)
                      .total_bytes(),
              extra, 1e-3);
}

// Under bf16 DeepSpeed's BF16_Optimizer adds every microbatch's bf16 gradients into fp32
// ones after the backward (update_hp_grads): 18 bytes a parameter of the rank at the
// elementwise rate, on every stage, in the stage's time; and keeps those fp32 accumulators.
TEST(LayoutEvaluate, DeepSpeedBf16AccumulatesEachMicrobatchsGradientsInFp32) {
  LayoutRequest mega = small_on("ib-2x8xa100", Runtime::kMegatron);
  mega.model.precision = Precision::kBf16;
  LayoutRequest ds = mega;
  ds.runtime = Runtime::kDeepSpeed;
  const layout::Plan p = deepspeed_pipeline();
  const LayoutCandidate a = evaluate_layout(mega, p), b = evaluate_layout(ds, p);
  const double params =
      rank_memory(mega.model, p, 0, HeadBuffers::kSharded, Runtime::kMegatron).params_bytes / 2;
  const double rate = mega.topology.effective_elementwise_gbps() * 1e9;
  EXPECT_NEAR(b.t_stage_s - a.t_stage_s, 18 * params / rate, 1e-12);
  EXPECT_NEAR(b.t_compute_s - a.t_compute_s, 18 * params / rate, 1e-12);
  // Its fp32 accumulators, 4 bytes a parameter beside the bf16 gradients, the whole step.
  EXPECT_NEAR(rank_memory(ds.model, p, 0, HeadBuffers::kSharded, Runtime::kDeepSpeed).grads_bytes -
                  rank_memory(mega.model, p, 0, HeadBuffers::kSharded, Runtime::kMegatron)
                      .grads_bytes,
              4 * params, 1e-3);
  ds.model.precision = Precision::kFp16;  // the fp16 optimizer accumulates in place
  mega.model.precision = Precision::kFp16;
  EXPECT_EQ(evaluate_layout(ds, p).t_stage_s, evaluate_layout(mega, p).t_stage_s);
}

// Megatron-LM as Narayanan et al. 2021 ran it: no sequence parallelism, no selective
// recomputation, no distributed optimizer (all three came later); otherwise priced as
// --runtime megatron.
TEST(LayoutEvaluate, Megatron2021RefusesWhatCameLaterAndPricesTheRestAsMegatron) {
  const LayoutRequest mega = small_on("ib-2x8xa100", Runtime::kMegatron);
  LayoutRequest old = mega;
  old.runtime = Runtime::kMegatron2021;
  layout::Plan p{.dp = 2,
                 .pp = 4,
                 .microbatches = 4,
                 .schedule = layout::Schedule::kInterleaved,
                 .virtual_stages = 2,
                 .recompute = Recompute::kFull,
                 .mesh = {2, 1},
                 .strategy = Strategy::kMegatron};
  const LayoutCandidate a = evaluate_layout(mega, p), b = evaluate_layout(old, p);
  EXPECT_EQ(a.t_step_s, b.t_step_s);
  EXPECT_EQ(a.memory.total_bytes(), b.memory.total_bytes());
  p.recompute = Recompute::kSelective;
  EXPECT_NE(error_of(old, p).find("recompute=selective: the megatron-2021 runtime"),
            std::string::npos)
      << error_of(old, p);
  p.recompute = Recompute::kFull;
  p.sequence_parallel = true;
  EXPECT_NE(error_of(old, p).find("sequence parallelism: the megatron-2021 runtime"),
            std::string::npos)
      << error_of(old, p);
  p.sequence_parallel = false;
  p.zero = 1;
  EXPECT_NE(error_of(old, p).find("zero=1: the megatron-2021 runtime"), std::string::npos)
      << error_of(old, p);
  for (const LayoutCandidate& c : search_layouts(old)) {
    EXPECT_FALSE(c.plan.sequence_parallel) << c.plan;
    EXPECT_NE(c.plan.strategy, Strategy::kTp1d) << c.plan;
    EXPECT_NE(c.plan.recompute, Recompute::kSelective) << c.plan;
    EXPECT_EQ(c.plan.zero, 0) << c.plan;
  }
}

TEST(LayoutEvaluate, RuntimeSpellings) {
  EXPECT_EQ(layout::parse_runtime("deepspeed"), Runtime::kDeepSpeed);
  EXPECT_EQ(layout::parse_runtime("megatron-2021"), Runtime::kMegatron2021);
  EXPECT_EQ(layout::parse_runtime("megatron:2021"), Runtime::kMegatron2021);
  EXPECT_EQ(layout::parse_runtime("megatron"), Runtime::kMegatron);
  EXPECT_EQ(layout::name(Runtime::kMegatron2021), "megatron-2021");
  try {
    layout::parse_runtime("megatron-2019");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("megatron-2019"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("deepspeed"), std::string::npos) << e.what();
  }
}

TEST(LayoutEvaluate, MegatronSearchHasNoZeroAboveOne) {
  bool dp = false;
  for (const LayoutCandidate& c : search_layouts(small_on("ib-2x8xa100", Runtime::kMegatron))) {
    EXPECT_LE(c.plan.zero, 1) << c.plan;
    EXPECT_EQ(c.t_rerun_s, 0) << c.plan;
    dp = dp || c.plan.dp > 1;
  }
  EXPECT_TRUE(dp);
}

// Megatron-FSDP (ZeRO 2–3 under --runtime megatron): priced when asked, hidden under each
// pass's compute but the first layer's gather (layout_search.cpp fsdp_exposed_s). G, the
// gather of a rank's shard, is read off meshtp's runtime, which exposes all of ZeRO-3's traffic:
// m reduce-scatters, 2m gathers and the final gather, (3m + 1)·G. Korthikanti et al.'s 22B,
// u = 48 layers, no tensor parallelism, m 4: on one NVSwitch box (dp 8) every pass outlasts its
// traffic, so ZeRO-3 pays m·3G/u and ZeRO-2 G + m·G/u; on two nodes' HDR (dp 16) it does not,
// and ZeRO-3 pays between m·3G/u and m·3G.
TEST(LayoutEvaluate, MegatronFsdpHidesItsTrafficButTheFirstLayersGather) {
  const auto gather = [](LayoutRequest r, const layout::Plan& p) {  // G
    r.runtime = Runtime::kMeshtp;
    return evaluate_layout(r, p).t_dp_s / (3 * p.microbatches + 1);
  };
  const auto korthikanti = [](const std::string& topology, int batch) {
    LayoutRequest r{.topology = load_topology(topology), .model = load_model("korthikanti-22b")};
    r.devices = r.topology.device_count();
    r.runtime = Runtime::kMegatron;
    r.model.batch = batch;
    return r;
  };
  const LayoutRequest r = korthikanti("nvswitch-8xa100", 32);
  const layout::Plan one{.dp = 8, .microbatches = 4, .zero = 1, .mesh = {1, 1},
                         .strategy = Strategy::kMegatron};
  layout::Plan two = one, three = one;
  two.zero = 2;
  three.zero = 3;
  const double g = gather(r, three);
  const LayoutCandidate c1 = evaluate_layout(r, one), c2 = evaluate_layout(r, two),
                        c3 = evaluate_layout(r, three);
  EXPECT_NEAR(c3.t_dp_s, 4 * 3 * g / 48, 1e-9 * c3.t_dp_s);
  EXPECT_NEAR(c2.t_dp_s, g + 4 * g / 48, 1e-9 * c2.t_dp_s);
  EXPECT_LT(c3.t_dp_s, c1.t_dp_s);
  EXPECT_LT(c3.memory.total_bytes(), c2.memory.total_bytes());
  EXPECT_LT(c2.memory.total_bytes(), c1.memory.total_bytes());
  EXPECT_EQ(c3.t_stage_s, c1.t_stage_s);  // the same layers: only the data-parallel part moves
  const LayoutRequest slow = korthikanti("ib-2x8xa100", 64);
  layout::Plan wide = three;
  wide.dp = 16;
  const double gw = gather(slow, wide);
  const double w = evaluate_layout(slow, wide).t_dp_s;
  EXPECT_GT(w, 1.01 * 4 * 3 * gw / 48);
  EXPECT_LT(w, 4 * 3 * gw);
}

// A layout that does not fit is priced, marked infeasible, not an error: GPT-3 175B on one
// DGX A100 with tensor parallelism alone.
TEST(LayoutEvaluate, ALayoutThatDoesNotFitIsPriced) {
  LayoutRequest r{
      .topology = load_topology("nvswitch-8xa100"), .model = load_model("gpt3-175b"), .devices = 8};
  const LayoutCandidate c = evaluate_layout(
      r, {.recompute = Recompute::kFull, .mesh = {8, 1}, .strategy = Strategy::kMegatron});
  EXPECT_FALSE(c.feasible);
  EXPECT_GT(c.memory.total_gib(), r.topology.memory_gib);
  EXPECT_GT(c.t_step_s, 0);
}

TEST(LayoutEvaluate, ALayoutThatCannotRunIsAnErrorNamingTheValue) {
  const LayoutRequest r = small_on("ib-2x8xa100");  // small, 8 layers: 8 heads, batch 8
  const layout::Plan ok{.dp = 2, .mesh = {8, 1}, .strategy = Strategy::kMegatron};
  EXPECT_NO_THROW(evaluate_layout(r, ok));
  layout::Plan p = ok;
  p.dp = 1;
  EXPECT_NE(error_of(r, p).find("= 8 ranks, but there are 16"), std::string::npos)
      << error_of(r, p);
  p = ok;
  p.dp = 1;
  p.mesh = {16, 1};  // 8 heads over 16 ranks
  EXPECT_NE(error_of(r, p).find("heads=8 of 'small' are not divisible by tp=16"), std::string::npos)
      << error_of(r, p);
  p = ok;
  p.dp = 1;
  p.pp = 2;
  p.microbatches = 4;
  p.schedule = layout::Schedule::kInterleaved;
  p.virtual_stages = 3;  // 8 layers over 2 × 3 chunks
  EXPECT_NE(error_of(r, p).find("layers=8 of 'small' do not split into pp=2 × virtual stages=3"),
            std::string::npos)
      << error_of(r, p);
  p = ok;
  p.microbatches = 3;  // batch 8 over dp 2 × 3
  EXPECT_NE(error_of(r, p).find("batch=8 does not split into dp=2 × microbatches=3"),
            std::string::npos)
      << error_of(r, p);
  p = ok;
  p.dp = 1;
  p.pp = 2;
  p.microbatches = 1;
  p.schedule = layout::Schedule::k1F1B;  // 1F1B needs m ≥ p
  EXPECT_NE(error_of(r, p).find("microbatches=1 < pp=2"), std::string::npos) << error_of(r, p);
  LayoutRequest mega = r;
  mega.runtime = Runtime::kMegatron2021;
  p = ok;
  p.zero = 1;
  EXPECT_NE(error_of(mega, p).find("zero=1: the megatron-2021 runtime (Narayanan et al. 2021) "
                                   "has no distributed optimizer"),
            std::string::npos)
      << error_of(mega, p);
  mega.runtime = Runtime::kMegatron;
  p.zero = 3;
  EXPECT_NO_THROW(evaluate_layout(mega, p));  // Megatron-FSDP
  EXPECT_NO_THROW(evaluate_layout(r, p));     // meshtp runs ZeRO-3
}

}  // namespace
}  // namespace meshtp::plan
