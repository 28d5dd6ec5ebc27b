// Context parallelism's price: cp ranks each hold s/cp tokens of every sequence (ordered
// [tp, cp, pp, dp], layout/plan.hpp). Everything but the attention core runs on s/cp tokens
// (the stage is priced on them); the core needs every key for its queries:
//
//   ring      (Megatron-Core's "p2p"; Liu et al., Ring Attention) cp steps per pass, each one
//             (s/cp)×(s/cp) block of the core for the rank's b·a/tp (sequence, head) pairs,
//             while K and V of the next block travel one hop: 2·(s/cp)·b·g_t·d·e bytes, g_t =
//             max(1, g/tp) KV heads per TP rank (replicated below tp, as Megatron-LM does).
//             The transfer hides behind the step's compute; what is left is exposed:
//               exposed per pass = (cp − 1)·max(0, T_kv − C_step)
//             the backward moves K, V one way and dK, dV the other (full-duplex links: the
//             same T_kv), against the backward step's compute.
//   a2a       (Ulysses; Jacobs et al. 2023) all-to-all of q, k, v before the core and of its
//             output after (backward: the gradients, the same volumes), each rank sending
//             (cp−1)/cp of its (s/cp)·b·(a/tp + 2·max(g_t, cp))·d values (KV heads replicated
//             up to cp where fewer); the core then runs whole s for a/(tp·cp) heads. Not
//             overlapped. Needs a/tp divisible by cp.
//   a2a+ring  (Megatron-Core's hierarchical "a2a+p2p") a2a over the largest u < cp dividing
//             cp and a/tp, then a ring of cp/u ranks on s/(cp/u)-token blocks.
//   all_gather (the Llama 3 paper, §3.3.2; Megatron-Core's "allgather") K and V all-gathered
//             over the cp group, then the core for the rank's own queries (its two zigzag
//             chunks) against every key before them. The gather is exposed, as the paper
//             says; the backward gathers again and reduce-scatters dK, dV (Transformer
//             Engine's AttnFuncWithCPAndKVAllGather): each rank's share (s/cp)·b·2·g_t·d·e,
//             (forward runs + 2) collectives per layer.
// Compute: unfused, the core's full products, s²/cp per rank in every mode (all_gather: the
// rank's s/cp queries against all s keys); the stage priced on s/cp tokens holds one (s/cp)²
// block of them, so cp − 1 more (ring) are added. Fused
// (mb.attention, core/gemm_model.hpp flash_attention_seconds), the causal tiles: the ring's
// first step the causal core on the rank's own chunks (what the stage priced), each later
// step half a block; all_gather the two chunks' tiles against the keys before them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/gemm_model.hpp"
#include "layout/plan.hpp"
#include "layout/vocabulary.hpp"
#include "plan/mesh_links.hpp"
#include "plan/model_spec.hpp"

namespace meshtp::plan {

struct CpPrice {
  double compute_s = 0;  // the core's compute beyond the stage priced on s/cp tokens
  double exposed_s = 0;  // communication not hidden by the core
  double hidden_s = 0;   // ring transfers hidden by it
  double step_compute_s = 0, step_transfer_s = 0;  // ring: one forward step's, for reports
};

using layout::cp_a2a_size;  // (layout/plan.hpp: the runtime's layer uses it too)

// Why (model, tp, cp, comm) cannot run, naming the numbers (nullopt when it can): seq %
// (2·cp) for the ring's zigzag, heads/tp % cp for a2a, no a2a degree for a2a+ring.
std::optional<std::string> cp_invalid_reason(const ModelSpec& model, int tp, int cp,
                                             layout::CpComm comm);
// The same, thrown.
void check_cp(const ModelSpec& model, int tp, int cp, layout::CpComm comm);

// --cp-comm's list for the search ("ring,a2a"): the modes in order; an unknown one is refused
// naming it and the valid names.
std::vector<layout::CpComm> parse_cp_comms(std::string_view list);

// --evaluate's context parallelism: `slice`, the layout of one context slice's devices/cp
// ranks, with cp, its mode and the stage split set; validated (throws naming the value).
layout::Plan with_context_parallel(layout::Plan slice, int cp, layout::CpComm comm,
                                   int first_stage_layers, int last_stage_layers);

// One microbatch `mb` (whole sequences: mb.seq = s) of `layers` layers on a cp group with
// `ring` its link, each rank tensor-parallel over tp; mb.attention the core the stage priced;
// mb.recompute re-runs the forward's share (full: once more; selective: the unfused core's).
CpPrice cp_price(const ModelSpec& mb, std::int64_t layers, int tp, int cp, layout::CpComm comm,
                 const GemmModel& gemm, const RingParams& ring);

}  // namespace meshtp::plan
