// The planner over all dimensions (plan/layout_search.hpp): the enumerator keeps to its
// constraints, a two-device case is priced as worked out by hand, and the stage topology
// gives each tensor-parallel dim the bandwidth of the full topology.
#include "plan/layout_search.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "layout/pipeline_schedule.hpp"
#include "plan/mesh_links.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

LayoutRequest small_on(const std::string& topology) {
  LayoutRequest r{.topology = load_topology(topology), .model = load_model("small")};
  r.devices = r.topology.device_count();
  return r;
}

TEST(LayoutSearch, EveryLayoutFillsTheDevicesAndDividesTheModel) {
  const LayoutRequest r = small_on("ib-2x8xa100");
  const std::vector<LayoutCandidate> all = search_layouts(r);
  ASSERT_GT(all.size(), 50u);
  bool seen_pipeline = false, seen_zero3 = false;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const layout::Plan& p = all[i].plan;
    EXPECT_EQ(p.ranks(), 16) << p;
    EXPECT_EQ(r.model.layers % p.pp, 0) << p;
    EXPECT_EQ(r.model.batch % (p.dp * p.microbatches), 0) << p;
    EXPECT_GE(p.microbatches, p.pp) << p;
    EXPECT_TRUE(p.zero == 0 || p.dp > 1) << p;
    EXPECT_EQ(r.model.heads % (p.mesh[0] * p.mesh[1]), 0) << p;  // whole heads per rank
    EXPECT_EQ(all[i].feasible, all[i].memory.total_gib() <= r.topology.memory_gib) << p;
    if (i > 0 && all[i].feasible == all[i - 1].feasible) {
      EXPECT_GE(all[i].t_step_s, all[i - 1].t_step_s);  // ranked
    }
    EXPECT_NO_THROW(p.validate()) << p;
    seen_pipeline = seen_pipeline || p.pp > 1;
    seen_zero3 = seen_zero3 || p.zero == 3;
  }
  EXPECT_TRUE(seen_pipeline);
  EXPECT_TRUE(seen_zero3);
}

// Two devices on a 0.25 GB/s link (as tests/train/slow-pair.json): communication decides.
// Data parallelism all-reduces every gradient of `tiny` (0.46 MB: ~1.9 ms), tensor
// parallelism moves activations several times per layer and pass; a 2-stage pipeline sends
// one microbatch's stream slice (b/m·s·h·4 B, 16 KB for m = 8) forward and its gradient back
// per microbatch. By hand: the pipeline wins, priced (m + p − 1)·(t_stage + t_rerun) +
// (m + p − 1)·2·(bytes/B' + latency), t_rerun the stage's forward re-run before each
// backward: the planner's own price of one more forward, t_stage(full) − t_stage(none).
TEST(LayoutSearch, TwoSlowlyLinkedDevicesPipelineTheModel) {
  LayoutRequest r{.topology = topology_from_json(
                      nlohmann::json::parse(R"({"name": "slow-pair", "device": {"memory_gib": 100,
                        "tflops": 100}, "launch_us": 10, "levels": [{"name": "device",
                        "members": 2, "group_gbps": 0.25, "latency_us": 10}]})"),
                      "slow-pair"),
                  .model = load_model("tiny"),
                  .devices = 2};
  const std::vector<LayoutCandidate> all = search_layouts(r);
  const LayoutCandidate& best = all.front();
  ASSERT_TRUE(best.feasible);
  EXPECT_EQ(best.plan.pp, 2) << best.plan;
  EXPECT_EQ(best.plan.dp, 1);
  const int m = best.plan.microbatches, p = 2;
  EXPECT_NEAR(best.bubble, (p - 1.0) / (m + p - 1.0), 1e-12);
  // One rank's slice of the stream: b/m sequences × s tokens × h, fp32, whole on a 1x1 mesh.
  const double bytes = 8.0 / m * 64 * 64 * 4;
  const double transfer = bytes / 0.25e9 + 10e-6;
  ModelSpec stage = r.model;
  stage.batch = 8 / m;
  stage.layers = 1;
  const auto price = [&](Recompute recompute) {
    stage.recompute = recompute;
    const PlanRequest sub{.topology = tp_topology(r.topology, 1, 1),
                          .model = stage,
                          .devices = 1,
                          .strategies = {Strategy::kMegatron}};
    return evaluate(sub, Strategy::kMegatron, 1, 1, 1).t_step_s;
  };
  const double rerun = price(Recompute::kFull) - price(Recompute::kNone);
  EXPECT_GT(rerun, 0.3 * price(Recompute::kNone));  // a forward: about a third of fwd + bwd
  EXPECT_NEAR(best.t_rerun_s, rerun, 1e-15);
  // The head (logits + cross-entropy on the last rank) waits in every turn; AdamW once.
  stage.batch = 8 / m;
  EXPECT_NEAR(best.t_head_s, head_s(stage, 1, p, r.topology), 1e-15);
  EXPECT_GT(best.t_head_s, 0);
  EXPECT_GT(best.t_optimizer_s, 0);
  // The transfers the 1F1B schedule does not hide (forward a third of the stage and head,
  // backward the rest and the re-run): at least the m that 1F1B on 2 ranks exposes while a
  // transfer is shorter than a forward, at most all 2(m + p − 1) crossings.
  const double work = best.t_stage_s + best.t_head_s;
  const double p2p = layout::exposed_transfer_s(layout::make_schedule(best.plan.schedule, p, m),
                                                work / 3, 2 * work / 3 + rerun, transfer);
  EXPECT_NEAR(best.t_p2p_s, p2p, 1e-12);
  EXPECT_GE(p2p, m * transfer * (1 - 1e-12));
  EXPECT_LE(p2p, 2 * (m + p - 1) * transfer * (1 + 1e-12));
  EXPECT_NEAR(best.t_step_s,
              (m + p - 1) * (best.t_stage_s + rerun + best.t_head_s) + p2p + best.t_optimizer_s,
              1e-9);
  EXPECT_EQ(best.t_dp_s, 0);
}

