// The planner over all dimensions: (dp, pp, mesh d1×d2, strategy, zero, recompute,
// microbatches) within the device count and the device memory.
//
//   ranks       world rank = ((r_dp·pp + r_pp)·d1 + i)·d2 + j (the runtime's order): tensor
//               parallelism innermost (consecutive ranks: inside a node), the pipeline next
//               (across the next level, e.g. nodes), data parallelism outermost — the
//               placement Narayanan et al. 2021 (Megatron-LM) §3 recommends.
//   stage       one microbatch of b/(dp·m) sequences through L/pp layers: the tensor-parallel
//               planner's price (planner.hpp `evaluate`, every strategy and knob, recompute
//               FLOPs and traffic included) on a topology holding just the d1·d2 ranks of a
//               stage, whose two levels carry the B' the full topology gives those groups
//               (tp_topology).
//   pipeline    t = (t_stage + t_rerun)·m / (1 − bubble), bubble = (p−1)/(m+p−1) (1F1B;
//               Narayanan et al. §2.2.1), or with v interleaved virtual stages per rank
//               (p−1)/(v·m+p−1): (p−1)/v stage-times of bubble, (p−1)/(v·m) of the ideal
//               (§2.2.2). t_rerun: the runtime keeps only a stage's input per microbatch in
//               flight and re-runs its forward before the backward (train/pipeline_model.hpp)
//               — one more forward per microbatch, priced as full recomputation's surplus
//               (t_stage(full) − t_stage(none)), whatever the recomputation. Plus the
//               point-to-point transfers: per microbatch and stage boundary the activation
//               (forward) and its gradient (backward), each bytes/B'_pp + latency, bytes =
//               one rank's slice of the stream (plan/memory.hpp BlockFloats::input). The
//               runtime posts every receive up front and sends without waiting, so only the
//               transfers no other op hides cost time: the schedule is run with them
//               (layout::exposed_transfer_s; forward a third of a chunk's work, backward the
//               rest and the re-run). E.g. interleaved exposes 2(v·p − 1) of its
//               2·v·(m + p − 1) crossings while they are shorter than a forward.
//   runtime     the program the layout runs on (layout::Runtime; LayoutRequest::runtime):
//               meshtp as above; megatron (Megatron-LM, Narayanan et al. 2021, Korthikanti
//               et al. 2023) keeps every in-flight microbatch's activations instead, so
//               t_rerun = 0 and the memory model counts them (plan/memory.hpp rank_memory);
//               its schedule waits for each transfer before the next op (megatron/core/
//               pipeline_parallel/p2p_communication.py: `_communicate` waits on its requests
//               unless --overlap-p2p-communication), so every crossing is exposed:
//               2·v·(m + p − 1) transfers;
//               its distributed optimizer is ZeRO-1, so only zero 0 and 1 exist; without
//               sequence parallelism its 1D TP stage sends a boundary activation as d1
//               slices, one per rank (scatter/gather, Narayanan et al. §4.1: bytes/d1,
//               the rebuilding all-gather not priced). All else —
//               the stage price with its recomputation (full: each layer's forward again;
//               selective: the attention core again), sequence parallelism (tp1d: reduce-
//               scatter + all-gather), the bubble and dp terms — is the same formula for
//               both: where the runtimes agree (no pipeline; with one, every term but
//               t_rerun and t_p2p) the same number.
//   data        per step the gradients of a rank's parameters over the dp ring: ZeRO 0/1
//               all-reduce once; 2/3 reduce-scatter every microbatch's (the sharded
//               accumulators, train/zero.hpp: m times); ZeRO ≥ 1 all-gathers the updated
//               parameters; ZeRO-3 also all-gathers every block's parameters before each
//               microbatch's forward, re-run forward (p > 1) and backward (2·m or 3·m
//               gathers). The runtime (meshtp) starts ZeRO 0/1's all-reduce block by block
//               as each block's last backward ends (train/zero.hpp), so only what outlasts
//               the schedule is priced (data_parallel_s); the rest is not overlapped (an
//               upper bound).
//   memory      peak_rank_memory (plan/memory.hpp) with the head sharded: feasible when it fits
//               topology.memory_gib.
//   cp          context parallelism (layout::Plan::cp, ranks [tp, cp, pp, dp]): every term
//               above is priced on s/cp tokens per rank (the stage, the stream slices, the
//               head, the activations); plan/context_parallel.hpp adds the rest of the
//               attention core and its exchange's exposed part to t_stage_s; the gradients
//               and ZeRO's shards run over the dp·cp ranks of a replica's parameters (on the
//               dp dim's ring, or the cp dim's when dp = 1).
//   uneven      first/last_stage_layers: the stage is priced on the largest stage's layers;
//               the last stage's turn is its layers and the head, so the head adds only what
//               it takes beyond the difference.
//   ranking     feasible first, by predicted step time.
//
// Worked example: 16 devices as 2 nodes × 8 (ib-2x8xa100), a model of 8 layers: (dp 1,
// pp 2, 8×1) puts one stage per node; its boundary crosses the 25 GB/s level once per
// microbatch, while dp 2 would all-reduce every gradient across it.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <vector>

