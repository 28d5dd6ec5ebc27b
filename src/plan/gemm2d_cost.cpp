#include "plan/gemm2d_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <ostream>

#include "core/error.hpp"

namespace meshtp::plan {

// ---- SUMMA panels ----------------------------------------------------------------------------

double library_segment_bytes(CollectiveKind kind, int p, double bytes) {
  constexpr double kKiB = 1024;
  double seg = 0;
  if (kind == CollectiveKind::kReduce) {
    seg = p > 0.0410 / kKiB * bytes + 9.7128   ? 1 * kKiB
          : p > 0.0033 / kKiB * bytes + 1.6761 ? 32 * kKiB
                                                : 64 * kKiB;
  } else {
    MESHTP_CHECK(kind == CollectiveKind::kBroadcast,
                 "library_segment_bytes: a broadcast or a reduce, not {}", layout::name(kind));
    seg = p < 1.6134e-6 * bytes + 2.1102   ? 128 * kKiB
          : p < 2.3679e-6 * bytes + 1.1787 ? 64 * kKiB
          : p < 3.2118e-6 * bytes + 8.7936 ? 32 * kKiB
                                           : 128 * kKiB;
  }
  return std::min(seg, bytes);
}

namespace {

// A chain of P ranks broadcasting or reducing `panel_bytes` in segments (summa_panel_time),
// counting `fill_hops` of the last segment's P−1 hops.
double chain_time(const RingParams& ring, int p, double panel_bytes, int packets,
                  CollectiveKind kind, int fill_hops) {
  if (p <= 1 || panel_bytes <= 0) return 0;
  const double seg = packets > 0 ? panel_bytes / packets
                                 : library_segment_bytes(kind, p, panel_bytes);
  const double d = packets > 0 ? packets : std::ceil(panel_bytes / seg);
  const double last = panel_bytes - (d - 1) * seg;
  return ring.t_launch_s + (d - 1) * (ring.l_sync_s + seg / ring.bw_bytes_per_s) +
         fill_hops * (ring.l_sync_s + last / ring.bw_bytes_per_s);
}

}  // namespace

double summa_panel_time(const RingParams& ring, int p, double panel_bytes, int packets,
                        CollectiveKind kind) {
  return chain_time(ring, p, panel_bytes, packets, kind, p - 1);
}

double summa_panel_interval(const RingParams& ring, int p, double panel_bytes, int packets) {
  return chain_time(ring, p, panel_bytes, packets, CollectiveKind::kBroadcast, 1);
}

int summa_best_packets(const RingParams& ring, int p, double panel_bytes) {
  // d/dD [(D+P−2)(L + x/(D·BW))] = 0  →  D* = sqrt((P−2)·x / (BW·L)). Packets are at least
  // 4 KiB, so with L = 0 the answer is finite.
  constexpr double kMinPacket = 4096;
  const int max_packets = static_cast<int>(std::clamp(panel_bytes / kMinPacket, 1.0, 1e6));
  if (p <= 2) return 1;
  if (ring.l_sync_s <= 0) return max_packets;
  const double best = std::sqrt((p - 2) * panel_bytes / (ring.bw_bytes_per_s * ring.l_sync_s));
  int chosen = 1;
  double chosen_t = 1e300;
  for (const double c : {std::floor(best), std::ceil(best)}) {
    const int d = static_cast<int>(std::clamp(c, 1.0, static_cast<double>(max_packets)));
    const double t = summa_panel_time(ring, p, panel_bytes, d);
    if (t < chosen_t) {
      chosen_t = t;
      chosen = d;
    }
  }
  return chosen;
}

// ---- time ------------------------------------------------------------------------------------

PipelineEstimate gemm2d_estimate(Algorithm algorithm, const Gemm2dShape& s,
                                 const Gemm2dParams& params, const MeshLinks& links,
                                 const GemmModel& gemm_model, double step_overhead_s) {
  const Gemm2dTraffic traffic = gemm2d_traffic(algorithm, s, params);  // validates
  MESHTP_CHECK(links.mesh[0] == s.nr && links.mesh[1] == s.nc,
               "links are for mesh {}x{} but the GeMM runs on {}x{}", links.mesh[0],
               links.mesh[1], s.nr, s.nc);
  MESHTP_CHECK(gemm_model.flops_per_s() > 0, "GeMM rate {} FLOP/s must be positive",
               gemm_model.flops_per_s());
  const bool os = s.dataflow == Dataflow::kOS;
  // The input direction and the output direction (OS: both are inputs).
  const Direction in_dir = s.dataflow == Dataflow::kLS ? Direction::kVertical
                                                       : Direction::kHorizontal;
  auto ring = [&](Direction d) -> const RingParams& {
    const DimLinks& dl = links.dims[d == Direction::kVertical ? 0 : 1];
    return s.moves_output(d) ? dl.reduce_scatter : dl.all_gather;
  };
  // One launch of a direction's traffic: a ring collective of message/P per rank, a
  // pipelined SUMMA panel, or one send/recv step (its launch is charged apart below).
  auto launch = [&](const DirectionTraffic& t) {
    const RingParams& r = ring(t.direction);
    const int p = t.group_size;
    switch (t.kind) {
      case CollectiveKind::kAllGather:
      case CollectiveKind::kReduceScatter:
        return ring_collective_time(r, p, t.message_bytes / p);
      case CollectiveKind::kBroadcast:
      case CollectiveKind::kReduce:
        return summa_panel_time(r, p, t.message_bytes, params.summa_packets, t.kind);
      case CollectiveKind::kSendRecv:
        return r.l_sync_s + t.message_bytes / r.bw_bytes_per_s;
      default:
        return 0.0;
    }
  };
  const double c_v = launch(traffic.vertical), c_h = launch(traffic.horizontal);
  // One partial GeMM: the rank's output block (m/nr)×(n/nc) and the depth its FLOPs give,
  // 2·(m/nr)·(n/nc)·k_call = flops/calls. Exact for OS (k sliced); for LS and RS, whose
  // slices cut the output instead, the same FLOPs on a block of the same area.
  const double calls = traffic.gemm_calls;
  const double m_call = static_cast<double>(s.m) / s.nr, n_call = static_cast<double>(s.n) / s.nc;
  const double k_call = s.flops_per_rank() / calls / (2 * m_call * n_call);
  const double g = gemm_model.seconds(m_call, n_call, k_call, s.element_bytes) + step_overhead_s;
  const double gemm = calls * g;

  PipelineEstimate e;
  e.compute_s = gemm;
  e.iterations = traffic.gemm_calls;
  // Both dims' collectives of a step run at once (they may share links: MeshLinks::concurrent).
  e.steady_s = std::max(links.concurrent(c_v, c_h), g);
  e.comm_s = static_cast<double>(e.iterations) * (c_v + c_h);
  const double c_in = in_dir == Direction::kVertical ? c_v : c_h;
  const double c_out = in_dir == Direction::kVertical ? c_h : c_v;
  switch (algorithm) {
    case Algorithm::kSumma: {
      // Back to back, panel t+1's broadcast starts while panel t's fills the chain's far end
      // (summa_panel_interval): the steady state pays the interval, the last panel its fill.
      // The runtime's reduces are blocking: each pays its whole chain.
      auto interval = [&](const DirectionTraffic& t) {
        if (t.launches == 0) return 0.0;
        return t.kind == CollectiveKind::kBroadcast
                   ? summa_panel_interval(ring(t.direction), t.group_size, t.message_bytes,
                                          params.summa_packets)
                   : launch(t);
      };
      e.steady_s =
          std::max(links.concurrent(interval(traffic.vertical), interval(traffic.horizontal)), g);
      e.prologue_s = os ? links.concurrent(c_v, c_h) : c_in;
      e.epilogue_s = os ? g : g + c_out;
      break;
    }
    case Algorithm::kCollective:
    case Algorithm::kMeshSlice:
      // Iteration i's collectives run under iteration i−1's GeMM.
      e.prologue_s = os ? links.concurrent(c_v, c_h) : c_in;
      e.epilogue_s = os ? g : g + c_out;
      break;
    case Algorithm::kWang: {
      // P steps; each multiplies the two half-blocks it holds (two GeMM calls) while the
      // next two travel, one to each ring neighbour (DimLinks::two_way).
      const bool vertical = params.wang_decomposed == Direction::kVertical;
      const DirectionTraffic& dec = vertical ? traffic.vertical : traffic.horizontal;
      const double blocking = vertical ? c_h : c_v;
      const RingParams& two_way = links.dims[vertical ? 0 : 1].two_way;
      const double send = dec.launches > 0 ? two_way.t_launch_s + two_way.l_sync_s +
                                                 dec.message_bytes / two_way.bw_bytes_per_s
                                           : 0.0;
      const double step_gemm = calls / dec.group_size * g;
      e.iterations = dec.group_size;
      e.prologue_s = blocking;
      e.steady_s = std::max(send, step_gemm);
      e.epilogue_s = step_gemm;
      e.comm_s = blocking + static_cast<double>(dec.steps) * send;
      break;
    }
    case Algorithm::kCannon: {
      // The skew: each moving block sent once to its rotated place (DimLinks::skew); OS
      // rotates A along the rows and B along the columns at once, LS / RS their one moving
      // operand, and un-skew the output at the end.
      auto skew = [&](const DirectionTraffic& t) {
        if (t.launches == 0 || t.group_size <= 1) return 0.0;
        const RingParams& r = links.dims[t.direction == Direction::kVertical ? 0 : 1].skew;
        return r.t_launch_s + r.l_sync_s + t.message_bytes / r.bw_bytes_per_s;
      };
      const double skew_v = skew(traffic.vertical), skew_h = skew(traffic.horizontal);
      const double skew_in = in_dir == Direction::kVertical ? skew_v : skew_h;
      const double skew_out = in_dir == Direction::kVertical ? skew_h : skew_v;
      e.prologue_s = os ? links.concurrent(skew_v, skew_h) : skew_in;
      e.epilogue_s = os ? g : g + skew_out;
      e.comm_s = skew_v + skew_h + static_cast<double>(s.nr - 1) * (c_v + c_h);
      break;
    }
  }
  e.total_s = e.prologue_s + static_cast<double>(e.iterations - 1) * e.steady_s + e.epilogue_s;
  return e;
}

double gemm2d_workspace_bytes(Algorithm algorithm, const Gemm2dShape& s,
                              const Gemm2dParams& params) {
  double total = 0;
  for (const Direction d : {Direction::kVertical, Direction::kHorizontal}) {
    const int p = s.group_size(d);
    if (p == 1) continue;
    const double gathered = s.shard_bytes(d) * p;  // a whole gathered block / partial output
    switch (algorithm) {
      case Algorithm::kCollective:
        total += gathered;
        break;
      // Double-buffered: the slice in flight and the slice being multiplied.
      case Algorithm::kMeshSlice:
        total += 2 * gathered / params.slices;
        break;
      case Algorithm::kSumma:
        total += 2 * gathered / params.summa_panels(s);
        break;
      case Algorithm::kWang:
        total += d == params.wang_decomposed ? 2 * s.shard_bytes(d) : gathered;
        break;
      case Algorithm::kCannon:
        total += 2 * s.shard_bytes(d);
        break;
    }
  }
  return total;
}

}  // namespace meshtp::plan