// The price itself (price_layout), by hand. Interleaved, p = 4 stages, m = 8, v = 2, a
// stage-time (fwd + bwd of a rank's layers) of 1 s plus a 0.5 s re-run forward, 1 MB of
// stream per boundary over 1 GB/s with 10 us latency:
//   bubble  (p−1)/(v·m+p−1) = 3/19: the step is (1 + 0.5)·8·19/16 = 14.25 s of stages, the
//           ideal 12 s plus (p−1)/v = 1.5 stage-times (3/16 of the ideal, Narayanan et al.
//           2021 §2.2.2) — 1F1B's would be 3 stage-times: 16.5 s
//   p2p     a transfer takes 1e6/1e9 + 1e-5 = 1.01 ms, shorter than a chunk's forward
//           (1/3/v s), so of the 2·v·(m+p−1) = 44 crossings the interleaved schedule exposes
//           2(v·p − 1) = 14: 14.14 ms; 1F1B 2(p−2) + 2m(p−1)/p = 16 of its 22: 16.16 ms
//           (layout/pipeline_schedule.hpp). Megatron-LM waits for every one: 44.44 ms.
// and ZeRO-2 over dp = 4 on the same link, 8 MB of parameters: m reduce-scatters of 2 MB
// shards (one per microbatch) and one all-gather.
TEST(LayoutSearch, InterleavedAndZeroTermsPricedByHand) {
  const RingParams link{.t_launch_s = 0, .l_sync_s = 1e-5, .bw_bytes_per_s = 1e9};
  const LayoutTraffic traffic{.pipe = link, .data = link, .stream_bytes = 1e6, .params_bytes = 8e6};
  LayoutCandidate c;
  c.plan = {
      .pp = 4, .microbatches = 8, .schedule = layout::Schedule::kInterleaved, .virtual_stages = 2};
  c.t_stage_s = 1.0;
  c.t_rerun_s = 0.5;
  price_layout(c, traffic);
  EXPECT_NEAR(c.t_p2p_s, 14 * 1.01e-3, 1e-12);
  EXPECT_NEAR(c.bubble, 3.0 / 19, 1e-15);
  EXPECT_EQ(c.t_dp_s, 0);
  EXPECT_NEAR(c.t_step_s, 14.25 + 14 * 1.01e-3, 1e-9);
  c.runtime = layout::Runtime::kMegatron;
  price_layout(c, traffic);
  EXPECT_NEAR(c.t_p2p_s, 44 * 1.01e-3, 1e-12);
  c.runtime = layout::Runtime::kMeshtp;
  c.plan.virtual_stages = 1;
  c.plan.schedule = layout::Schedule::k1F1B;
  price_layout(c, traffic);
  EXPECT_NEAR(c.t_p2p_s, 16 * 1.01e-3, 1e-12);
  EXPECT_NEAR(c.t_step_s, 16.5 + 16 * 1.01e-3, 1e-9);

  c.plan.dp = 4;
  c.plan.zero = 2;
  price_layout(c, traffic);
  const double shard = ring_collective_time(link, 4, 2e6);  // 3 hops of 2 MB: ~6 ms
  EXPECT_NEAR(shard, 3 * (2e6 / 1e9 + 1e-5), 1e-9);
  EXPECT_NEAR(c.t_dp_s, (8 + 1) * shard, 1e-12);
  c.plan.zero = 3;  // + a gather of every block before each forward, re-run and backward
  price_layout(c, traffic);
  EXPECT_NEAR(c.t_dp_s, (8 + 1 + 3 * 8) * shard, 1e-12);
}

