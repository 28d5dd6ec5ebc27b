// Mixture of experts' price (docs/moe.md): expert parallelism with MoE parallel folding as
// Megatron-Core runs it (Liu et al. 2025, "MoE Parallel Folding", arXiv 2504.14960).
//
//   folding   attention runs on tp × cp × dp ranks of a pipeline stage (layout/plan.hpp), the
//             experts on etp × ep × edp of the same ranks, etp innermost, then ep, then edp
//             (Megatron-Core's "tp-ep-dp-pp" generator for the experts):
//               edp = tp·cp·dp / (etp·ep)            an integer, or the layout is refused
//             num_experts % ep, f_e % etp, and the expert groups must tile a stage's ranks
//             (etp·ep divides or is a multiple of tp·cp) — each refused naming the numbers.
//   tokens    a rank's attention holds b·s/cp tokens of a microbatch, sharded over tp as
//             sequence parallelism does (Megatron-LM requires it with EP and tp > 1), so it
//             dispatches T = b·s/(cp·tp) tokens, each to k experts.
//   all-to-all  dispatch and combine each move T·k·h·e·(ep−1)/ep bytes per rank, forward and
//             backward (4 per MoE layer; 6 under full recomputation), × the imbalance F (the
//             slowest rank receives F× the mean). Priced on the levels the ep group crosses:
//             ep = ep_in × ep_out, ep_in of them inside the innermost level (a node) or inside
//             a stage's contiguous tp·cp ranks, the rest beyond; a rank's bytes to the
//             (ep_in − 1) near peers at the inner link's B', to the ep − ep_in far ones at the
//             outer link's, plus (ep − 1) latencies and a launch.
//   etp       the dispatched tokens all-gathered over etp before the experts and the outputs
//             reduce-scattered after (T·k·h·e·F per rank each), forward and backward.
//   experts   each rank runs E/ep local experts as one grouped GeMM (the topology's GemmModel
//             with batch = E/ep: its shape efficiency, not the peak), M = T·etp·k·ep/E·F tokens
//             per expert, widths f_e/etp: per linear (in → out) forward (M, out, in), backward
//             data (M, in, out) and weight (in, out, M). The router h → E on T tokens likewise.
//             Permutation and unpermutation touch T·k·h elements each way, per pass, at the
//             elementwise rate.
//   shared    shared experts run with the attention's tensor parallelism (Megatron-Core: "the
//             parallelism patterns of the shared experts follow the settings of the dense
//             part"): the stage prices them as a dense MLP of shared·f_e (layout_search).
//   gradients expert gradients reduce over the edp ranks that hold the same experts; ZeRO
//             shards the expert optimizer state over edp.
#pragma once

#include <optional>
#include <string>

#include "core/gemm_model.hpp"
#include "layout/plan.hpp"
#include "plan/mesh_links.hpp"
#include "plan/model_spec.hpp"

namespace meshtp::plan {

// edp = tp·cp·dp / (etp·ep) (1 for a dense model).
int expert_dp(const layout::Plan& p);

// Why `p`'s ep and etp cannot run `model` (nullopt when they can), naming the numbers: ep or
// etp on a dense model, num_experts % ep, f_e % etp, the expert groups not tiling a stage's
// tp·cp·dp ranks.
std::optional<std::string> moe_invalid_reason(const ModelSpec& model, const layout::Plan& p);
void check_moe(const ModelSpec& model, const layout::Plan& p);  // the same, thrown

// --moe-imbalance: at least 1 (1: balanced).
void check_imbalance(double imbalance);

// The groups the expert exchange runs on (layout_search builds them from the topology).
struct MoeRings {
  RingParams ep_inner{}, ep_outer{};  // the ep group's near and far links
  int ep_inner_size = 1;              // ep_in (ep when the group stays on one link)
  RingParams etp{};                   // the etp group
  RingParams edp{};                   // the expert gradients' ring
};

struct MoePrice {
  double compute_s = 0;      // grouped GeMMs, router, permutation
  double a2a_s = 0;          // dispatch and combine
  double etp_comm_s = 0;     // the etp all-gathers and reduce-scatters
  double forward_s = 0;      // one forward of all of it (the runtime's re-run, pp > 1)
  double forward_compute_s = 0;
  double total_s() const { return compute_s + a2a_s + etp_comm_s; }
};

// One microbatch `mb` (mb.batch sequences of mb.seq = s/cp tokens: a rank's attention share)
// through `moe_layers` MoE layers of the layout `p`; mb.recompute full re-runs the forward.
MoePrice moe_price(const ModelSpec& mb, std::int64_t moe_layers, const layout::Plan& p,
                   double imbalance, const GemmModel& gemm, double elementwise_bytes_per_s,
                   const MoeRings& rings);

// One all-to-all of `bytes` per rank over an ep group (the formula above).
double a2a_time(const MoeRings& rings, int ep, double bytes);

// Per rank, elements: what one MoE layer's experts keep for the backward on a microbatch of
// mb (A = T·k·F assignments; the etp gather hands each rank its etp peers' rows too, etp·A
// rows of which it computes an out1 = f_e/etp shard: the gathered input etp·h, FC1's output
// and the activation etp·out1 each (= f_e), and the experts' outputs back on the token's
// rank, h, which the gates' gradient reads; the router's logits and probabilities T·E·2), and
// the backward's buffers at its peak, the experts' backward (the gathered output gradient and
// the input gradient 2·etp·h, the activation's and FC1's gradients 2·etp·out1:
// A·(2·etp·h + 2·etp·out1)), as meshtp's layer (parallel/moe.hpp) and Megatron-Core's (its
// unpermute keeps the experts' outputs) hold them.
// `operands`: the part of kept that only GeMMs read, the gathered rows and the activation
// (A·etp·(h + f_e/etp)), which meshtp's layer stores in bf16 under a 2-byte precision.
struct MoeFloats {
  double kept = 0, buffers = 0, operands = 0;
};
MoeFloats moe_floats(const ModelSpec& mb, const layout::Plan& p, double imbalance);

// One rank's expert parameters for `moe_layers` MoE layers: E/ep experts of expert_params()
// / etp each, and the router (h·E, replicated).
double expert_params_per_rank(const ModelSpec& model, const layout::Plan& p,
                              std::int64_t moe_layers);

// The dense model a MoE model's attention is priced with: the MoE fields cleared and the MLP
// `ffn` wide (layout_search prices a MoE layer's attention as 2·stage(f) − stage(2f), or with
// shared experts as stage(shared·f_e)).
ModelSpec dense_part(const ModelSpec& model, std::int64_t ffn);

}  // namespace meshtp::plan