#include "layout/pipeline_schedule.hpp"
#include "layout/plan.hpp"
#include "plan/candidate.hpp"
#include "plan/mesh_links.hpp"
#include "plan/model_spec.hpp"
#include "plan/moe.hpp"
#include "plan/topology.hpp"

namespace meshtp::plan {

struct LayoutRequest {
  Topology topology;
  ModelSpec model;  // model.batch: the global batch per step
  int devices = 0;
  std::vector<Strategy> strategies{Strategy::kAtp, Strategy::kTp1d};
  std::vector<int> chunks{1};
  int max_tp = 256;           // largest d1·d2 tried
  int max_microbatches = 256;  // the most microbatches tried per step
  layout::Runtime runtime = layout::Runtime::kMeshtp;
  // Context parallelism searched: every cp ≤ max_cp dividing the devices whose zigzag splits
  // the sequence (seq % 2cp), each with every mode of cp_comms (plan/context_parallel.hpp).
  // 1: none (the default: the search as before).
  int max_cp = 1;
  std::vector<layout::CpComm> cp_comms{layout::CpComm::kRing};
  // Also search uneven pipeline stages where the layers do not split evenly: the middle
  // stages ⌈L/pp⌉ layers each, the first and the last the rest, halved (Megatron-LM's
  // --decoder-first/last-pipeline-num-layers), e.g. 126 layers on 16 stages as 7 + 14·8 + 7.
  bool uneven_stages = false;
  // Mixture of experts (plan/moe.hpp): the search tries every ep dividing num_experts (at most
  // max_ep; 0: no limit) and every etp dividing tp whose groups tile a stage; the imbalance F
  // (≥ 1) multiplies the expert compute and the all-to-all (--moe-imbalance).
  int max_ep = 0;
  double moe_imbalance = 1.0;
  // Only the layouts this accepts are searched (unset: every one): `plan --emit` asks for the
  // best layout a framework can run (plan/emit.hpp). Not used by evaluate_layout.
  std::function<bool(const layout::Plan&)> accepts{};