// DeepSpeed's pipeline engine by hand: its TrainSchedule (pipe/schedule.py) on pp 2, m 2,
// forward 1 s, backward 2 s, a transfer of 1 MB at 1 GB/s + 10 µs (1.01 ms), blocking:
//   step 0  stage 0 F0 (ends 1)                  stage 1 idle
//   step 1  the pair exchanges F0's output (1)   stage 1 F0 (ends 2 + 1 transfer)
//   step 2  stage 0 F1 (ends 2 + 1)              stage 1 B0 (ends 4 + 1)
//   step 3  the pair exchanges two (B0's gradient, F1's output), from 4 + 1: stage 0 B0
//           (ends 6 + 3), stage 1 F1 (ends 5 + 3)
//   step 4  stage 0 idle                         stage 1 B1 (ends 7 + 3)
//   step 5  the pair exchanges B1's gradient (1), from 7 + 3: stage 0 B1 (ends 9 + 4)
// 9 s and 4 transfers exposed; busy 2·3 = 6 s, so the lockstep's idle share is 1/3. At the
// flush, before the data-parallel all-reduce (dp 4, 8 MB: 2·3 steps of 2 MB, 12.06 ms), the
// tied embedding's 2 MB gradient all-reduced between the first and the last stage on the
// pipeline link: 2 steps of 1 MB, 2.02 ms.
TEST(LayoutSearch, DeepSpeedPipelineAndFlushPricedByHand) {
  EXPECT_NEAR(deepspeed_makespan(2, 2, 1, 2, 0.1), 9.4, 1e-12);
  EXPECT_NEAR(deepspeed_makespan(2, 2, 1, 2, 0), 9, 1e-12);
  // Transfers free, the lockstep loses nothing on even stages: a stage meets the neighbour
  // after it its forward's end with that neighbour's backward's, which 1F1B waits for anyway:
  // (m + p − 1)(F + B), 1F1B's.
  EXPECT_NEAR(deepspeed_makespan(4, 8, 1, 1, 0), 11 * 2, 1e-12);
  EXPECT_NEAR(deepspeed_makespan(4, 8, 1, 2, 0), 11 * 3, 1e-12);
  // Each transfer on the chain: pp 4, m 8 exposes 32 of them (Megatron-LM: 2(m + p − 1) = 22).
  EXPECT_NEAR(deepspeed_makespan(4, 8, 1, 2, 0.001) - 33, 32 * 0.001, 1e-9);
  const RingParams link{.t_launch_s = 0, .l_sync_s = 1e-5, .bw_bytes_per_s = 1e9};
  const LayoutTraffic traffic{.pipe = link,
                              .data = link,
                              .stream_bytes = 1e6,
                              .params_bytes = 8e6,
                              .tied_grad_bytes = 2e6};
  LayoutCandidate c;
  c.plan = {.dp = 4, .pp = 2, .microbatches = 2, .schedule = layout::Schedule::k1F1B};
  c.t_stage_s = 3.0;
  c.t_forward_s = 1.0;
  c.runtime = layout::Runtime::kDeepSpeed;
  price_layout(c, traffic);
  EXPECT_NEAR(c.t_p2p_s, 4 * 1.01e-3, 1e-12);
  EXPECT_NEAR(c.bubble, 1.0 / 3, 1e-12);
  EXPECT_NEAR(c.t_dp_s, 6 * 2.01e-3 + 2 * 1.01e-3, 1e-12);
  EXPECT_NEAR(c.t_step_s, 9 + 4 * 1.01e-3 + 6 * 2.01e-3 + 2 * 1.01e-3, 1e-9);
  c.runtime = layout::Runtime::kMegatron;  // 1F1B: (m + p − 1)·3 s, 2(m + p − 1) transfers
  price_layout(c, traffic);
  EXPECT_NEAR(c.t_p2p_s, 6 * 1.01e-3, 1e-12);
  EXPECT_NEAR(c.t_dp_s, 6 * 2.01e-3, 1e-12);  // no tied all-reduce priced for Megatron-LM
  // Without a pipeline there is no lockstep and no tied group.
  c.runtime = layout::Runtime::kDeepSpeed;
  c.plan.pp = 1;
  price_layout(c, traffic);
  EXPECT_EQ(c.t_p2p_s, 0);
  EXPECT_EQ(c.bubble, 0);
  EXPECT_NEAR(c.t_dp_s, 6 * 2.01e-3, 1e-12);
}

