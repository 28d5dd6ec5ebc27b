#include "plan/atp_cost.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"

namespace meshtp::plan {

double atp_comm_time(const ModelSpec& m, int d1, int d2, double b1, double b2) {
  const double h = m.hidden;
  double per_token = 0;  // 7h/(d1·B2) + 2h/(d2·B1), seconds per token per byte-element
  if (d2 > 1) per_token += 7.0 * h / (d1 * b2);
  if (d1 > 1) per_token += 2.0 * h / (d2 * b1);
  return 2.0 * m.layers * static_cast<double>(m.tokens()) * m.element_bytes() * per_token;
}

std::optional<std::string> atp_invalid_reason(const ModelSpec& m, int d1, int d2, int chunks) {
  return layout::atp_block_invalid_reason(
      {.d1 = d1, .d2 = d2, .batch = m.batch, .hidden = m.hidden, .heads = m.heads,
       .chunks = chunks});
}

AtpEstimate atp_estimate(const ModelSpec& m, const MeshLinks& links, int chunks,
                         double flops_per_s, const ElementwiseEstimate& elementwise) {
  const int d1 = links.mesh[0], d2 = links.mesh[1];
  if (auto reason = atp_invalid_reason(m, d1, d2, chunks)) fail("ATP on {}x{}: {}", d1, d2,
                                                                *reason);
  MESHTP_CHECK(flops_per_s > 0, "flops_per_s={} must be positive", flops_per_s);
  const double n = static_cast<double>(d1) * d2;
  const double M = static_cast<double>(m.tokens());
  const double h = m.hidden, b = m.batch, s = m.seq, e = m.element_bytes();

  AtpEstimate est;
  est.chunks = chunks;
  // (name, forward FLOPs of the op over all ranks); the LayerNorms' are elementwise.hpp's.
  const std::pair<const char*, double> shapes[] = {
      {"ln1", 0},
      {"qkv", 2 * M * h * 3 * h},
      {"attention", 4 * b * s * s * h},
      {"proj", 2 * M * h * h},
      {"ln2", 0},
      {"mlp1", 2 * M * h * 4 * h},
      {"mlp2", 2 * M * 4 * h * h},
  };
  const std::vector<layout::AtpCall> traffic = layout::atp_block_traffic(
      {.d1 = d1, .d2 = d2, .tokens = m.tokens(), .hidden = m.hidden, .chunks = chunks,
       .element_bytes = static_cast<int>(e)});
  double comm_dim[2][2] = {{0, 0}, {0, 0}};  // [backward][mesh dim]: the pass's calls there
  for (const bool backward : {false, true}) {
    for (const auto& [name, flops] : shapes) {
      AtpOp a;
      a.name = name;
      a.backward = backward;
      a.flops_per_rank = flops / n * (backward ? 2 : 1);
      a.compute_s = a.flops_per_rank / flops_per_s;
      for (const layout::AtpCall& call : traffic) {
        if (call.op != a.name || call.backward != backward) continue;
        a.calls.push_back(call);
        a.sent_bytes += call.bytes_per_rank();
        const double t = call.launches * collective_time(links.dims[static_cast<std::size_t>(
                                                             call.mesh_dim)],
                                                         call.kind, call.message_bytes);
        a.comm_s += t;
        comm_dim[backward ? 1 : 0][call.mesh_dim] += t;
      }
      (backward ? est.compute_bwd_s : est.compute_fwd_s) += a.compute_s;
      (backward ? est.comm_bwd_s : est.comm_fwd_s) += a.comm_s;
      est.ops.push_back(std::move(a));
    }
  }
  const double c = chunks;
  const double comm_fwd = est.comm_fwd_s;  // every chunk's calls, each with its latency
  const double gemm_bwd = est.compute_bwd_s;
  est.elementwise_fwd_s = elementwise.forward_s;
  est.elementwise_bwd_s = elementwise.backward_s;
  est.compute_fwd_s += elementwise.forward_s;
  est.compute_bwd_s += elementwise.backward_s;
  const double compute_fwd = est.compute_fwd_s;
  // The pipeline over chunks: each resource (compute, dim 0's links, dim 1's links) is busy
  // for its own total; after the first chunk the busiest one sets the pace.
  const double busiest_fwd = std::max({compute_fwd, comm_dim[0][0], comm_dim[0][1]});
  est.forward_s = (compute_fwd + comm_fwd) / c + (c - 1) / c * busiest_fwd;
  // Backward, per linear: every chunk's dX GeMM starts its collectives, then the dW GeMM
  // runs under them, then each chunk's elementwise ops follow its collectives. Only the
  // first chunk's dX and the last chunk's elementwise ops cannot overlap communication.
  const double dx = gemm_bwd / 2, dw = gemm_bwd / 2, ew = elementwise.backward_s;
  const double comm_bwd_pipelined =
      est.comm_bwd_s / c + (c - 1) / c * std::max(comm_dim[1][0], comm_dim[1][1]);
  est.backward_s =
      (dx + ew) / c + std::max(dw + (c - 1) / c * (dx + ew), comm_bwd_pipelined);

  double recompute_compute = 0, recompute_comm = 0;
  switch (m.recompute) {
    case Recompute::kNone: break;
    case Recompute::kSelective:
      recompute_compute = 4 * b * s * s * h / n / flops_per_s + elementwise.softmax_forward_s;
      est.recompute_s = recompute_compute;
      break;
    case Recompute::kFull:
      recompute_compute = compute_fwd;
      recompute_comm = comm_fwd;
      est.recompute_s = est.forward_s;
      break;
  }
  est.layer_s = est.forward_s + est.backward_s + est.recompute_s;
  const double layers = m.layers;
  est.t_step_s = layers * est.layer_s;
  est.t_comm_s = layers * (comm_fwd + est.comm_bwd_s + recompute_comm);
  est.t_compute_s = layers * (compute_fwd + est.compute_bwd_s + recompute_compute);
  return est;
}

}  // namespace meshtp::plan
