#include "plan/context_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/op_costs.hpp"

namespace meshtp::plan {

std::optional<std::string> cp_invalid_reason(const ModelSpec& m, int tp, int cp,
                                             layout::CpComm comm) {
  if (cp < 1) return fmt::format("cp={} must be at least 1", cp);
  if (cp == 1) return std::nullopt;
  if (m.seq % (2 * cp) != 0) {
    return fmt::format("cp={}: seq={} of '{}' does not split into 2·cp={} chunks (the ring's "
                       "zigzag)",
                       cp, m.seq, m.name, 2 * cp);
  }
  if (m.heads % tp != 0) return fmt::format("heads={} are not divisible by tp={}", m.heads, tp);
  const std::int64_t heads = m.heads / tp;
  if (comm == layout::CpComm::kA2a && heads % cp != 0) {
    return fmt::format("--cp-comm a2a with cp={}: heads={} over tp={} leave {} per rank, not "
                       "divisible by cp={}",
                       cp, m.heads, tp, heads, cp);
  }
  if (comm == layout::CpComm::kA2aRing && cp_a2a_size(comm, cp, static_cast<int>(heads)) == 1) {
    return fmt::format("--cp-comm a2a+ring with cp={}: no a2a degree 1 < u < {} divides both cp "
                       "and the {} heads per TP rank (heads={}, tp={})",
                       cp, cp, heads, m.heads, tp);
  }
  return std::nullopt;
}

void check_cp(const ModelSpec& m, int tp, int cp, layout::CpComm comm) {
  if (auto reason = cp_invalid_reason(m, tp, cp, comm)) fail("{}", *reason);
}

namespace {

// The fused core's seconds for one query chunk of `rows` tokens at positions [first,
// first + rows) against the keys [0, first + rows), causal by position (core/op_costs.hpp
// flash_attention_flops with that offset), for `pairs` (sequence, head) pairs.
double flash_chunk_seconds(const GemmModel& gemm, double rows, double first, double head_dim,
                           double pairs, bool backward) {
  const auto q = static_cast<std::int64_t>(rows), at = static_cast<std::int64_t>(first);
  return gemm.attention_seconds(op_costs::flash_attention_flops(
      q, at + q, static_cast<std::int64_t>(head_dim), op_costs::kFlashBlockQ,
      op_costs::kFlashBlockK, at, pairs, backward));
}

// The unfused core's full products for `rows` queries against `keys` keys (QKᵀ, A·V;
// backward dS, dV, dQ, dK: core/gemm_model.hpp attention_seconds on a rectangle).
double products_seconds(const GemmModel& gemm, double rows, double keys, double head_dim,
                        double pairs, int element_bytes, bool backward) {
  return gemm.seconds(rows, keys, head_dim, element_bytes, pairs) +
         (backward ? 3 : 1) * gemm.seconds(rows, head_dim, keys, element_bytes, pairs);
}

}  // namespace

CpPrice cp_price(const ModelSpec& mb, std::int64_t layers, int tp, int cp, layout::CpComm comm,
                 const GemmModel& gemm, const RingParams& ring) {
  CpPrice out;
  if (cp == 1) return out;
  check_cp(mb, tp, cp, comm);
  const double s = mb.seq, b = mb.batch, d = mb.head_dim(), e = mb.element_bytes();
  const double heads = static_cast<double>(mb.heads) / tp;
  const double kv = std::max(1.0, static_cast<double>(mb.kv()) / tp);
  const int u = cp_a2a_size(comm, cp, static_cast<int>(mb.heads / tp));  // a2a degree
  const int r = cp / u;                                                   // ring degree
  const bool fused = mb.attention == layout::Attention::kFused;
  // The forward's runs of the core: full recomputation re-runs it, selective the unfused
  // one only (the fused core keeps its output and log-sum-exp: plan/planner.cpp).
  const double forwards =
      mb.recompute == Recompute::kFull || (mb.recompute == Recompute::kSelective && !fused) ? 2
                                                                                            : 1;
  const auto core = [&](double seq, double pairs, bool backward) {
    return fused ? flash_attention_seconds(gemm, seq, d, pairs, backward)
                 : attention_seconds(gemm, seq, d, pairs, mb.element_bytes(), backward);
  };
  // The core as the stage priced it: an s/cp-token core for each of the b·a/tp pairs.
  const double priced_f = core(s / cp, b * heads, false);
  const double priced_b = core(s / cp, b * heads, true);

  if (comm == layout::CpComm::kAllGather) {
    // The rank's queries, its two zigzag chunks of c = s/(2·cp) tokens, once K and V are
    // gathered. Fused, each against every key before its end (rank 0's: the first and the
    // last chunk; the zigzag gives every rank the same causal work).
    const double c = s / (2 * cp), pairs = b * heads;
    const auto queries = [&](bool backward) {
      if (fused) {
        return flash_chunk_seconds(gemm, c, 0, d, pairs, backward) +
               flash_chunk_seconds(gemm, c, s - c, d, pairs, backward);
      }
      // Unfused, the full products, as the ring's: the rank's s/cp queries against all s
      // keys.
      return products_seconds(gemm, s / cp, s, d, pairs, mb.element_bytes(), backward);
    };
    const double core_f = queries(false), core_b = queries(true);
    out.compute_s = layers * (forwards * (core_f - priced_f) + (core_b - priced_b));
    // K and V all-gathered over the cp group before each forward run, not overlapped (the
    // Llama 3 paper, §3.3.2: the gather is exposed, small beside the core under GQA); the
    // backward gathers them again and reduce-scatters dK, dV (Transformer Engine's
    // AttnFuncWithCPAndKVAllGather, which cites that section). Each rank's share:
    // (s/cp)·b·2·g_t·d·e bytes.
    const double share = (s / cp) * b * 2 * kv * d * e;
    const double gather = ring_collective_time(ring, cp, share);
    out.exposed_s = layers * (forwards + 2) * gather;
    out.step_compute_s = core_f;
    out.step_transfer_s = gather;
    return out;
  }

  // After the a2a, a ring of r ranks on (s/r)-token blocks for b·a/(tp·u) pairs (r = 1: the
  // a2a alone, the core on whole s). Unfused, each of the r steps runs a whole block's
  // products. Fused, the first step is the causal core on the rank's own zigzag chunks and
  // each later one half a block (a chunk against a whole block, or both against one chunk:
  // the causal tiles, Megatron-Core's zigzag "p2p"), at the fused core's rate.
  const double chunk = s / r, pairs = b * heads / u;
  const auto step = [&](bool backward) {
    if (!fused) return attention_seconds(gemm, chunk, d, pairs, mb.element_bytes(), backward);
    return gemm.attention_seconds((backward ? 5.0 : 2.0) * 2.0 * chunk * chunk * d * pairs / 2);
  };
  const double step_f = step(false), step_b = step(true);
  const double first_f = fused ? core(chunk, pairs, false) : step_f;
  const double first_b = fused ? core(chunk, pairs, true) : step_b;
  out.compute_s = layers * (forwards * (first_f + (r - 1) * step_f - priced_f) +
                            (first_b + (r - 1) * step_b - priced_b));
  double per_layer = 0, hidden = 0;
  if (r > 1) {
    const double kv_bytes = 2 * chunk * b * std::max(1.0, kv / u) * d * e;
    const double t = ring.t_launch_s + ring.l_sync_s + kv_bytes / ring.bw_bytes_per_s;
    out.step_compute_s = step_f;
    out.step_transfer_s = t;
    per_layer += (r - 1) * (forwards * std::max(0.0, t - step_f) + std::max(0.0, t - step_b));
    hidden += (r - 1) * (forwards * std::min(t, step_f) + std::min(t, step_b));
  }
  if (u > 1) {
    // q, k, v in and the output back, each way; per rank (u−1)/u of its (s/cp)·b·(…)·d values.
    const double kv_a2a = std::max(kv, static_cast<double>(u));
    const double message = (s / cp) * b * (heads + 2 * kv_a2a + heads) * d * e;
    const double a2a = ring_collective_time(ring, u, message / u);
    per_layer += (forwards + 1) * a2a;
  }
  out.exposed_s = layers * per_layer;
  out.hidden_s = layers * hidden;
  return out;
}

std::vector<layout::CpComm> parse_cp_comms(std::string_view list) {
  std::vector<layout::CpComm> out;
  for (std::string_view rest = list;;) {
    const std::size_t comma = rest.find(',');
    out.push_back(layout::parse<layout::CpComm>(rest.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

layout::Plan with_context_parallel(layout::Plan slice, int cp, layout::CpComm comm,
                                   int first_stage_layers, int last_stage_layers) {
  slice.cp = cp;
  slice.cp_comm = comm;
  slice.first_stage_layers = first_stage_layers;
  slice.last_stage_layers = last_stage_layers;
  slice.validate();
  return slice;
}

}  // namespace meshtp::plan