// The data-parallel all-reduce as the runtime runs it (ZeRO 0): one bucket per block, each
// started as the block's last backward ends, one at a time. No pipeline, one microbatch, a
// stage of 1 s (forward 1/3 s, backward 2/3 s) of 4 blocks, 8 MB of parameters over dp = 2:
//   a bucket of 2 MB takes 2(dp−1)·(1 MB / bandwidth); the blocks' gradients are final at
//   1/3 + 1/6, 1/3 + 2/6, 1/3 + 3/6 and 1 s
//   1 GB/s: 2 ms a bucket, each done before the next is final: only the last is exposed,
//           2 ms (all of it after the backward would be 8 ms)
//   1 MB/s: 2 s a bucket, queued: 0.5 + 4·2 = 8.5 s, 7.5 s after the backward (8 s)
// Megatron-LM reduces after the flush: all 8 ms / 8 s.
TEST(LayoutSearch, DataParallelReductionOverlapsTheLastBackwardByHand) {
  LayoutCandidate c;
  c.plan = {.dp = 2, .pp = 1, .microbatches = 1, .schedule = layout::Schedule::kGpipe};
  c.t_stage_s = 1.0;
  for (const double bandwidth : {1e9, 1e6}) {
    const RingParams link{.t_launch_s = 0, .l_sync_s = 0, .bw_bytes_per_s = bandwidth};
    const LayoutTraffic traffic{
        .pipe = link, .data = link, .stream_bytes = 1e6, .params_bytes = 8e6, .layers = 4};
    const double bucket = 2e6 / bandwidth;  // 2(dp − 1) steps of 1 MB
    c.runtime = layout::Runtime::kMeshtp;
    price_layout(c, traffic);
    EXPECT_NEAR(c.t_dp_s, bandwidth == 1e9 ? bucket : 0.5 + 4 * bucket - 1.0, 1e-12) << bandwidth;
    EXPECT_NEAR(c.t_step_s, 1.0 + c.t_dp_s, 1e-12);
    c.runtime = layout::Runtime::kMegatron;
    price_layout(c, traffic);
    EXPECT_NEAR(c.t_dp_s, 4 * bucket, 1e-12) << bandwidth;
  }
  // ZeRO-1 adds the all-gather of the updated parts after the step: dp − 1 steps of 4 MB.
  const RingParams fast{.t_launch_s = 0, .l_sync_s = 0, .bw_bytes_per_s = 1e9};
  const LayoutTraffic traffic{
      .pipe = fast, .data = fast, .stream_bytes = 1e6, .params_bytes = 8e6, .layers = 4};
  c.runtime = layout::Runtime::kMeshtp;
  c.plan.zero = 1;
  price_layout(c, traffic);
  EXPECT_NEAR(c.t_dp_s, 2e-3 + 4e-3, 1e-12);
}

TEST(LayoutSearch, StageTopologyKeepsTheFullTopologysBandwidths) {
  const Topology t = load_topology("ib-2x8xa100");
  // A 4x2 stage inside a node: both dims on NVSwitch, as in the 16-device topology.
  const MeshLinks sub = mesh_links(tp_topology(t, 4, 2), 4, 2);
  const ModelledLink d0 = modelled_link(t, {2, 4, 2}, 1), d1 = modelled_link(t, {2, 4, 2}, 2);
  EXPECT_DOUBLE_EQ(*sub.dims[0].link_gbps, d0.link_gbps);
  EXPECT_DOUBLE_EQ(*sub.dims[1].link_gbps, d1.link_gbps);
  // A 16x1 stage spans both nodes: its ring crosses the 25 GB/s level.
  EXPECT_DOUBLE_EQ(*mesh_links(tp_topology(t, 16, 1), 16, 1).dims[0].link_gbps,
                   modelled_link(t, {16, 1}, 0).link_gbps);
}

