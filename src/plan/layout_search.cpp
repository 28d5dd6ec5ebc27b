#include "plan/layout_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <ostream>
#include <tuple>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "layout/pipeline_schedule.hpp"
#include "plan/context_parallel.hpp"
#include "plan/mesh_links.hpp"
#include "plan/moe.hpp"
#include "plan/planner.hpp"
#include "plan/provenance.hpp"

namespace meshtp::plan {
namespace {

// Ascending, in O(√n): the batch may be up to 2^24 and the devices 2^20.
std::vector<int> divisors(int n) {
  std::vector<int> small, large;
  for (int d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

struct Link {
  double gbps = 0, latency_us = 0;
};

// B' and latency of dim `dim` of the row-major layout `shape` on the full topology.
Link link_of(TopologyLinks& links, const std::vector<int>& shape, int dim) {
  const Topology& t = links.topology();
  const int size = shape[static_cast<std::size_t>(dim)];
  if (size == 1) return {};
  int inner = 1;
  for (std::size_t k = static_cast<std::size_t>(dim) + 1; k < shape.size(); ++k) inner *= shape[k];
  if (!t.graph) {
    const ModelledLink& m = links.group_link(size, inner);
    return {m.link_gbps, m.latency_us};
  }
  const int n = t.device_count();
  const MeshLinks& mesh = inner == 1 ? links.mesh(n / size, size) : links.mesh(n / inner, inner);
  const DimLinks& d = mesh.dims[inner == 1 ? 1 : 0];
  return {d.link_gbps.value_or(0), d.modelled.latency_us};
}

RingParams ring(const Topology& t, const Link& l) {
  return {.t_launch_s = t.launch_us * kUs,
          .l_sync_s = l.latency_us * kUs,
          .bw_bytes_per_s = std::max(l.gbps, 1e-9) * kGB};
}

// The virtual stages tried: 1, and with a pipeline the interleaved v ∈ {2, 3, 4} that divide
// a rank's layers when m is a multiple of p (the runtime's condition, pipeline_schedule.hpp).
std::vector<int> virtual_stages(int layers_per_rank, int pp, int m) {
  std::vector<int> out{1};
  if (pp == 1 || m % pp != 0) return out;
  for (int v = 2; v <= 4; ++v) {
    if (layers_per_rank % v == 0) out.push_back(v);
  }
  return out;
}

// The most layers a pipeline rank holds (all its chunks): L/pp, or with uneven stages the
// largest stage's.
int largest_stage(const layout::Plan& p, std::int64_t layers) {
  int most = 0;
  for (int r = 0; r < p.pp; ++r) most = std::max(most, p.stage_layers(static_cast<int>(layers), r));
  return most;
}

// One boundary crossing: a rank's slice of the stream over the pipeline link.
double transfer_s(const LayoutTraffic& t) {
  return t.stream_bytes / t.pipe.bw_bytes_per_s + t.pipe.l_sync_s;
}

}  // namespace

double deepspeed_makespan(int pp, int m, double forward_s, double backward_s,
                          double transfer_s) {
  // TrainSchedule._step_to_micro_batch and its four *_id helpers: (microbatch, forward).
  const auto op = [pp](int step, int stage) -> std::pair<int, bool> {
    const bool even_step = step % 2 == 0, even_stage = stage % 2 == 0;
    if (even_step == even_stage) return {(even_step ? step : step - 1) / 2 - stage / 2, true};
    if (even_step) return {step / 2 - pp + (stage + 1) / 2, false};
    return {(step - 1) / 2 - pp + 1 + stage / 2, false};
  };
  const auto valid = [m](int mb) { return mb >= 0 && mb < m; };
  std::vector<double> end(static_cast<std::size_t>(pp), 0.0), before;
  std::vector<int> prev(static_cast<std::size_t>(pp), -1);  // the step before's microbatch
  std::vector<int> sends(static_cast<std::size_t>(pp));
  for (int step = 0; step < 2 * (m + pp - 1); ++step) {
    before = end;
    // A forward step's SendGrad(prev) and RecvActivation(curr) with stage − 1; a backward
    // step's RecvGrad(curr) and SendActivation(prev) with stage + 1 (TrainSchedule.steps).
    for (int s = 0; s < pp; ++s) {
      const auto [mb, forward] = op(step, s);
      const int partner = forward ? s - 1 : s + 1;
      const auto i = static_cast<std::size_t>(s);
      sends[i] = partner < 0 || partner >= pp ? 0 : valid(prev[i]) + valid(mb);
    }
    for (int s = 0; s < pp; ++s) {
      const auto i = static_cast<std::size_t>(s);
      const auto [mb, forward] = op(step, s);
      double start = before[i];
      if (sends[i] > 0) {
        const auto q = static_cast<std::size_t>(forward ? s - 1 : s + 1);
        start = std::max(before[i], before[q]) + std::max(sends[i], sends[q]) * transfer_s;
      }
      end[i] = start + (valid(mb) ? (forward ? forward_s : backward_s) : 0.0);
      prev[i] = mb;
    }
  }
  return *std::max_element(end.begin(), end.end());
}

PipelineRun run_schedule(const LayoutCandidate& c, const LayoutTraffic& t) {
  const layout::Plan& p = c.plan;
  const int pp = p.pp, m = p.microbatches, v = p.virtual_stages;
  if (c.runtime == layout::Runtime::kDeepSpeed && pp > 1) {
    // The stage's forward (and the head's third) in a forward step; the rest — backward,
    // its recomputation, the head's backward — in a backward step.
    const double forward = (c.t_forward_s > 0 ? c.t_forward_s : c.t_stage_s / 3) + c.t_head_s / 3;
    const double backward = c.t_stage_s + c.t_head_s - forward;
    PipelineRun run;
    run.backward_s = backward;
    run.timing.makespan = deepspeed_makespan(pp, m, forward, backward, transfer_s(t));
    run.makespan_free_s = deepspeed_makespan(pp, m, forward, backward, 0);
    return run;
  }
  // No pipeline and no gradient reduction (over the dp·cp ranks: dense_data_parallel_s)
  // need no timing.
  if (layout::megatron_layers(c.runtime) || (pp == 1 && p.dp * p.cp == 1)) return {};
  // A rank's chunk: forward a third of the stage, backward two thirds and the re-run; the
  // head's share spread like the stage's.
  const double work = c.t_stage_s + c.t_head_s;
  const double forward = work / 3 / v, backward = (2 * work / 3 + c.t_rerun_s) / v;
  const double transfer = transfer_s(t);
  const layout::PipelineSchedule schedule = layout::make_schedule(p.schedule, pp, m, v);
  PipelineRun run{.timing = layout::simulate(schedule, forward, backward, pp > 1 ? transfer : 0),
                  .backward_s = backward};
  run.makespan_free_s =
      pp > 1 ? layout::simulate(schedule, forward, backward).makespan : run.timing.makespan;
  return run;
}

double pipeline_p2p_s(const LayoutCandidate& c, const LayoutTraffic& t, const PipelineRun& run) {
  const layout::Plan& p = c.plan;
  const int pp = p.pp, m = p.microbatches, v = p.virtual_stages;
  if (pp == 1) return 0;
  if (c.runtime == layout::Runtime::kDeepSpeed) {
    // DeepSpeed's TrainSchedule (pipe/schedule.py): each step's send and receive one after
    // the other, each a blocking p2p.send / p2p.recv (pipe/p2p.py: dist.send / dist.recv, or
    // a broadcast on the pair's group), as far as they lengthen the lockstep replay
    // (deepspeed_makespan): up to two transfers per step, where Megatron-LM's batched
    // send-and-receive pays one.
    return run.timing.makespan - run.makespan_free_s;
  }
  if (layout::megatron_layers(c.runtime)) {
    // Per boundary crossing, the activation forward and its gradient back; interleaved, a
    // microbatch crosses v times as many boundaries (every chunk's end is a rank's edge).
    return v * (m + pp - 1) * 2 * transfer_s(t);
  }
  return run.timing.makespan - run.makespan_free_s;
}

namespace {

// The experts' gradients over the edp ranks that hold the same experts (plan/moe.hpp), not
// overlapped: ZeRO 0/1 one all-reduce, ZeRO ≥ 2 every microbatch's reduce-scatter; ZeRO ≥ 1
// the updated shards' all-gather, ZeRO-3 the gathers before each forward and backward.
double expert_data_parallel_s(const LayoutCandidate& c, const LayoutTraffic& t) {
  const layout::Plan& p = c.plan;
  const int edp = expert_dp(p), m = p.microbatches;
  if (t.expert_params_bytes <= 0 || edp <= 1) return 0;
  const double shard = t.expert_params_bytes / edp;
  double seconds = p.zero >= 2 ? m * ring_collective_time(t.edp, edp, shard)
                               : ring_all_reduce_time(t.edp, edp, t.expert_params_bytes);
  if (p.zero >= 1) seconds += ring_collective_time(t.edp, edp, shard);
  if (p.zero == 3) seconds += (p.pp > 1 ? 3 : 2) * m * ring_collective_time(t.edp, edp, shard);
  return seconds;
}

double dense_data_parallel_s(const LayoutCandidate& c, const LayoutTraffic& t,
                             const PipelineRun& run);

}  // namespace

double data_parallel_s(const LayoutCandidate& c, const LayoutTraffic& t, const PipelineRun& run) {
  return dense_data_parallel_s(c, t, run) + expert_data_parallel_s(c, t);
}

namespace {

// DeepSpeed's flush (pipe/engine.py _exec_reduce_tied_grads, before _exec_reduce_grads; not
// overlapped): the tied embedding's gradient all-reduced between the first and the last stage
// (the tied group, pipe/module.py), a rank's vocabulary-parallel rows V/t × h; held in fp32
// under the bf16 optimizer (weight._hp_grad), in the model's precision otherwise. Priced on
// the pipeline dim's link (the two stages are p − 1 stages apart).
double tied_embedding_s(const LayoutCandidate& c, const LayoutTraffic& t) {
  if (c.runtime != layout::Runtime::kDeepSpeed || c.plan.pp == 1) return 0;
  return ring_all_reduce_time(t.pipe, 2, t.tied_grad_bytes);
}

// Megatron-FSDP (core_v0.15.0 --use-megatron-fsdp; docs/source/api-guide/custom_fsdp.md: the
// parameter all-gathers prefetched a unit ahead, the gradient reduce-scatters launched as a
// unit's gradients are ready) and torchtitan's FSDP2 (its implicit forward and backward
// prefetch): the exposed part of one microbatch's FSDP traffic on a rank whose u layers take F
// forward and B backward. ZeRO-3 gathers every layer before its forward and again before its
// backward (G the rank's all-gather, shard → whole), ZeRO ≥ 2 reduce-scatters every layer's
// gradient (R); each pass hides its traffic under its compute except the first unit's gather
// (and the last unit's reduce-scatter), which nothing precedes (follows):
//   ZeRO-3: max(G/u, G − F) + max((G + R)/u, G + R − B);   ZeRO-2: max(R/u, R − B).
// F is the stage's forward (c.t_forward_s; a third of it where unset), B the rest.
double fsdp_exposed_s(const LayoutCandidate& c, const LayoutTraffic& t, int dp, double shard) {
  const layout::Plan& p = c.plan;
  const double collective = ring_collective_time(t.data, dp, shard);  // G = R on a ring
  const double units = std::max(1, t.layers);
  const double forward = c.t_forward_s > 0 ? c.t_forward_s : c.t_stage_s / 3;
  const double backward = c.t_stage_s - forward + c.t_rerun_s;
  if (p.zero == 2) return std::max(collective / units, collective - backward);
  return std::max(collective / units, collective - forward) +
         std::max(2 * collective / units, 2 * collective - backward);
}

double dense_data_parallel_s(const LayoutCandidate& c, const LayoutTraffic& t,
                             const PipelineRun& run) {
  const layout::Plan& p = c.plan;
  // The ranks that hold the same parameters: a replica's dp, times cp (each cp rank computes
  // the gradients of its tokens).
  const int pp = p.pp, m = p.microbatches, v = p.virtual_stages, dp = p.dp * p.cp;
  if (dp == 1) return tied_embedding_s(c, t);
  const double shard = t.params_bytes / dp;
  double reduce = 0;
  if (c.runtime == layout::Runtime::kMegatron && p.zero >= 2) {
    // Megatron-FSDP overlaps (and has no end-of-step gather at ZeRO-3).
    const double fsdp = m * fsdp_exposed_s(c, t, dp, shard);
    return fsdp + (p.zero == 2 ? ring_collective_time(t.data, dp, shard) : 0) +
           tied_embedding_s(c, t);
  }
  if (p.zero >= 2) {
    // ZeRO ≥ 2 reduce-scatters every microbatch's gradient into the sharded accumulators.
    reduce = m * ring_collective_time(t.data, dp, shard);
  } else if (layout::megatron_layers(c.runtime)) {
    reduce = ring_all_reduce_time(t.data, dp, t.params_bytes);  // after the pipeline's flush
  } else {
    // One all-reduce per block (bucket), started as the block's last backward ends
    // (train/zero.hpp), one at a time on the data ring: what outlasts the schedule. A
    // chunk's blocks finish one by one through its backward.
    const int blocks = std::max(1, t.layers / v);  // a chunk's
    const double bucket = ring_all_reduce_time(t.data, dp, t.params_bytes / (v * blocks));
    double finish = 0;
    std::vector<double> ends(static_cast<std::size_t>(v));  // a rank's chunks, in end order
    for (int r = 0; r < pp; ++r) {
      std::copy_n(run.timing.final_backward_end.begin() + static_cast<std::ptrdiff_t>(r) * v, v,
                  ends.begin());
      std::sort(ends.begin(), ends.end());
      double queue = 0;
      for (const double end : ends) {
        for (int b = 1; b <= blocks; ++b) {
          queue = std::max(queue, end - run.backward_s * (blocks - b) / blocks) + bucket;
        }
      }
      finish = std::max(finish, queue);
    }
    reduce = std::max(0.0, finish - run.timing.makespan);
  }
  double seconds = reduce + tied_embedding_s(c, t);
  if (p.zero >= 1) seconds += ring_collective_time(t.data, dp, shard);
  // ZeRO-3 gathers every block before each forward (the rematerialised one too) and
  // backward of every microbatch.
  const int gathers = pp > 1 ? 3 : 2;
  if (p.zero == 3) seconds += gathers * m * ring_collective_time(t.data, dp, shard);
  return seconds;
}

}  // namespace

void price_layout(LayoutCandidate& c, const LayoutTraffic& t, const PipelineRun& run) {
  const layout::Plan& p = c.plan;
  c.bubble = layout::bubble_fraction(p.schedule, p.pp, p.microbatches, p.virtual_stages);
  if (c.runtime == layout::Runtime::kDeepSpeed && p.pp > 1 && run.makespan_free_s > 0) {
    // The idle share of the TrainSchedule replay without transfers (deepspeed_makespan):
    // with even stages 1F1B's fill and drain, (p − 1)/(m + p − 1).
    const double busy = (c.t_stage_s + c.t_rerun_s + c.t_head_s) * p.microbatches;
    c.bubble = std::max(0.0, 1 - busy / run.makespan_free_s);
  }
  c.t_p2p_s = pipeline_p2p_s(c, t, run);
  c.t_dp_s = data_parallel_s(c, t, run);
  c.t_step_s = (c.t_stage_s + c.t_rerun_s + c.t_head_s) * p.microbatches / (1 - c.bubble) +
               c.t_p2p_s + c.t_dp_s + c.t_optimizer_s;
  c.t_step_s_low = c.t_step_s_high = c.t_step_s;  // no band until add_band
}

void price_layout(LayoutCandidate& c, const LayoutTraffic& t) {
  price_layout(c, t, run_schedule(c, t));
}

void LayoutRequest::validate() const {
  topology.validate();
  model.validate();
  MESHTP_CHECK(devices == topology.device_count(),
               "topology '{}' has {} devices but --devices is {}", topology.name,
               topology.device_count(), devices);
  MESHTP_CHECK(!strategies.empty(), "no strategy selected");
  MESHTP_CHECK(max_tp >= 1 && max_microbatches >= 1,
               "max tp={} and max microbatches={} must be at least 1", max_tp, max_microbatches);
  MESHTP_CHECK(max_ep >= 0, "--max-ep={} must be at least 0 (0: every ep)", max_ep);
  check_imbalance(moe_imbalance);
}

Topology tp_topology(const Topology& topology, int d1, int d2) {
  TopologyLinks links(topology);
  return tp_topology(links, d1, d2);
}

Topology tp_topology(TopologyLinks& links, int d1, int d2) {
  const Topology& topology = links.topology();
  const int n = topology.device_count();
  const std::vector<int> shape{n / (d1 * d2), d1, d2};
  Topology t = topology;
  t.name = fmt::format("{} (a {}x{} stage)", topology.name, d1, d2);
  t.graph.reset();
  t.levels.clear();
  // Measured groups stay measured: the stage's dim-0 groups are (d1, stride d2) and its dim-1
  // groups (d2, stride 1) in the full topology's rank order too (tensor parallelism is
  // innermost), so the full topology's fits for those shapes are the stage's.
  t.calibration.groups.clear();
  // A mesh's measured sharing is the stage's only when the stage is that whole mesh.
  std::erase_if(t.calibration.meshes, [&](const MeshSharing& m) {
    return m.mesh != std::array{d1, d2} || d1 * d2 != n;
  });
  // And the whole group's (d1·d2, stride 1): the head's collectives run on the mesh's
  // communicator (head_comm_s).
  for (const auto& [size, stride] : {std::pair{d1, d2}, std::pair{d2, 1}, std::pair{d1 * d2, 1}}) {
    if (size == 1 || t.calibrated_group(size, stride) != nullptr) continue;  // kept already
    if (const GroupCalibration* g = topology.calibrated_group(size, stride)) {
      t.calibration.groups.push_back(*g);
    }
  }
  const Link l0 = link_of(links, shape, 1), l1 = link_of(links, shape, 2);
  const auto level = [](const char* name, int members, double gbps, double latency_us) {
    Level l;
    l.name = name;
    l.members = members;
    l.group_gbps = gbps;
    l.latency_us = latency_us;
    return l;
  };
  if (d1 > 1) t.levels.push_back(level("tp-dim0", d1, d2 * l0.gbps, l0.latency_us));
  if (d2 > 1) t.levels.push_back(level("tp-dim1", d2, l1.gbps, l1.latency_us));
  if (t.levels.empty()) t.levels.push_back(level("device", 1, 1, 0));
  return t;
}

std::vector<LayoutCandidate> search_layouts(const LayoutRequest& r) {
  return search_layouts(r, 0).ranked;
}

layout::Plan with_search_schedule(layout::Plan plan) {
  plan.schedule = search_schedule(plan.microbatches, plan.virtual_stages);
  return plan;
}

layout::Schedule search_schedule(int microbatches, int virtual_stages) {
  return virtual_stages > 1 ? layout::Schedule::kInterleaved
         : microbatches > 1 ? layout::Schedule::k1F1B
                            : layout::Schedule::kGpipe;
}

double rerun_s(layout::Runtime runtime, int pp, double full_s, double none_s) {
  return runtime == layout::Runtime::kMeshtp && pp > 1 ? full_s - none_s : 0;
}

LayoutParts parts(const LayoutCandidate& c) {
  const double busy = (c.t_stage_s + c.t_rerun_s + c.t_head_s) * c.plan.microbatches;
  const double compute = (c.t_compute_s + c.t_head_s - c.t_head_comm_s) * c.plan.microbatches;
  return {.compute_s = compute,
          .tp_comm_s = busy - compute,
          .bubble_s = busy / (1 - c.bubble) - busy,
          .p2p_s = c.t_p2p_s,
          .dp_s = c.t_dp_s,
          .optimizer_s = c.t_optimizer_s};
}

double head_s(const ModelSpec& mb, int tp, int pp, const Topology& topology) {
  if (mb.vocab == 0) return 0;
  const double tokens = static_cast<double>(mb.tokens());
  const double vocab = static_cast<double>(mb.vocab) / tp, h = mb.hidden;  // per rank
  const double logits = tokens * vocab;
  const GemmModel g = topology.gemm_model();
  const int e = mb.element_bytes();
  const double gemm = g.seconds(tokens, vocab, h, e) + g.seconds(tokens, h, vocab, e) +
                      g.seconds(h, vocab, tokens, e);
  double touched =
      logits * (op_costs::kCrossEntropyForwardTouches + op_costs::kCrossEntropyBackwardTouches);
  if (pp == 1) {
    touched += tokens * mb.hidden *
               (op_costs::kEmbeddingForwardTouches + op_costs::kEmbeddingBackwardTouches);
  }
  return gemm + touched * e / (topology.effective_elementwise_gbps() * kGB);
}

double head_comm_s(const ModelSpec& mb, const layout::Plan& plan, layout::Runtime runtime,
                   const Topology& stage) {
  const auto [d1, d2] = plan.mesh;
  const int tp = d1 * d2;
  if (mb.vocab == 0 || tp == 1) return 0;
  using layout::CollectiveKind;
  const double tokens = static_cast<double>(mb.tokens());
  const double stream = tokens * static_cast<double>(mb.hidden) * mb.element_bytes();
  const MeshLinks dims = mesh_links(stage, d1, d2);
  const MeshLinks whole = mesh_links(stage, tp, 1);
  const DimLinks& group = whole.dims[0];  // the mesh communicator's ring
  // The cross-entropy's max of M values, then the sum and the target's logit (2M), fp32.
  const double statistics = collective_time(group, CollectiveKind::kAllReduce, tokens * 4) +
                            collective_time(group, CollectiveKind::kAllReduce, 2 * tokens * 4);
  const bool embedding = plan.pp == 1;  // with a pipeline it runs on another rank
  if (layout::megatron_layers(runtime)) {
    // Without sequence parallelism one all_reduce each way; with it a reduce-scatter and an
    // all-gather (the same ring steps and bytes, priced as what runs).
    const bool sp = plan.sequence_parallel || plan.strategy == Strategy::kTp1d;
    const double each_way = sp ? collective_time(group, CollectiveKind::kReduceScatter, stream) +
                                     collective_time(group, CollectiveKind::kAllGather, stream)
                               : collective_time(group, CollectiveKind::kAllReduce, stream);
    return statistics + each_way * (embedding ? 2 : 1);
  }
  // meshtp: the stream's shards gathered whole, inner mesh dim first.
  std::vector<int> sharding;  // mesh dims, inner first
  if (layout::is_gemm2d(plan.strategy)) {
    sharding = {1, 0};
  } else if (plan.strategy == Strategy::kTp1d || plan.sequence_parallel) {
    sharding = {0};
  } else {
    sharding = {1};
  }
  double gather = 0, gathered = stream;
  for (const int d : sharding) gathered /= plan.mesh[static_cast<std::size_t>(d)];
  for (const int d : sharding) {
    gathered *= plan.mesh[static_cast<std::size_t>(d)];
    gather += collective_time(dims.dims[static_cast<std::size_t>(d)], CollectiveKind::kAllGather,
                              gathered);
  }
  const double all_reduce = collective_time(group, CollectiveKind::kAllReduce, stream);
  return statistics + gather + all_reduce + (embedding ? all_reduce + gather : 0);
}

double optimizer_s(double params, const Topology& topology) {
  return op_costs::bytes(params, op_costs::kAdamWTouches + op_costs::kGradNormTouches) /
         (topology.effective_elementwise_gbps() * kGB);
}

namespace {

// What the search and evaluate_layout share: the stage prices, each mesh's stage topology
// and each schedule's buffer counts, computed once; and the one price of a layout.
class Pricer {
 public:
  // The layouts of context parallelism `cp`: every price on s/cp tokens per rank (the local
  // model), the core's remainder and exchange on the whole sequence (plan/context_parallel).
  Pricer(const LayoutRequest& r, int cp) : r_(local(r, cp)), whole_(r.model), links_(r.topology) {}

  static LayoutRequest local(LayoutRequest r, int cp) {
    r.model.seq /= cp;
    return r;
  }

  // The tensor-parallel stage price, one per (strategy, mesh, chunks, microbatch rows,
  // layers, recompute): the same for every dp, zero and schedule. `mb`: one microbatch of
  // one stage's layers.
  const Candidate& stage(Strategy strategy, int d1, int d2, int chunks, ModelSpec mb,
                         Recompute recompute) {
    if (mb.is_moe()) return moe_stage(strategy, d1, d2, chunks, mb, recompute);
    mb.recompute = recompute;
    mb.dropout = layout::megatron_layers(r_.runtime) && megatron_drops_out(mb);
    const int attention = static_cast<int>(mb.attention);
    const auto key = std::tuple{static_cast<int>(strategy), d1, d2, chunks, mb.batch, mb.layers,
                                static_cast<int>(recompute), mb.ffn(), attention};
    auto it = stages_.find(key);
    if (it == stages_.end()) {
      PlanRequest sub{.topology = stage_topology(d1, d2),
                      .model = mb,
                      .devices = d1 * d2,
                      .strategies = {strategy},
                      .chunks = {chunks}};
      it = stages_.emplace(key, evaluate(sub, strategy, d1, d2, chunks)).first;
    }
    return it->second;
  }

  // A MoE model's stage (plan/moe.hpp): its dense layers as they are, its MoE layers'
  // attention and shared experts as a dense layer prices them — with shared experts an MLP of
  // shared·f_e on the attention's tensor parallelism, without them the attention alone,
  // 2·stage(f_e) − stage(2·f_e) part by part (the MLP's linears extrapolated away; the
  // stream's collectives around it stay, standing for the layout change into the experts').
  // The experts themselves are priced per layout (ep, etp) in price(). MoE layers of a stage
  // of n: ⌈n/moe_every⌉ (exact for moe_every 1, an upper bound otherwise).
  const Candidate& moe_stage(Strategy strategy, int d1, int d2, int chunks, const ModelSpec& mb,
                             Recompute recompute) {
    const int attention = static_cast<int>(mb.attention);
    const auto key = std::tuple{static_cast<int>(strategy), d1, d2, chunks, mb.batch, mb.layers,
                                static_cast<int>(recompute), std::int64_t{-1}, attention};
    auto it = moe_stages_.find(key);
    if (it != moe_stages_.end()) return it->second;
    const std::int64_t n_moe = mb.moe_layers(mb.layers), n_dense = mb.layers - n_moe;
    const std::int64_t fe = mb.expert_ffn();
    const auto part = [&](std::int64_t ffn, std::int64_t layers) -> const Candidate& {
      ModelSpec d = dense_part(mb, ffn);
      d.layers = layers;
      return stage(strategy, d1, d2, chunks, d, recompute);
    };
    std::vector<std::pair<const Candidate*, double>> parts;
    if (n_dense > 0) parts.emplace_back(&part(mb.ffn_hidden, n_dense), 1.0);
    if (mb.shared_experts > 0) {
      parts.emplace_back(&part(mb.shared_ffn(), n_moe), 1.0);
    } else {
      const Candidate& one = part(fe, n_moe);
      const Candidate& two = part(2 * fe, n_moe);
      if (two.valid) {
        parts.emplace_back(&one, 2.0);
        parts.emplace_back(&two, -1.0);
      } else {
        parts.emplace_back(&one, 1.0);  // an upper bound: the MLP of f_e kept
      }
    }
    Candidate c = *parts.front().first;
    c.t_step_s = c.t_comm_s = c.t_compute_s = c.t_elementwise_s = 0;
    for (const auto& [x, w] : parts) {
      if (!x->valid && c.valid) {
        c.valid = false;
        c.reason = x->reason;
      }
      c.t_step_s += w * x->t_step_s;
      c.t_comm_s += w * x->t_comm_s;
      c.t_compute_s += w * x->t_compute_s;
      c.t_elementwise_s += w * x->t_elementwise_s;
    }
    c.t_step_s = std::max(0.0, c.t_step_s);
    c.t_comm_s = std::max(0.0, c.t_comm_s);
    c.t_compute_s = std::max(0.0, c.t_compute_s);
    c.t_compute_s = std::min(c.t_compute_s, c.t_step_s);  // the extrapolation kept consistent
    c.t_elementwise_s = std::clamp(c.t_elementwise_s, 0.0, c.t_compute_s);
    return moe_stages_.emplace(key, std::move(c)).first->second;
  }

  // The expert groups' links (plan/moe.hpp) of (dp, pp, cp, tp, ep, etp) on the full topology:
  // ep's near part inside the innermost level (or a stage's contiguous tp·cp ranks), its far
  // part beyond; etp contiguous; the expert gradients over the data ring (dp > 1) or inside
  // the stage. The megatron runtime's expert groups are consecutive ranks (its rank order).
  MoeRings moe_rings(const layout::Plan& p, const RingParams& data) {
    MoeRings out;
    const Topology& t = r_.topology;
    const int n = r_.devices, tp = p.mesh[0] * p.mesh[1], inner = tp * p.cp, ep = p.ep;
    const int etp = p.expert_tp(), edp = expert_dp(p);
    if (etp > 1) out.etp = ring(t, link_of(links_, {n / etp, etp}, 1));
    if (ep > 1) {
      // Megatron-LM's default rank order (tp-cp-ep-dp-pp, megatron/core/parallel_state.py)
      // keeps a stage's ranks consecutive, so its expert groups are too; meshtp's [tp, cp, pp,
      // dp] does only within tp·cp (or without a pipeline).
      const bool consecutive = layout::megatron_layers(r_.runtime) || p.pp == 1;
      if (etp * ep <= inner || consecutive) {
        // Contiguous ranks, stride etp: the part inside one innermost-level member near.
        const int node = t.graph ? n : std::max(1, t.levels.back().members / std::max(1, etp));
        int near = 1;
        for (int d = 1; d <= ep; ++d) {
          if (ep % d == 0 && d <= node) near = d;
        }
        out.ep_inner_size = near;
        const std::vector<int> shape{n / (etp * ep), ep / near, near, etp};
        out.ep_inner = near > 1 ? ring(t, link_of(links_, shape, 2)) : ring(t, link_of(links_, shape, 1));
        out.ep_outer = near < ep ? ring(t, link_of(links_, shape, 1)) : out.ep_inner;
      } else {
        // Beyond a stage's tp·cp ranks: the far part strides over the pipeline into dp.
        const int near = inner / etp, far = ep / near;
        const std::vector<int> shape{p.dp / far, far, p.pp, near, etp};
        out.ep_inner_size = near;
        out.ep_outer = ring(t, link_of(links_, shape, 1));
        out.ep_inner = near > 1 ? ring(t, link_of(links_, shape, 3)) : out.ep_outer;
      }
    }
    if (edp > 1) {
      out.edp = p.dp > 1 ? data
                         : ring(t, link_of(links_, {n / inner, edp, inner / edp}, 1));
    }
    return out;
  }

  // A pipeline schedule's buffer counts, one replay per (schedule, pp, m, v) instead of one
  // per pipeline rank of every layout.
  const std::vector<PipelineBuffers>& buffers(const layout::Plan& plan) {
    const auto key = std::tuple{static_cast<int>(plan.schedule), plan.pp, plan.microbatches,
                                plan.virtual_stages};
    auto it = schedules_.find(key);
    if (it == schedules_.end()) it = schedules_.emplace(key, pipeline_buffers(plan)).first;
    return it->second;
  }

  // The pipeline dim's, the data ring's and the cp dim's rings of (dp, pp, cp, tp) on the
  // full topology ([tp, cp, pp, dp] innermost first). The gradients run over dp·cp ranks:
  // priced on the dp dim's ring, or the cp dim's when dp = 1.
  struct Rings {
    RingParams pipe, data, cp;
  };
  Rings rings(int dp, int pp, int cp, int tp) {
    const std::vector<int> shape{dp, pp, cp, tp};
    const RingParams cp_ring = ring(r_.topology, link_of(links_, shape, 2));
    return {ring(r_.topology, link_of(links_, shape, 1)),
            dp > 1 ? ring(r_.topology, link_of(links_, shape, 0)) : cp_ring, cp_ring};
  }

  // What `plan` (any v, zero and schedule: they do not change it) moves: one rank's slice of
  // a microbatch's stream, and pipeline rank 0's parameters priced on (v 1, zero 0, gpipe).
  LayoutTraffic traffic(layout::Plan plan, const Rings& rings) {
    ModelSpec mb = r_.model;
    mb.batch = r_.model.batch / (plan.dp * plan.microbatches);
    mb.layers = largest_stage(plan, r_.model.layers);
    mb.recompute = plan.recompute;
    mb.attention = plan.attention;
    plan.virtual_stages = 1;
    plan.zero = 0;
    plan.schedule = layout::Schedule::kGpipe;
    // Megatron-LM's scatter/gather optimisation (Narayanan et al. 2021 §4.1): a boundary
    // activation replicated over the d1 ranks of 1D TP goes over the pipeline link as d1
    // slices, one per rank (the all-gather inside the stage that rebuilds it is not priced).
    const double head_comm =
        head_comm_s(mb, plan, r_.runtime, stage_topology(plan.mesh[0], plan.mesh[1]));
    const double slices = layout::megatron_layers(r_.runtime) && !plan.sequence_parallel &&
                                  !layout::is_gemm2d(plan.strategy) && plan.mesh[1] == 1
                              ? plan.mesh[0]
                              : 1;
    // A MoE model's experts reduce over edp (plan/moe.hpp), the rest over dp·cp.
    double experts = 0;
    MoeRings moe;
    if (r_.model.is_moe()) {
      const double frac = static_cast<double>(r_.model.moe_layers()) / r_.model.layers;
      const auto moe_layers = static_cast<std::int64_t>(std::ceil(
          (plan.uneven() ? plan.stage_layers(static_cast<int>(r_.model.layers), 0)
                         : static_cast<double>(r_.model.layers) / plan.pp) * frac));
      experts = expert_params_per_rank(r_.model, plan, moe_layers) * r_.model.element_bytes();
      moe = moe_rings(plan, rings.data);
    }
    return {.pipe = rings.pipe,
            .data = rings.data,
            .cp = rings.cp,
            .edp = moe.edp,
            .moe = moe,
            .stream_bytes = block_floats(mb, plan).input * r_.model.element_bytes() / slices,
            // The rank's parameters in the model's precision: what the frameworks' gradient
            // reductions move, priced for this runtime too (whose gradients are fp32:
            // docs/precision.md), so Megatron-LM's memory model counts them.
            .params_bytes = rank_memory(r_.model, plan, 0, HeadBuffers::kSharded, buffers(plan),
                                        layout::Runtime::kMegatron)
                                .params_bytes -
                            experts,
            .expert_params_bytes = experts,
            .head_s = head_s(mb, plan.mesh[0] * plan.mesh[1], plan.pp, r_.topology) + head_comm,
            .head_comm_s = head_comm,
            .layers = static_cast<int>(mb.layers),
            .tied_grad_bytes = tied_grad_bytes(plan)};
  }

  // A first-stage rank's slice of the tied embedding's gradient: V/t rows of h, fp32 under
  // bf16 (DeepSpeed's BF16_Optimizer accumulates fp32 gradients, pipe/engine.py
  // _exec_reduce_tied_grads reduces weight._hp_grad).
  double tied_grad_bytes(const layout::Plan& plan) const {
    const ModelSpec& m = r_.model;
    if (!m.tie_embeddings || m.vocab == 0) return 0;
    const double rows = std::ceil(static_cast<double>(m.vocab) / (plan.mesh[0] * plan.mesh[1]));
    return rows * static_cast<double>(m.hidden) *
           (m.precision == Precision::kBf16 ? 4.0 : m.element_bytes());
  }

  // The layout's price without its memory: the stage (and, by the runtime, its re-run
  // forward) `m` times over the bubble, plus transfers.
  LayoutCandidate price(const layout::Plan& plan, const Candidate& stage, const Candidate& full,
                        const Candidate& none, const LayoutTraffic& t) {
    LayoutCandidate c;
    c.plan = plan;
    c.runtime = r_.runtime;
    c.t_stage_s = stage.t_step_s;
    c.t_forward_s = none.t_step_s / 3;
    c.t_rerun_s = rerun_s(r_.runtime, plan.pp, full.t_step_s, none.t_step_s);
    c.t_compute_s =
        stage.t_compute_s + rerun_s(r_.runtime, plan.pp, full.t_compute_s, none.t_compute_s);
    c.t_head_s = t.head_s;
    c.t_head_comm_s = t.head_comm_s;
    const int layers = largest_stage(plan, r_.model.layers);
    if (plan.cp > 1) {
      // The whole sequence's core and exchange, one microbatch of the largest stage's layers.
      ModelSpec mb = whole_;
      mb.batch = whole_.batch / (plan.dp * plan.microbatches);
      mb.recompute = plan.recompute;
      mb.attention = plan.attention;  // the core as the stage priced it
      const CpPrice cp = cp_price(mb, layers, plan.mesh[0] * plan.mesh[1], plan.cp,
                                  plan.cp_comm, r_.topology.gemm_model(), t.cp);
      c.t_cp_compute_s = cp.compute_s;
      c.t_cp_exposed_s = cp.exposed_s;
      c.t_cp_hidden_s = cp.hidden_s;
      c.t_stage_s += cp.compute_s + cp.exposed_s;
      c.t_compute_s += cp.compute_s;
    }
    if (r_.model.is_moe()) {
      // The experts of the largest stage's MoE layers, one microbatch (plan/moe.hpp); the
      // runtime's re-run (meshtp, pp > 1) runs their forward once more.
      ModelSpec mb = r_.model;
      mb.batch = r_.model.batch / (plan.dp * plan.microbatches);
      mb.recompute = plan.recompute;
      const MoePrice moe = moe_price(mb, r_.model.moe_layers(layers), plan, r_.moe_imbalance,
                                     r_.topology.gemm_model(),
                                     r_.topology.effective_elementwise_gbps() * kGB, t.moe);
      c.t_moe_compute_s = moe.compute_s;
      c.t_moe_a2a_s = moe.a2a_s;
      c.t_moe_etp_s = moe.etp_comm_s;
      c.t_stage_s += moe.total_s();
      c.t_compute_s += moe.compute_s;
      if (c.t_rerun_s > 0) {
        c.t_rerun_s += moe.forward_s;
        c.t_compute_s += moe.forward_compute_s;
      }
    }
    if (r_.runtime == layout::Runtime::kDeepSpeed && r_.model.precision == Precision::kBf16) {
      // DeepSpeed's BF16_Optimizer after every microbatch's backward (pipe/engine.py
      // _exec_backward_pass, or BF16_Optimizer.backward on the last stage and without a
      // pipeline): update_hp_grads adds each bf16 gradient into its fp32 accumulator,
      // hp_grad.add_(lp.grad.to(fp32)): the copy reads 2 bytes and writes 4, the add reads
      // 4 + 4 and writes 4, 18 bytes a parameter of the rank, on its stream.
      const double accumulate =
          18 * (t.params_bytes + t.expert_params_bytes) / r_.model.element_bytes() /
          (r_.topology.effective_elementwise_gbps() * kGB);
      c.t_stage_s += accumulate;
      c.t_compute_s += accumulate;
    }
    if (plan.uneven()) {
      // The last stage's turn is its layers and the head: the head costs what it takes
      // beyond the layers that stage has fewer than the largest.
      const int last = plan.stage_layers(static_cast<int>(r_.model.layers), plan.pp - 1);
      const double per_layer = (c.t_stage_s + c.t_rerun_s) / layers;
      const double head = std::max(0.0, t.head_s - (layers - last) * per_layer);
      c.t_head_comm_s = t.head_s > 0 ? t.head_comm_s * head / t.head_s : 0;
      c.t_head_s = head;
    }
    // ZeRO ≥ 1 (Megatron-LM's distributed optimizer) updates a 1/(dp·cp) shard on each rank
    // (the experts' a 1/edp one).
    const double params = t.params_bytes / r_.model.element_bytes();
    const double experts = t.expert_params_bytes / r_.model.element_bytes();
    c.t_optimizer_s = optimizer_s(plan.zero >= 1 ? params / (plan.dp * plan.cp) + experts / expert_dp(plan)
                                                 : params + experts,
                                  r_.topology);
    price_layout(c, t, schedule_run(c, t));
    return c;
  }

  // run_schedule, once for the ZeRO stages of a layout (they do not change it).
  const PipelineRun& schedule_run(const LayoutCandidate& c, const LayoutTraffic& t) {
    const layout::Plan& p = c.plan;
    const RunKey key{static_cast<int>(p.schedule),
                     p.pp,
                     p.microbatches,
                     p.virtual_stages,
                     p.dp > 1,
                     c.t_stage_s,
                     c.t_rerun_s,
                     c.t_head_s,
                     t.stream_bytes,
                     t.pipe.bw_bytes_per_s,
                     t.pipe.l_sync_s};
    if (!last_run_ || last_run_->first != key) last_run_.emplace(key, run_schedule(c, t));
    return last_run_->second;
  }

  // The memory model, the most loaded pipeline rank, and whether it fits.
  void add_memory(LayoutCandidate& c) {
    c.memory =
        peak_rank_memory(r_.model, c.plan, HeadBuffers::kSharded, buffers(c.plan), r_.runtime);
    c.feasible = c.memory.total_gib() <= r_.topology.memory_gib;
  }

 private:
  const Topology& stage_topology(int d1, int d2) {
    auto it = stage_topologies_.find({d1, d2});
    if (it == stage_topologies_.end()) {
      it = stage_topologies_.emplace(std::pair{d1, d2}, tp_topology(links_, d1, d2)).first;
    }
    return it->second;
  }

  const LayoutRequest r_;  // the model on s/cp tokens
  const ModelSpec whole_;  // on the whole sequence
  TopologyLinks links_;
  // (strategy, d1, d2, chunks, batch, layers, recompute, ffn, attention)
  using StageKey =
      std::tuple<int, int, int, int, std::int64_t, std::int64_t, int, std::int64_t, int>;
  std::map<StageKey, Candidate> stages_, moe_stages_;
  std::map<std::pair<int, int>, Topology> stage_topologies_;
  std::map<std::tuple<int, int, int, int>, std::vector<PipelineBuffers>> schedules_;
  // What run_schedule reads: (schedule, pp, m, v, dp > 1, stage, re-run, head, stream
  // bytes, pipeline bandwidth and latency).
  using RunKey =
      std::tuple<int, int, int, int, bool, double, double, double, double, double, double>;
  std::optional<std::pair<RunKey, PipelineRun>> last_run_;
};

// The ZeRO stages a runtime has: meshtp 0–3; Megatron-LM 0–3, 1 its distributed optimizer,
// 2 and 3 Megatron-FSDP's optim_grads and optim_grads_params (core_v0.15.0
// --use-megatron-fsdp --data-parallel-sharding-strategy; torchtitan's FSDP2 is priced the same
// way); megatron-2021 none (Narayanan et al. 2021 has no sharded optimizer); DeepSpeed's 0–3
// without a pipeline but 0 and 1 with one (pipe/engine.py PipelineEngine.__init__: "ZeRO-2 and
// ZeRO-3 are incompatible with pipeline parallelism").
int zero_stages(layout::Runtime runtime, int pp) {
  switch (runtime) {
    case layout::Runtime::kMeshtp: return 4;
    case layout::Runtime::kMegatron: return 4;
    case layout::Runtime::kMegatron2021: return 1;
    case layout::Runtime::kDeepSpeed: return pp > 1 ? 2 : 4;
  }
  return 1;
}

// The ZeRO stages plan --3d searches: every stage the runtime has, but Megatron-LM's FSDP
// stages are priced only when asked for (--evaluate --zero 2|3): no published Megatron-FSDP
// or FSDP2 run checks their overlap (fsdp_exposed_s), so they do not decide a search.
int searched_zero_stages(layout::Runtime runtime, int pp) {
  return runtime == layout::Runtime::kMegatron ? 2 : zero_stages(runtime, pp);
}

// Why `runtime` cannot run `p` (strategy `s`, the planner's), or nullopt: megatron-2021
// (Narayanan et al. 2021) has no sequence parallelism and no selective recomputation
// (Korthikanti et al. 2023 §4.2 and §5 introduced both); deepspeed's PipelineEngine runs one
// stage per pipeline rank (pipe/schedule.py TrainSchedule, no virtual stages) and ZeRO 0–1
// with a pipeline.
std::optional<std::string> runtime_refuses(layout::Runtime runtime, const layout::Plan& p,
                                           Strategy s) {
  if (p.zero >= zero_stages(runtime, p.pp)) {
    switch (runtime) {
      case layout::Runtime::kMegatron:
        return fmt::format("zero={}: the megatron runtime has ZeRO stages 0 to 3 (1 the "
                           "distributed optimizer, 2 and 3 Megatron-FSDP)",
                           p.zero);
      case layout::Runtime::kMegatron2021:
        return fmt::format("zero={}: the megatron-2021 runtime (Narayanan et al. 2021) has no "
                           "distributed optimizer: zero 0 only",
                           p.zero);
      case layout::Runtime::kDeepSpeed:
        return fmt::format("zero={} with pp={}: DeepSpeed's pipeline engine takes ZeRO stages 0 "
                           "and 1 only (ZeRO-2 and ZeRO-3 are incompatible with pipeline "
                           "parallelism)",
                           p.zero, p.pp);
      case layout::Runtime::kMeshtp: break;
    }
  }
  if (runtime == layout::Runtime::kDeepSpeed && p.virtual_stages > 1) {
    return fmt::format("virtual stages={} (interleaved): DeepSpeed's pipeline engine runs one "
                       "stage per pipeline rank (its TrainSchedule has no interleaving)",
                       p.virtual_stages);
  }
  if (runtime == layout::Runtime::kMegatron2021) {
    if (s == Strategy::kTp1d || p.sequence_parallel) {
      return std::string("sequence parallelism: the megatron-2021 runtime (Narayanan et al. "
                         "2021) has none; Korthikanti et al. 2023 introduced it (--runtime "
                         "megatron)");
    }
    if (p.recompute == Recompute::kSelective) {
      return std::string("recompute=selective: the megatron-2021 runtime (Narayanan et al. "
                         "2021) recomputes full layers or none; Korthikanti et al. 2023 "
                         "introduced selective recomputation (--runtime megatron)");
    }
  }
  return std::nullopt;
}

// The (ep, etp) a layout's experts are searched on (plan/moe.hpp): (1, 0) for a dense model;
// for a MoE model every ep dividing num_experts (at most max_ep) and etp dividing tp whose
// groups tile the stage.
std::vector<std::pair<int, int>> expert_layouts(const LayoutRequest& r, layout::Plan plan) {
  if (!r.model.is_moe()) return {{1, 0}};
  std::vector<std::pair<int, int>> out;
  const int tp = plan.mesh[0] * plan.mesh[1];
  for (const int ep : divisors(static_cast<int>(r.model.num_experts))) {
    if (r.max_ep > 0 && ep > r.max_ep) continue;
    for (const int etp : divisors(tp)) {
      plan.ep = ep;
      plan.etp = etp;
      if (!moe_invalid_reason(r.model, plan)) out.emplace_back(ep, etp);
    }
  }
  return out;
}

// The cp values searched: 1, and every divisor of the devices up to max_cp whose zigzag
// splits the sequence (2·cp chunks).
std::vector<int> cp_values(const LayoutRequest& r) {
  std::vector<int> out;
  for (const int cp : divisors(r.devices)) {
    if (cp <= r.max_cp && r.model.seq % (2 * cp) == 0) out.push_back(cp);
  }
  if (out.empty() || out.front() != 1) out.insert(out.begin(), 1);
  return out;
}

// The stage splits searched for pp stages of `layers`: even when they divide, else with
// uneven stages on (and pp ≥ 3) the middle ⌈L/pp⌉ each and the rest halved between the
// first and the last (both at least 1). Pairs (first_stage_layers, last_stage_layers).
std::vector<std::pair<int, int>> stage_splits(std::int64_t layers, int pp, bool uneven) {
  if (layers % pp == 0) return {{0, 0}};
  if (!uneven || pp < 3) return {};
  const std::int64_t middle = (layers + pp - 1) / pp, rest = layers - middle * (pp - 2);
  if (rest < 2 || rest % 2 != 0 || rest / 2 > middle) return {};
  return {{static_cast<int>(rest / 2), static_cast<int>(rest / 2)}};
}

}  // namespace

LayoutSearch search_layouts(const LayoutRequest& r, std::size_t keep) {
  r.validate();
  const ModelSpec& model = r.model;
  const int n = r.devices;
  // The ranking: feasible first, then by step time, then in the order enumerated (the
  // stable sort of the whole list). With `keep`, the kept are a heap whose top ranks last.
  struct Found {
    LayoutCandidate c;
    std::int64_t order = 0;
  };
  const auto ranks_before = [](const Found& a, const Found& b) {
    if (a.c.feasible != b.c.feasible) return a.c.feasible;
    if (a.c.t_step_s != b.c.t_step_s) return a.c.t_step_s < b.c.t_step_s;
    return a.order < b.order;
  };
  std::vector<Found> kept;
  LayoutSearch result;
  result.made_for = provenance_of(r.topology, r.model);
  // Whether a layout found now whose step takes at least `t_lower` seconds ranks after the
  // `keep` kept: they are all feasible and no slower (a tie ranks it after, found later).
  const auto bounded_out = [&](double t_lower) {
    return keep > 0 && kept.size() == keep && kept.front().c.feasible &&
           t_lower >= kept.front().c.t_step_s;
  };
  const auto add = [&](Found f) {
    if (keep == 0) {
      kept.push_back(std::move(f));
    } else if (kept.size() < keep || ranks_before(f, kept.front())) {
      kept.push_back(std::move(f));
      std::push_heap(kept.begin(), kept.end(), ranks_before);
      if (kept.size() > keep) {
        std::pop_heap(kept.begin(), kept.end(), ranks_before);
        kept.pop_back();
      }
    }
  };
  for (const int cp : cp_values(r)) {
  Pricer pricer(r, cp);
  for (const int tp : divisors(n / cp)) {
    if (tp > r.max_tp) continue;
    for (const int pp : divisors(n / (cp * tp))) {
     for (const auto& [first_layers, last_layers] : stage_splits(model.layers, pp, r.uneven_stages)) {
      const int dp = n / (cp * tp * pp);
      if (model.batch % dp != 0) continue;
      const auto rings = pricer.rings(dp, pp, cp, tp);
      for (const int m : divisors(model.batch / dp)) {
        // 1F1B needs m ≥ p; with pp = 1, m > 1 is gradient accumulation (smaller
        // activations, the same work).
        if (m > r.max_microbatches || m < pp) continue;
        for (const auto& [d1, d2] : enumerate_meshes(tp)) {
          for (const Strategy requested : r.strategies) {
            // ATP on a mesh with a dim of size 1 is Megatron's (candidate.hpp).
            const Strategy strategy = candidate_strategy(requested, {d1, d2});
            if (strategy == Strategy::kMegatron && d1 > 1 && d2 > 1) continue;
            if (strategy == Strategy::kTp1d && d2 != 1) continue;  // mesh (N, 1) only
            // The runtime's ATP block shards whole heads over all d1·d2 ranks
            // (model/block.hpp validate).
            if (!layout::is_gemm2d(strategy) && model.heads % (d1 * d2) != 0) continue;
            // The cp exchanges this mesh runs (heads per TP rank for a2a).
            std::vector<layout::CpComm> comms;
            for (const layout::CpComm comm : cp > 1 ? r.cp_comms : std::vector{layout::CpComm::kRing}) {
              if (!cp_invalid_reason(model, d1 * d2, cp, comm)) comms.push_back(comm);
            }
            if (comms.empty()) continue;
            for (const int chunks : r.chunks) {
              ModelSpec mb = model;
              mb.seq = model.seq / cp;
              mb.batch = model.batch / (dp * m);
              layout::Plan split;
              split.pp = pp;
              split.first_stage_layers = first_layers;
              split.last_stage_layers = last_layers;
              mb.layers = largest_stage(split, model.layers);
              const auto stage_of = [&](Recompute recompute) -> const Candidate& {
                return pricer.stage(strategy, d1, d2, chunks, mb, recompute);
              };
              for (const Recompute recompute :
                   {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
                const Candidate& stage = stage_of(recompute);
                if (!stage.valid) continue;
                // The boundary rematerialisation (meshtp's runtime): one more forward of the
                // stage per microbatch, the planner's own price of it (full recomputation's
                // surplus).
                const Candidate& full = stage_of(Recompute::kFull);
                const Candidate& none = stage_of(Recompute::kNone);
                const double rerun = rerun_s(r.runtime, pp, full.t_step_s, none.t_step_s);
                const std::vector<int> vs = first_layers > 0 ? std::vector{1}
                                                              : virtual_stages(model.layers / pp, pp, m);
                const int zeros = dp * cp > 1 ? searched_zero_stages(r.runtime, pp) : 1;
                layout::Plan plan = to_plan(stage);
                plan.dp = dp;
                plan.pp = pp;
                plan.cp = cp;
                plan.first_stage_layers = first_layers;
                plan.last_stage_layers = last_layers;
                plan.microbatches = m;
                plan.recompute = recompute;
                plan.provenance.reset();
                // The (virtual stages, ZeRO) of this block the request accepts.
                const auto accepted = [&](int v, int zero) {
                  if (!r.accepts) return true;
                  plan.virtual_stages = v;
                  plan.schedule = search_schedule(m, v);
                  plan.zero = zero;
                  return r.accepts(plan);
                };
                const std::vector<std::pair<int, int>> experts = expert_layouts(r, plan);
                // A bound for all of them: no bubble, no transfers (no experts).
                if (bounded_out((stage.t_step_s + rerun) * m)) {
                  for (std::size_t x = 0; x < experts.size(); ++x) {
                    for (const int v : vs) {
                      for (int zero = 0; zero < zeros; ++zero) {
                        plan.virtual_stages = v;
                        plan.zero = zero;
                        if (runtime_refuses(r.runtime, plan, strategy)) continue;
                        result.searched += accepted(v, zero) ? static_cast<int>(comms.size()) : 0;
                      }
                    }
                  }
                  continue;
                }
                for (const auto& [ep, etp] : experts) {
                plan.ep = ep;
                plan.etp = etp;
                const LayoutTraffic traffic = pricer.traffic(plan, rings);
                for (const int v : vs) {
                  for (int zero = 0; zero < zeros; ++zero) {
                   for (const layout::CpComm comm : comms) {
                    plan.cp_comm = comm;
                    if (!accepted(v, zero)) continue;
                    plan.virtual_stages = v;
                    plan.schedule = search_schedule(m, v);
                    plan.zero = zero;
                    if (runtime_refuses(r.runtime, plan, strategy)) continue;
                    LayoutCandidate c = pricer.price(plan, stage, full, none, traffic);
                    const std::int64_t order = result.searched++;
                    // The memory model is most of a layout's price: not for one that ranks
                    // after the kept whether it fits or not.
                    if (bounded_out(c.t_step_s)) continue;
                    ++result.priced;
                    pricer.add_memory(c);
                    add({std::move(c), order});
                   }
                  }
                }
                }
              }
            }
          }
        }
      }
    }
  }
     }
  }
  std::sort(kept.begin(), kept.end(), ranks_before);
  result.ranked.reserve(kept.size());
  for (Found& f : kept) result.ranked.push_back(std::move(f.c));
  if (keep > 0) {
    for (LayoutCandidate& c : result.ranked) add_band(r, c);
  }
  return result;
}

void add_band(const LayoutRequest& r, LayoutCandidate& c) {
  c.t_step_s_low = c.t_step_s_high = c.t_step_s;
  if (r.topology.ranges.empty()) return;
  Topology base = r.topology;
  base.ranges.clear();  // the corners have none: evaluate_layout prices them without a band
  LayoutRequest corner = r;
  corner.accepts = {};
  const std::string where = fmt::format("'{}' at a range's end", r.topology.name);
  const Band b = band(to_json(base), r.topology.ranges, [&](const nlohmann::json& t) {
    corner.topology = topology_from_json(t, where);
    return evaluate_layout(corner, c.plan).t_step_s;
  });
  c.t_step_s_low = std::min(b.low, c.t_step_s);
  c.t_step_s_high = std::max(b.high, c.t_step_s);
}

LayoutCandidate evaluate_layout(const LayoutRequest& r, const layout::Plan& given) {
  r.validate();
  given.validate();
  const ModelSpec& model = r.model;
  given.check_ranks(r.devices, fmt::format("the {} devices of '{}'", r.devices, r.topology.name));
  const int dp = given.dp, pp = given.pp, m = given.microbatches, v = given.virtual_stages;
  const int d1 = given.mesh[0], d2 = given.mesh[1], cp = given.cp;
  if (!given.uneven()) {
    MESHTP_CHECK(model.layers % (pp * v) == 0,
                 "layers={} of '{}' do not split into pp={} × virtual stages={}", model.layers,
                 model.name, pp, v);
  }
  const int layers = largest_stage(given, model.layers);  // throws naming an uneven split
  check_cp(model, d1 * d2, cp, given.cp_comm);
  check_moe(model, given);
  MESHTP_CHECK(model.batch % (dp * m) == 0,
               "batch={} does not split into dp={} × microbatches={} (microbatch size {}/{})",
               model.batch, dp, m, model.batch, dp * m);
  {
    const Strategy s = given.sequence_parallel && !layout::is_gemm2d(given.strategy)
                           ? Strategy::kTp1d
                           : candidate_strategy(given.strategy, given.mesh);
    const std::optional<std::string> refused = runtime_refuses(r.runtime, given, s);
    MESHTP_CHECK(!refused, "{}", refused.value_or(""));
  }
  // The schedule runs (1f1b: m ≥ pp; interleaved: m % pp = 0, v ≥ 2): it throws naming them.
  (void)layout::make_schedule(given.schedule, pp, m, v);
  // Sequence parallelism on an ATP/Megatron block is the planner's tp1d (mesh (N, 1)).
  const Strategy strategy = given.sequence_parallel && !layout::is_gemm2d(given.strategy)
                                ? Strategy::kTp1d
                                : candidate_strategy(given.strategy, given.mesh);
  MESHTP_CHECK(!(strategy == Strategy::kMegatron && d1 > 1 && d2 > 1),
               "strategy megatron runs on a mesh (N, 1) or (1, N), not {}x{}", d1, d2);
  MESHTP_CHECK(strategy != Strategy::kTp1d || d2 == 1,
               "sequence parallelism (tp1d) runs on a mesh (N, 1), not {}x{}", d1, d2);
  MESHTP_CHECK(layout::is_gemm2d(strategy) || model.heads % (d1 * d2) == 0,
               "heads={} of '{}' are not divisible by tp={} (mesh {}x{}): the ATP block shards "
               "whole heads",
               model.heads, model.name, d1 * d2, d1, d2);
  // tp1d (sequence parallelism) is priced unchunked: a layout train runs with chunks > 1 would
  // be priced as another (issue 48: --strategy tp1d --chunks 4 priced chunks 1).
  MESHTP_CHECK(strategy != Strategy::kTp1d || given.chunks == 1,
               "chunks={} with sequence parallelism (tp1d): the planner prices tp1d's "
               "collectives unchunked, so this is not the layout train would run; give chunks 1",
               given.chunks);
  Pricer pricer(r, cp);
  ModelSpec mb = model;
  mb.seq = model.seq / cp;
  mb.batch = model.batch / (dp * m);
  mb.layers = layers;
  mb.attention = given.attention;  // the stage's price (the search prices the default, unfused)
  const int chunks = layout::is_gemm2d(strategy) || strategy == Strategy::kTp1d ? 1 : given.chunks;
  const Candidate& stage = pricer.stage(strategy, d1, d2, chunks, mb, given.recompute);
  MESHTP_CHECK(stage.valid, "the layout does not run: {} on mesh {}x{}: {}", layout::name(strategy),
               d1, d2, stage.reason);
  const Candidate& full = pricer.stage(strategy, d1, d2, chunks, mb, Recompute::kFull);
  const Candidate& none = pricer.stage(strategy, d1, d2, chunks, mb, Recompute::kNone);
  // The search's plan of this stage, with the given layout's pipeline, data and recompute.
  layout::Plan plan = to_plan(stage);
  plan.dp = dp;
  plan.pp = pp;
  plan.cp = cp;
  plan.cp_comm = given.cp_comm;
  plan.first_stage_layers = given.first_stage_layers;
  plan.last_stage_layers = given.last_stage_layers;
  plan.microbatches = m;
  plan.recompute = given.recompute;
  plan.attention = given.attention;
  plan.progress_splits = given.progress_splits;  // not priced: kept, so the plan reads back
  plan.ep = given.ep;
  plan.etp = given.etp;
  plan.provenance.reset();
  const LayoutTraffic traffic = pricer.traffic(plan, pricer.rings(dp, pp, cp, d1 * d2));
  plan.virtual_stages = v;
  plan.schedule = given.schedule;
  plan.zero = given.zero;
  LayoutCandidate c = pricer.price(plan, stage, full, none, traffic);
  pricer.add_memory(c);
  add_band(r, c);
  return c;
}

std::ostream& operator<<(std::ostream& os, const LayoutCandidate& c) {
  const layout::Plan& p = c.plan;
  return os << fmt::format(
             "dp={} pp={}{}{} tp={}x{}{} {} m={} zero={} recompute={}: step {:.4g} s{} (stage "
             "{:.4g}{} s × {}, bubble {:.1f}%, p2p {:.3g} s, dp {:.3g} s), {:.1f} GiB{}",
             p.dp, p.pp, p.virtual_stages > 1 ? fmt::format(" v={}", p.virtual_stages) : "",
             p.uneven() ? fmt::format(" ({}+…+{} layers)", p.first_stage_layers, p.last_stage_layers)
                        : "",
             p.mesh[0], p.mesh[1],
             fmt::format("{}{}", p.cp > 1 ? fmt::format(" cp={} {}", p.cp, layout::name(p.cp_comm)) : "",
                         p.ep > 1 || p.etp > 0 ? fmt::format(" ep={} etp={}", p.ep, p.expert_tp()) : ""),
             layout::name(p.strategy), p.microbatches, p.zero, layout::name(p.recompute), c.t_step_s,
             c.t_step_s_low < c.t_step_s_high
                 ? fmt::format(" [{:.4g}–{:.4g}]", c.t_step_s_low, c.t_step_s_high)
                 : "",
             c.t_stage_s,
             c.t_rerun_s > 0 ? fmt::format(" + rerun {:.4g}", c.t_rerun_s) : "", p.microbatches,
             100 * c.bubble, c.t_p2p_s, c.t_dp_s, c.memory.total_gib(),
             c.feasible ? "" : " infeasible");
}

nlohmann::json to_json(const LayoutCandidate& c) {
  const LayoutParts t = parts(c);
  nlohmann::json j{{"plan", layout::to_json(c.plan)},
          {"runtime", layout::name(c.runtime)},
          {"feasible", c.feasible},
          {"t_step_s", c.t_step_s},
          {"t_step_s_low", c.t_step_s_low},
          {"t_step_s_high", c.t_step_s_high},
          {"t_stage_s", c.t_stage_s},
          {"t_rerun_s", c.t_rerun_s},
          {"t_head_s", c.t_head_s},
          {"t_head_comm_s", c.t_head_comm_s},
          {"bubble", c.bubble},
          {"t_p2p_s", c.t_p2p_s},
          {"t_dp_s", c.t_dp_s},
          {"parts",
           {{"compute_s", t.compute_s},
            {"tp_comm_s", t.tp_comm_s},
            {"bubble_s", t.bubble_s},
            {"p2p_s", t.p2p_s},
            {"dp_s", t.dp_s},
            {"optimizer_s", t.optimizer_s}}},
          {"memory_gib", c.memory.total_gib()},
          {"memory", to_json(c.memory)}};
  if (c.t_moe_compute_s > 0) {
    j["t_moe_compute_s"] = c.t_moe_compute_s;
    j["t_moe_a2a_s"] = c.t_moe_a2a_s;
    j["t_moe_etp_s"] = c.t_moe_etp_s;
  }
  if (c.plan.cp > 1) {
    j["t_cp_compute_s"] = c.t_cp_compute_s;
    j["t_cp_exposed_s"] = c.t_cp_exposed_s;
    j["t_cp_hidden_s"] = c.t_cp_hidden_s;
  }
  return j;
}

std::vector<std::vector<int>> band_overlaps(const LayoutSearch& search, std::size_t shown) {
  const std::size_t n = std::min(shown, search.ranked.size());
  std::vector<std::vector<int>> out(n);
  const auto band_of = [&](std::size_t i) {
    const LayoutCandidate& c = search.ranked[i];
    return Band{.value = c.t_step_s, .low = c.t_step_s_low, .high = c.t_step_s_high};
  };
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < n; ++k) {
      if (k != i && band_of(i).overlaps(band_of(k))) out[i].push_back(static_cast<int>(k) + 1);
    }
  }
  return out;
}

nlohmann::json to_json(const LayoutSearch& search, std::size_t shown) {
  nlohmann::json rows = nlohmann::json::array();
  const std::vector<std::vector<int>> overlaps = band_overlaps(search, shown);
  for (std::size_t i = 0; i < overlaps.size(); ++i) {
    nlohmann::json row = to_json(search.ranked[i]);
    row["band_overlaps"] = overlaps[i];
    add_provenance(row, search.made_for);
    rows.push_back(std::move(row));
  }
  const bool best = !search.ranked.empty() && search.ranked.front().feasible;
  nlohmann::json best_row = best ? to_json(search.ranked.front()) : nlohmann::json();
  add_provenance(best_row, search.made_for);
  return {{"layouts", rows},
          {"searched", search.searched},
          {"priced", search.priced},
          {"best", !best          ? nlohmann::json()
                   : rows.empty() ? std::move(best_row)
                                  : rows.front()}};  // the first row: provenance, band_overlaps
}

std::string does_not_fit(const LayoutCandidate& c, double memory_gib) {
  if (c.feasible) return "";
  return fmt::format(
      "does not fit: needs {:.1f} GiB on its most loaded rank, the device has {} GiB",
      c.memory.total_gib(), memory_gib);
}

nlohmann::json evaluation_to_json(const LayoutCandidate& c, double memory_gib) {
  nlohmann::json j = to_json(c);
  j["fits"] = c.feasible;
  if (!c.feasible) j["does_not_fit"] = does_not_fit(c, memory_gib);
  return j;
}

nlohmann::json evaluation_to_json(const LayoutRequest& request, const LayoutCandidate& c) {
  nlohmann::json j = evaluation_to_json(c, request.topology.memory_gib);
  add_provenance(j, provenance_of(request.topology, request.model));
  return j;
}

}  // namespace meshtp::plan
