#include "plan/context_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"

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
  const double forwards = mb.recompute == Recompute::kNone ? 1 : 2;
  // The core as the stage priced it: one (s/cp)² block per pair of b·a/tp.
  const double priced_f = attention_seconds(gemm, s / cp, d, b * heads, mb.element_bytes(), false);
  const double priced_b = attention_seconds(gemm, s / cp, d, b * heads, mb.element_bytes(), true);
  // The ring's step: (s/r)-token blocks for the pairs left after the a2a (a/(tp·u) heads).
  const double chunk = s / r, pairs = b * heads / u;
  const double step_f = attention_seconds(gemm, chunk, d, pairs, mb.element_bytes(), false);
  const double step_b = attention_seconds(gemm, chunk, d, pairs, mb.element_bytes(), true);
  // r steps of the ring (one when a2a alone, then on whole s: r = 1, chunk = s).
  out.compute_s = layers * (forwards * (r * step_f - priced_f) + (r * step_b - priced_b));
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
