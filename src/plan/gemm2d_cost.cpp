#include "plan/gemm2d_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <ostream>

#include "core/error.hpp"

namespace meshtp::plan {

// ---- SUMMA panels ----------------------------------------------------------------------------

double summa_panel_time(const RingParams& ring, int p, double panel_bytes, int packets) {
  if (p <= 1) return 0;
  const int d = packets > 0 ? packets : summa_best_packets(ring, p, panel_bytes);
  return ring.t_launch_s +
         (d + p - 1) * (ring.l_sync_s + panel_bytes / (d * ring.bw_bytes_per_s));
}

int summa_best_packets(const RingParams& ring, int p, double panel_bytes) {
  // d/dD [(D+P−1)(L + x/(D·BW))] = 0  →  D* = sqrt((P−1)·x / (BW·L)). Packets are at least
  // 4 KiB, so with L = 0 the answer is finite.
  constexpr double kMinPacket = 4096;
  const int max_packets = static_cast<int>(std::clamp(panel_bytes / kMinPacket, 1.0, 1e6));
  if (p <= 1) return 1;
  if (ring.l_sync_s <= 0) return max_packets;
  const double best = std::sqrt((p - 1) * panel_bytes / (ring.bw_bytes_per_s * ring.l_sync_s));
  int chosen = 1;
  double chosen_t = 1e300;
  for (const double c : {std::floor(best), std::ceil(best)}) {
    const int d = static_cast<int>(std::clamp(c, 1.0, static_cast<double>(max_packets)));
    const double t = (d + p - 1) * (ring.l_sync_s + panel_bytes / (d * ring.bw_bytes_per_s));
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
                                 double flops_per_s) {
  if (auto reason = gemm2d_invalid_reason(algorithm, s, params)) {
    fail("{} {} GeMM: {}", algorithm, s.dataflow, *reason);
  }
  MESHTP_CHECK(links.mesh[0] == s.nr && links.mesh[1] == s.nc,
               "links are for mesh {}x{} but the GeMM runs on {}x{}", links.mesh[0],
               links.mesh[1], s.nr, s.nc);
  MESHTP_CHECK(flops_per_s > 0, "flops_per_s={} must be positive", flops_per_s);
  const bool os = s.dataflow == Dataflow::kOS;
  // The input direction and the output direction (OS: both are inputs).
  const Direction in_dir = s.dataflow == Dataflow::kLS ? Direction::kVertical
                                                       : Direction::kHorizontal;
  const Direction out_dir = in_dir == Direction::kVertical ? Direction::kHorizontal
                                                           : Direction::kVertical;
  auto ring = [&](Direction d) -> const RingParams& {
    const DimLinks& dl = links.dims[d == Direction::kVertical ? 0 : 1];
    return s.moves_output(d) ? dl.reduce_scatter : dl.all_gather;
  };
  auto p_of = [&](Direction d) { return s.group_size(d); };
  // A collective moving `fraction` of a full shard in direction d.
  auto coll = [&](Direction d, double fraction) {
    return ring_collective_time(ring(d), p_of(d), s.shard_bytes(d) * fraction);
  };
  // One point-to-point step of a full shard (Wang, Cannon) without / with a launch.
  auto step = [&](Direction d) {
    if (p_of(d) == 1) return 0.0;
    return ring(d).l_sync_s + s.shard_bytes(d) / ring(d).bw_bytes_per_s;
  };
  const double gemm = s.flops_per_rank() / flops_per_s;

  PipelineEstimate e;
  e.compute_s = gemm;
  // Pipelines over `iters` iterations, given the per-iteration collectives in each direction.
  auto pipeline = [&](std::int64_t iters, double c_v, double c_h, double g) {
    e.iterations = iters;
    if (os) {
      e.prologue_s = std::max(c_v, c_h);
      e.steady_s = std::max({c_v, c_h, g});
      e.epilogue_s = g;
    } else {
      const double c_in = in_dir == Direction::kVertical ? c_v : c_h;
      const double c_out = in_dir == Direction::kVertical ? c_h : c_v;
      e.prologue_s = c_in;
      e.steady_s = std::max({c_in, g, c_out});
      e.epilogue_s = g + c_out;
    }
    e.comm_s = static_cast<double>(iters) * (c_v + c_h);
  };

  switch (algorithm) {
    case Algorithm::kCollective:
      pipeline(1, coll(Direction::kVertical, 1), coll(Direction::kHorizontal, 1), gemm);
      break;
    case Algorithm::kMeshSlice: {
      const double f = 1.0 / params.slices;
      pipeline(params.slices, coll(Direction::kVertical, f), coll(Direction::kHorizontal, f),
               gemm * f);
      break;
    }
    case Algorithm::kSumma: {
      auto panel = [&](Direction d) {
        const int p = p_of(d);
        return summa_panel_time(ring(d), p, s.shard_bytes(d) * p / params.panels,
                                params.summa_packets);
      };
      pipeline(params.panels, panel(Direction::kVertical), panel(Direction::kHorizontal),
               gemm / params.panels);
      break;
    }
    case Algorithm::kWang: {
      const Direction dec = params.wang_decomposed;
      const Direction other = dec == Direction::kVertical ? Direction::kHorizontal
                                                          : Direction::kVertical;
      const int p = p_of(dec);
      const double blocking = coll(other, 1);
      const double send = p > 1 ? ring(dec).t_launch_s + step(dec) : 0.0;
      const double g = gemm / p;
      e.iterations = p;
      e.prologue_s = blocking;
      e.steady_s = std::max(send, g);
      e.epilogue_s = g;
      e.comm_s = blocking + (p - 1) * send;
      break;
    }
    case Algorithm::kCannon: {
      const int q = s.nr;
      const double hops = q / 2;
      const double launch = q > 1 ? std::max(ring(Direction::kVertical).t_launch_s,
                                             ring(Direction::kHorizontal).t_launch_s)
                                  : 0.0;
      const double sv = step(Direction::kVertical), sh = step(Direction::kHorizontal);
      const double g = gemm / q;
      e.iterations = q;
      e.steady_s = std::max({sv, sh, g});
      if (os) {
        e.prologue_s = launch + hops * std::max(sv, sh);
        e.epilogue_s = g;
      } else {
        const double s_in = in_dir == Direction::kVertical ? sv : sh;
        const double s_out = out_dir == Direction::kVertical ? sv : sh;
        e.prologue_s = launch + hops * s_in;
        e.epilogue_s = g + hops * s_out;
      }
      e.comm_s = launch + (hops + q - 1) * (sv + sh);
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
        total += 2 * gathered / params.panels;
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