  void validate() const;  // throws naming the value
};

struct LayoutCandidate {
  layout::Plan plan;  // dp, pp, microbatches, schedule, zero, recompute, mesh, strategy, chunks
  layout::Runtime runtime = layout::Runtime::kMeshtp;
  bool feasible = false;
  double t_step_s = 0;
  // t_step_s's band over the topology's sourced ranges (plan/bands.hpp): low ≤ t_step_s ≤
  // high, both t_step_s where the topology has no ranges. Set by evaluate_layout and for the
  // kept rows of search_layouts(request, keep); the rest of a search's rows carry t_step_s
  // in both (price_layout).
  double t_step_s_low = 0, t_step_s_high = 0;
  double t_stage_s = 0;  // one microbatch through one rank's layers (forward + backward)
  // Its forward alone (without recomputation: a third of the stage priced with none); 0:
  // a third of t_stage_s. DeepSpeed's lockstep schedule prices forwards and backwards apart.
  double t_forward_s = 0;
  double t_rerun_s = 0;  // meshtp, pp > 1: the rematerialised forward of those layers, per
                         // microbatch (megatron: 0)
  double t_compute_s = 0;  // the compute of t_stage_s + t_rerun_s (the rest: exposed TP comm)
  // Per microbatch, the vocabulary head on the last pipeline rank (head_s): the slowest
  // rank's extra, so every rank's turn in the schedule waits for it.
  double t_head_s = 0;
  double t_head_comm_s = 0;  // the part of t_head_s that is communication (head_comm_s)
  double t_optimizer_s = 0;  // per step: AdamW over the most loaded rank's parameters
  double bubble = 0;     // (p−1)/(m+p−1); interleaved (p−1)/(v·m+p−1)
  double t_p2p_s = 0;    // per step, on the critical path
  double t_dp_s = 0;     // per step
  // Context parallelism, per microbatch, inside t_stage_s: the attention core's compute
  // beyond the stage priced on s/cp tokens, and its exchange's exposed and hidden parts.
  double t_cp_compute_s = 0, t_cp_exposed_s = 0, t_cp_hidden_s = 0;
  // Mixture of experts, per microbatch, inside t_stage_s (plan/moe.hpp): the experts' grouped
  // GeMMs, router and permutation, the dispatch/combine all-to-alls, the etp collectives.
  double t_moe_compute_s = 0, t_moe_a2a_s = 0, t_moe_etp_s = 0;
  MemoryEstimate memory;
};

// t_step_s in the parts the price adds up (they sum to it): compute (the stage's, its
// re-run's and the head's) and exposed TP communication of the m microbatches, the pipeline
// bubble ((t_stage + t_rerun + t_head)·m·bubble/(1 − bubble), that is (p−1)/(v·m) of the
// busy time when interleaved), the pipeline transfers, the data-parallel gradient reduction
// and the optimizer step.
struct LayoutParts {
  double compute_s = 0, tp_comm_s = 0, bubble_s = 0, p2p_s = 0, dp_s = 0, optimizer_s = 0;
};
LayoutParts parts(const LayoutCandidate& c);

// The boundary rematerialisation of `runtime`, per microbatch: meshtp with pp > 1 re-runs
// the stage's forward, priced as full recomputation's surplus (full − none, both the
// stage's price without the rerun); megatron keeps the activations (0).
double rerun_s(layout::Runtime runtime, int pp, double full_s, double none_s);

// The vocabulary head of one microbatch (`mb`: its batch, vocab and hidden) on tp = d1·d2
// ranks, vocabulary-parallel (each rank holds V/tp of the embedding table and the logits):
//   logits      forward (M, V/tp, h), backward dX (M, h, V/tp) and dW (h, V/tp, M) products
//               (the topology's GemmModel)
//   cross-entropy  M·V/tp logits, forward and backward touches (core/op_costs.hpp)
//   embedding   M·h rows gathered and scattered back (first rank; counted only when pp = 1,
//               since with a pipeline it runs on another rank than the logits)
// with M = b·s tokens. 0 when the model has no vocabulary. Its communication is head_comm_s.
double head_s(const ModelSpec& mb, int tp, int pp, const Topology& topology);

// The head's and the embedding's collectives of one microbatch (M = b·s tokens, e bytes per
// element, h hidden) on the TP group of `plan`'s mesh, as `runtime` runs them, priced on
// `stage` (tp_topology: its mesh dims, and the whole group as one ring):
//   meshtp    (model/gpt.cpp, parallel/vocab_parallel.hpp) the embedding's all_reduce of
//             M·h (pp = 1); the stream gathered whole before the logits (an all_gather over
//             each mesh dim that shards it, inner dim first: parallel/activation_shard.hpp —
//             2D GeMM strategies dims 1 then 0, ATP dim 1, tp1d dim 0); the cross-entropy's
//             all_reduces of M (max) and 2M (sum and the target's logit); the logits'
//             backward all_reduce of M·h; the embedding's gradient gathered like the stream
//             (pp = 1)
//   megatron  (Megatron-LM's VocabParallelEmbedding, vocab_parallel_cross_entropy and the
//             head input's copy to the TP region) without sequence parallelism an all_reduce
//             of M·h forward (embedding, pp = 1) and backward (the head input's gradient);
//             with it a reduce_scatter and an all_gather of M·h instead of each all_reduce,
//             and an all_gather of the head input and of the embedding's gradient (pp = 1)
//             — the same bytes; the two small all_reduces
// 0 on one device or without a vocabulary.
double head_comm_s(const ModelSpec& mb, const layout::Plan& plan, layout::Runtime runtime,
                   const Topology& stage);

// The optimizer step over `params` parameters at the elementwise rate: the global gradient
// norm's read and AdamW (fp32 master weights, gradients and both moments), kGradNormTouches +
// kAdamWTouches per parameter (core/op_costs.hpp), fp32 whatever the precision. Clipping
// (kClipTouches) only runs when the norm exceeds its limit: not priced.
double optimizer_s(double params, const Topology& topology);

// What a layout's step moves over the links it crosses, and its head: the same for every
// virtual-stage count and ZeRO stage, so the search computes it once for all of them.
struct LayoutTraffic {
  RingParams pipe, data;    // the pipeline dim's link and the data dim's ring
  RingParams cp{};          // the cp dim's ring (context parallelism)
  RingParams edp{};         // the expert gradients' ring (mixture of experts)
  MoeRings moe{};           // the expert groups' links (plan/moe.hpp)
  double stream_bytes = 0;  // one rank's slice of a microbatch's residual stream
  double params_bytes = 0;  // one rank's parameters (= its gradients) but its experts'
  double expert_params_bytes = 0;  // its experts' (reduced over edp, plan/moe.hpp)
  double head_s = 0;        // head_s + head_comm_s of one microbatch on the last pipeline rank
  double head_comm_s = 0;   // its communication
  int layers = 1;           // blocks per pipeline rank: one data-parallel bucket each
  // The tied embedding's gradient on one rank of the first (and last) stage (the deepspeed
  // runtime all-reduces it at the flush); 0 when the head is untied.
  double tied_grad_bytes = 0;
};

// The layout's pipeline schedule run with its op times (layout::simulate): a rank's chunk
// forward a third of the stage and head, backward the rest and the re-run, each transfer
// one stream slice over the pipeline link. Empty where nothing reads it (megatron; no
// pipeline and no data parallelism).
struct PipelineRun {
  layout::ScheduleTiming timing;  // with the transfers
  double makespan_free_s = 0;     // the same schedule, transfers free
  double backward_s = 0;          // one backward op (a chunk's)
};
PipelineRun run_schedule(const LayoutCandidate& c, const LayoutTraffic& t);
// DeepSpeed v0.16.4's TrainSchedule (pipe/schedule.py) replayed on pp stages and m
// microbatches, forward and backward op times given: 2·(m + pp − 1) steps, in each a stage
// runs a forward or a backward (even stages forward on even steps, odd stages on odd ones,
// so neighbours always run opposite kinds), after exchanging with one neighbour — a forward
// step sends the previous step's gradient to and receives its input from stage s − 1, a
// backward step receives its gradient from and sends the previous output to stage s + 1 —
// each transfer blocking (pipe/p2p.py), so the pair starts it when both have finished the
// step before, one transfer after the other. The makespan.
double deepspeed_makespan(int pp, int m, double forward_s, double backward_s, double transfer_s);
// c.t_p2p_s, by c.runtime: meshtp the makespan the transfers add, megatron every crossing,
// deepspeed every step's send and receive one after the other (4·(m + p − 1) transfers).
double pipeline_p2p_s(const LayoutCandidate& c, const LayoutTraffic& t, const PipelineRun& run);
// c.t_dp_s: ZeRO 0–1 on meshtp, one all-reduce per block started as the block's last
// backward ends, one at a time on the data ring, priced as far as it outlasts the schedule
// (megatron: all of it, after the flush; deepspeed: also the tied embedding's all-reduce
// before it); ZeRO ≥ 1's all-gather, ZeRO ≥ 2's reduce-scatters and ZeRO-3's gathers not
// overlapped, but megatron's ZeRO 2–3 (Megatron-FSDP, FSDP2) hidden under each pass's compute
// but the first layer's (layout_search.cpp fsdp_exposed_s).
double data_parallel_s(const LayoutCandidate& c, const LayoutTraffic& t, const PipelineRun& run);
// Fills c.bubble, c.t_p2p_s, c.t_dp_s and c.t_step_s from c.plan, c.runtime, c.t_stage_s,
// c.t_rerun_s, c.t_head_s and c.t_optimizer_s (the price above); the second runs the schedule.
void price_layout(LayoutCandidate& c, const LayoutTraffic& t, const PipelineRun& run);
void price_layout(LayoutCandidate& c, const LayoutTraffic& t);

// The band of c's step time: c.plan priced by evaluate_layout with the request's topology at
// the ends and corners of its ranges (plan/bands.hpp); sets c.t_step_s_low and _high (both
// c.t_step_s without ranges).
void add_band(const LayoutRequest& request, LayoutCandidate& c);
// Ranked: feasible first, then by step time. Throws for a bad request.
std::vector<LayoutCandidate> search_layouts(const LayoutRequest& request);

// The same ranking, only its first `keep` layouts (every one when keep is 0). Layouts that
// cannot be among them are bounded out before the memory model prices them: once `keep`
// feasible layouts are kept, a layout whose step takes no less than the slowest kept ranks
// after it fitting or not; whole blocks of (virtual stages, ZeRO) go on the bound
// (t_stage + t_rerun)·m, their step without bubble or transfers. The kept are those the
// exhaustive ranking puts first, in its order (ties in the order enumerated).
struct LayoutSearch {
  std::vector<LayoutCandidate> ranked;
  std::int64_t searched = 0;  // layouts enumerated: the exhaustive ranking's length
  std::int64_t priced = 0;    // of those, priced in full (memory included)
  layout::Provenance made_for;  // the topology and model (plan/provenance.hpp)
};
LayoutSearch search_layouts(const LayoutRequest& request, std::size_t keep);

// One layout priced as the search prices it (the same stage prices, the same price_layout,
// the same memory model: `plan --3d --evaluate`), not searched: its dp, pp, microbatches,
// schedule, virtual stages, zero, recompute, mesh, strategy (sequence_parallel on an ATP or
// Megatron block is priced as tp1d, the planner's Megatron-SP), chunks. A layout that does
// not fit is priced (feasible false). Throws naming the value for a layout that cannot run:
// dp·pp·d1·d2 ≠ devices, a model that does not split (layers by pp·v, batch by dp·m, heads
// or hidden by the mesh), a schedule that cannot run (1f1b: m ≥ pp; interleaved: m % pp),
// or for the megatron runtime a ZeRO stage above 1. request.strategies, chunks, max_tp and
// max_microbatches are not used.
LayoutCandidate evaluate_layout(const LayoutRequest& request, const layout::Plan& plan);

// The schedule the search gives a layout: interleaved when v > 1, else 1f1b when m > 1,
// else gpipe.
layout::Schedule search_schedule(int microbatches, int virtual_stages);
// `plan --3d --evaluate`'s layout when no schedule is spelled out: `plan` with the search's
// schedule for its microbatches and virtual stages.
layout::Plan with_search_schedule(layout::Plan plan);
// How many ranked layouts `plan --3d` shows unless told (--top, meshtp.plan_3d(top=…)).
inline constexpr int kShownLayouts = 10;

// The topology a stage's d1·d2 ranks see: two levels (d1 members, then d2), the first's
// group bandwidth d2·B'₀ so that mesh_links gives each dim the B' its groups get in the full
// topology (hierarchical form: Eq. 3 on the 4-dim layout; graph form: routed rings of the
// (N/d2, d2) mesh, dim 0 priced as the longer ring's hop). The full topology's calibrated
// groups of shapes (d1, stride d2) and (d2, stride 1), its GeMM and elementwise rates, stay.
Topology tp_topology(const Topology& topology, int d1, int d2);
// The same on links already asked of the full topology (the search asks for every mesh).
Topology tp_topology(TopologyLinks& links, int d1, int d2);

std::ostream& operator<<(std::ostream& os, const LayoutCandidate& c);
// {"plan", "runtime", "feasible", "t_step_s", "t_step_s_low", "t_step_s_high", "t_stage_s", "t_rerun_s", "t_head_s",
//  "t_head_comm_s", …, "parts": {…}, "memory_gib",
//  "memory": {"params_gib", "grads_gib", "optimizer_gib", "activations_gib", "buffers_gib"}}
nlohmann::json to_json(const LayoutCandidate& c);
// `plan --3d --json`: {"layouts": the first `shown` ranked rows, "searched", "priced",
// "best": the first row (as in "layouts") when it is feasible, else null}; each row's "plan"
// carries made_for. Each row also has "band_overlaps": the ranks (1-based) of the other shown
// rows whose step-time band overlaps its own (band_overlaps): neither is known to be faster.
nlohmann::json to_json(const LayoutSearch& search, std::size_t shown);
// For each of the first `shown` rows, the 1-based ranks of the other shown rows whose bands
// [t_step_s_low, t_step_s_high] overlap its own.
std::vector<std::vector<int>> band_overlaps(const LayoutSearch& search, std::size_t shown);
// Why c does not fit a device of `memory_gib` ("does not fit: needs 91.2 GiB on its most loaded
// rank, the device has 80 GiB"); empty when it fits.
std::string does_not_fit(const LayoutCandidate& c, double memory_gib);
// `plan --3d --evaluate --json`: to_json(c) with "fits" and, when it does not, "does_not_fit".
nlohmann::json evaluation_to_json(const LayoutCandidate& c, double memory_gib);
// The same for the layout `request` priced: its plan carries the request's topology and model.
nlohmann::json evaluation_to_json(const LayoutRequest& request, const LayoutCandidate& c);

}  // namespace meshtp::plan
