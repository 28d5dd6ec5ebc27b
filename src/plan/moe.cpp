#include "plan/moe.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/error.hpp"

namespace meshtp::plan {

int expert_dp(const layout::Plan& p) {
  const int stage = p.mesh[0] * p.mesh[1] * p.cp * p.dp;
  const int group = p.expert_tp() * p.ep;
  return group > 0 && stage % group == 0 ? stage / group : 0;
}

std::optional<std::string> moe_invalid_reason(const ModelSpec& m, const layout::Plan& p) {
  const int tp = p.mesh[0] * p.mesh[1];
  if (p.ep < 1) return fmt::format("ep={} must be at least 1", p.ep);
  if (p.etp < 0) return fmt::format("etp={} must be at least 0 (0: tp)", p.etp);
  if (!m.is_moe()) {
    if (p.ep > 1 || (p.etp > 0 && p.etp != tp)) {
      return fmt::format("ep={} etp={}: model '{}' has no experts (num_experts=0)", p.ep, p.etp,
                         m.name);
    }
    return std::nullopt;
  }
  const int etp = p.expert_tp();
  if (m.num_experts % p.ep != 0) {
    return fmt::format("num_experts={} of '{}' do not split over ep={}", m.num_experts, m.name,
                       p.ep);
  }
  if (m.expert_ffn() % etp != 0) {
    return fmt::format("moe_ffn_hidden={} of '{}' does not split over etp={}", m.expert_ffn(),
                       m.name, etp);
  }
  const int stage = tp * p.cp * p.dp, inner = tp * p.cp, group = etp * p.ep;
  if (stage % group != 0) {
    return fmt::format("etp={} × ep={} = {} does not divide a stage's tp={} × cp={} × dp={} = {} "
                       "ranks (expert data parallelism edp = {}/{} is not an integer)",
                       etp, p.ep, group, tp, p.cp, p.dp, stage, stage, group);
  }
  if (inner % etp != 0 || (inner % group != 0 && group % inner != 0)) {
    return fmt::format("etp={} × ep={} = {} and a stage's contiguous tp={} × cp={} = {} ranks: "
                       "one must divide the other, and etp divide {} (the expert groups tile "
                       "the attention's)",
                       etp, p.ep, group, tp, p.cp, inner, inner);
  }
  return std::nullopt;
}

void check_moe(const ModelSpec& m, const layout::Plan& p) {
  if (auto reason = moe_invalid_reason(m, p)) fail("{}", *reason);
}

void check_imbalance(double imbalance) {
  MESHTP_CHECK(std::isfinite(imbalance) && imbalance >= 1,
               "--moe-imbalance={} must be at least 1 (1: balanced; F: the slowest expert rank "
               "gets F× the mean tokens)",
               imbalance);
}

double a2a_time(const MoeRings& r, int ep, double bytes) {
  if (ep <= 1) return 0;
  const int inner = std::min(r.ep_inner_size, ep);
  const RingParams& far = inner < ep ? r.ep_outer : r.ep_inner;
  double t = r.ep_inner.t_launch_s + (ep - 1) * std::max(r.ep_inner.l_sync_s, far.l_sync_s);
  t += bytes * (inner - 1) / ep / r.ep_inner.bw_bytes_per_s;
  if (inner < ep) t += bytes * (ep - inner) / ep / r.ep_outer.bw_bytes_per_s;
  return t;
}

namespace {

// The widths of an expert's linears on one etp rank: (in, out) of FC1 and FC2.
struct ExpertLinears {
  double in1, out1, in2, out2;
};
ExpertLinears expert_linears(const ModelSpec& m, int etp) {
  const double h = m.hidden, fe = static_cast<double>(m.expert_ffn()) / etp;
  const double up = m.activation == layout::Activation::kSwiglu ? 2 * fe : fe;
  return {h, up, fe, h};
}

// Dispatched tokens per rank: b·(s/cp)/tp (mb.seq is already s/cp).
double dispatched_tokens(const ModelSpec& mb, const layout::Plan& p) {
  return static_cast<double>(mb.tokens()) / (p.mesh[0] * p.mesh[1]);
}

}  // namespace

MoePrice moe_price(const ModelSpec& mb, std::int64_t moe_layers, const layout::Plan& p,
                   double imbalance, const GemmModel& gemm, double elementwise_bytes_per_s,
                   const MoeRings& rings) {
  MoePrice out;
  if (!mb.is_moe() || moe_layers == 0) return out;
  check_moe(mb, p);
  check_imbalance(imbalance);
  const int etp = p.expert_tp(), ep = p.ep, e = mb.element_bytes();
  const double T = dispatched_tokens(mb, p), k = static_cast<double>(mb.top_k), F = imbalance;
  const double E = static_cast<double>(mb.num_experts), h = mb.hidden;
  const double local = E / ep;                       // experts on a rank
  const double M = T * etp * k * ep / E * F;         // tokens per local expert
  const ExpertLinears l = expert_linears(mb, etp);
  const auto linear = [&](double in, double outw, bool backward) {
    return backward ? gemm.seconds(M, in, outw, e, local) + gemm.seconds(in, outw, M, e, local)
                    : gemm.seconds(M, outw, in, e, local);
  };
  const auto router = [&](bool backward) {
    return backward ? gemm.seconds(T, h, E, e) + gemm.seconds(h, E, T, e) : gemm.seconds(T, E, h, e);
  };
  // Permute and unpermute: T·k·h read and written, each way.
  const double permute = 2 * 2 * T * k * F * h * e / elementwise_bytes_per_s;
  const double fwd = linear(l.in1, l.out1, false) + linear(l.in2, l.out2, false) + router(false) + permute;
  const double bwd = linear(l.in1, l.out1, true) + linear(l.in2, l.out2, true) + router(true) + permute;
  const double bytes = T * k * h * e * F;
  const double a2a = 2 * a2a_time(rings, ep, bytes);  // dispatch and combine
  // The etp all-gather of the dispatched tokens and the reduce-scatter of the outputs.
  const double etp_comm = etp > 1 ? 2 * ring_collective_time(rings.etp, etp, bytes) : 0;
  const double forwards = mb.recompute == Recompute::kFull ? 2 : 1;
  const double n = static_cast<double>(moe_layers);
  out.compute_s = n * (forwards * fwd + bwd);
  out.a2a_s = n * (forwards + 1) * a2a;
  out.etp_comm_s = n * (forwards + 1) * etp_comm;
  out.forward_compute_s = n * fwd;
  out.forward_s = n * (fwd + a2a + etp_comm);
  return out;
}

MoeFloats moe_floats(const ModelSpec& mb, const layout::Plan& p, double imbalance) {
  if (!mb.is_moe()) return {};
  const int etp = p.expert_tp();
  const double T = dispatched_tokens(mb, p), k = static_cast<double>(mb.top_k), F = imbalance;
  const ExpertLinears l = expert_linears(mb, etp);
  const double assignments = T * k * F;
  MoeFloats f;
  f.kept = assignments * (etp * (l.in1 + l.out1 + l.in2) + l.out2) +
           2 * T * static_cast<double>(mb.num_experts);
  f.buffers = assignments * (2 * etp * l.in1 + 2 * etp * l.out1);
  f.operands = assignments * etp * (l.in1 + l.in2);
  return f;
}

double expert_params_per_rank(const ModelSpec& m, const layout::Plan& p, std::int64_t moe_layers) {
  if (!m.is_moe()) return 0;
  const double per_layer = static_cast<double>(m.num_experts) / p.ep * m.expert_params() / p.expert_tp() +
                           static_cast<double>(m.hidden) * static_cast<double>(m.num_experts);
  return static_cast<double>(moe_layers) * per_layer;
}

ModelSpec dense_part(const ModelSpec& model, std::int64_t ffn) {
  ModelSpec d = model;
  static_cast<layout::ModelShape&>(d) = model.without_experts();
  d.ffn_hidden = ffn;
  return d;
}

}  // namespace meshtp::plan