TEST(LayoutSearch, BadRequestsNameTheValue) {
  LayoutRequest r = small_on("ib-2x8xa100");
  r.devices = 8;
  EXPECT_THROW(search_layouts(r), Error);
  r = small_on("ib-2x8xa100");
  r.strategies.clear();
  EXPECT_THROW(search_layouts(r), Error);
}

// The head's collectives, composed by hand from the collectives' prices on one flat level of
// 4 devices (nvlink-network-4), `small` (M = b·s = 8·128 tokens, h 256, fp32): the stream is
// M·h·4 = 1 MiB, the cross-entropy's all_reduces 4 and 8 KiB.
TEST(LayoutSearch, HeadCollectivesAsEachRuntimeRunsThem) {
  Topology t = load_topology("nvlink-network-4");
  t.calibration = {};
  ModelSpec mb = load_model("small");
  const double stream = 8.0 * 128 * 256 * 4, tokens = 8.0 * 128;
  const MeshLinks whole = mesh_links(t, 4, 1), mesh = mesh_links(t, 2, 2);
  const auto ar = [&](double bytes) {
    return collective_time(whole.dims[0], layout::CollectiveKind::kAllReduce, bytes);
  };
  const auto ag = [&](int dim, double bytes) {
    return collective_time(mesh.dims[static_cast<std::size_t>(dim)],
                           layout::CollectiveKind::kAllGather, bytes);
  };
  const double stats = ar(4 * tokens) + ar(8 * tokens);
  EXPECT_GT(stats, 0);
  layout::Plan p{.mesh = {2, 2}, .strategy = Strategy::kMeshSlice};
  // meshtp, 2D GeMM stream [S(1), S(2)]: gathered over dim 1 (to half the rows), then dim 0;
  // with pp = 1 the embedding's all_reduce and its gradient's gathers too.
  const double gather = ag(1, stream / 2) + ag(0, stream);
  EXPECT_NEAR(head_comm_s(mb, p, layout::Runtime::kMeshtp, t), stats + 2 * gather + 2 * ar(stream),
              1e-15);
  p.pp = 2;  // the embedding runs on another rank
  EXPECT_NEAR(head_comm_s(mb, p, layout::Runtime::kMeshtp, t), stats + gather + ar(stream), 1e-15);
  // ATP's stream is sharded over dim 1 only.
  p = {.mesh = {2, 2}, .strategy = Strategy::kAtp};
  EXPECT_NEAR(head_comm_s(mb, p, layout::Runtime::kMeshtp, t),
              stats + 2 * ag(1, stream) + 2 * ar(stream), 1e-15);
  // Megatron-LM: one all_reduce each way, or a reduce-scatter and an all-gather with
  // sequence parallelism.
  p = {.mesh = {4, 1}, .strategy = Strategy::kMegatron};
  EXPECT_NEAR(head_comm_s(mb, p, layout::Runtime::kMegatron, t), stats + 2 * ar(stream), 1e-15);
  p.sequence_parallel = true;
  const double rs_ag =
      collective_time(whole.dims[0], layout::CollectiveKind::kReduceScatter, stream) +
      collective_time(whole.dims[0], layout::CollectiveKind::kAllGather, stream);
  EXPECT_NEAR(head_comm_s(mb, p, layout::Runtime::kMegatron, t), stats + 2 * rs_ag, 1e-15);
  // Nothing to move on one device or without a vocabulary.
  EXPECT_EQ(
      head_comm_s(mb, {.mesh = {1, 1}, .strategy = Strategy::kAtp}, layout::Runtime::kMeshtp, t),
      0);
  mb.vocab = 0;
  EXPECT_EQ(
      head_comm_s(mb, {.mesh = {2, 2}, .strategy = Strategy::kAtp}, layout::Runtime::kMeshtp, t),
      0);
}

}  // namespace
}  // namespace meshtp::plan
