#include "plan/gemm2d_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <ostream>

#include "core/error.hpp"

namespace meshtp::plan {

const char* name(Direction d) { return d == Direction::kVertical ? "vertical" : "horizontal"; }

// ---- shape -----------------------------------------------------------------------------------

namespace {

// Per dataflow: which matrix moves in each direction and whether it is the output.
struct Roles {
  char vertical, horizontal;
  bool vertical_is_output, horizontal_is_output;
};

Roles roles(Dataflow d) {
  switch (d) {
    case Dataflow::kOS: return {'B', 'A', false, false};
    case Dataflow::kLS: return {'B', 'C', false, true};
    case Dataflow::kRS: return {'C', 'A', true, false};
  }
  return {'-', '-', false, false};
}

double elements(const Gemm2dShape& s, char matrix) {
  const double m = static_cast<double>(s.m), n = static_cast<double>(s.n),
               k = static_cast<double>(s.k);
  return matrix == 'A' ? m * k : matrix == 'B' ? n * k : m * n;
}

CollectiveKind collective_of(bool is_output) {
  return is_output ? CollectiveKind::kReduceScatter : CollectiveKind::kAllGather;
}

int group_size(const Gemm2dShape& s, Direction d) {
  return d == Direction::kVertical ? s.nr : s.nc;
}

}  // namespace

double Gemm2dShape::flops_per_rank() const {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
         (static_cast<double>(nr) * nc);
}

double Gemm2dShape::shard_bytes(Direction d) const {
  const Roles r = roles(dataflow);
  const char matrix = d == Direction::kVertical ? r.vertical : r.horizontal;
  return elements(*this, matrix) / (static_cast<double>(nr) * nc) * element_bytes;
}

std::int64_t Gemm2dShape::sliced_extent() const {
  return dataflow == Dataflow::kOS ? k : dataflow == Dataflow::kLS ? n : m;
}

std::optional<std::string> Gemm2dShape::invalid_reason() const {
  if (m < 1 || n < 1 || k < 1 || nr < 1 || nc < 1 || element_bytes < 1) {
    return fmt::format("bad {} GeMM m={} n={} k={} on {}x{}: every size must be positive",
                       name(dataflow), m, n, k, nr, nc);
  }
  // (dim name, extent, mesh dim) for each matrix dim that is sharded.
  struct Need {
    const char* dim;
    std::int64_t extent;
    int mesh_dim;
  };
  std::vector<Need> needs;
  switch (dataflow) {
    case Dataflow::kOS: needs = {{"m", m, 0}, {"k", k, 1}, {"k", k, 0}, {"n", n, 1}}; break;
    case Dataflow::kLS: needs = {{"m", m, 0}, {"k", k, 1}, {"n", n, 0}, {"n", n, 1}}; break;
    case Dataflow::kRS: needs = {{"k", k, 0}, {"m", m, 1}, {"m", m, 0}, {"n", n, 1}}; break;
  }
  for (const Need& need : needs) {
    const int p = need.mesh_dim == 0 ? nr : nc;
    if (need.extent % p != 0) {
      return fmt::format("{}={} is not divisible by mesh dim {} (size {})", need.dim,
                         need.extent, need.mesh_dim, p);
    }
  }
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& os, const Gemm2dShape& s) {
  return os << fmt::format("{} m={} n={} k={} on {}x{} ({} B/elem)", name(s.dataflow), s.m, s.n,
                           s.k, s.nr, s.nc, s.element_bytes);
}

// ---- validity --------------------------------------------------------------------------------

std::optional<std::string> gemm2d_invalid_reason(Algorithm algorithm, const Gemm2dShape& s,
                                                 const Gemm2dParams& p) {
  if (auto reason = s.invalid_reason()) return reason;
  const std::int64_t extent = s.sliced_extent();
  switch (algorithm) {
    case Algorithm::kCollective:
      return std::nullopt;
    case Algorithm::kMeshSlice: {
      // Every rank's block of both moving matrices is cut into S sub-blocks along the
      // sliced dim: S must divide extent/Nr and extent/Nc.
      if (p.slices < 1) return fmt::format("meshslice: S={} must be at least 1", p.slices);
      for (const int d : {s.nr, s.nc}) {
        if ((extent / d) % p.slices != 0) {
          return fmt::format("meshslice: S={} does not divide the local extent {} (= {}/{})",
                             p.slices, extent / d, extent, d);
        }
      }
      return std::nullopt;
    }
    case Algorithm::kWang:
      return std::nullopt;
    case Algorithm::kSumma: {
      const int lcm = std::lcm(s.nr, s.nc);
      if (p.panels < 1 || p.panels % lcm != 0) {
        return fmt::format("summa: Kp={} must be a positive multiple of lcm({}, {}) = {}",
                           p.panels, s.nr, s.nc, lcm);
      }
      if (extent % p.panels != 0) {
        return fmt::format("summa: Kp={} does not divide the panel dim ({})", p.panels, extent);
      }
      if (p.summa_packets < 0) return fmt::format("summa: D={} must not be negative",
                                                  p.summa_packets);
      return std::nullopt;
    }
    case Algorithm::kCannon:
      if (s.nr != s.nc) {
        return fmt::format("cannon needs a square mesh, got {}x{}", s.nr, s.nc);
      }
      return std::nullopt;
  }
  return std::nullopt;
}

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

// ---- traffic ---------------------------------------------------------------------------------

namespace {

DirectionTraffic direction_traffic(Algorithm algorithm, const Gemm2dShape& s,
                                   const Gemm2dParams& params, Direction d) {
  const Roles r = roles(s.dataflow);
  DirectionTraffic t;
  t.direction = d;
  t.matrix = d == Direction::kVertical ? r.vertical : r.horizontal;
  const bool is_output = d == Direction::kVertical ? r.vertical_is_output : r.horizontal_is_output;
  t.group_size = group_size(s, d);
  const int p = t.group_size;
  if (p == 1) return t;
  const double shard = s.shard_bytes(d);
  switch (algorithm) {
    case Algorithm::kCollective:
      t.kind = collective_of(is_output);
      t.launches = 1;
      t.steps = p - 1;
      t.bytes_per_rank = (p - 1) * shard;
      break;
    case Algorithm::kMeshSlice:
      t.kind = collective_of(is_output);
      t.launches = params.slices;
      t.steps = static_cast<std::int64_t>(params.slices) * (p - 1);
      t.bytes_per_rank = (p - 1) * shard;
      break;
    case Algorithm::kWang:
      if (d == params.wang_decomposed) {
        t.kind = CollectiveKind::kSendRecv;
        t.launches = p - 1;
      } else {
        t.kind = collective_of(is_output);
        t.launches = 1;
      }
      t.steps = p - 1;
      t.bytes_per_rank = (p - 1) * shard;
      break;
    case Algorithm::kSumma: {
      t.kind = is_output ? CollectiveKind::kReduce : CollectiveKind::kBroadcast;
      t.launches = params.panels;
      t.steps = static_cast<std::int64_t>(params.panels) * (p - 1);
      // Each rank forwards every panel except the ones it is the ring's tail for.
      const double panel = shard * p / params.panels;
      t.bytes_per_rank = static_cast<double>(params.panels) * (p - 1) / p * panel;
      break;
    }
    case Algorithm::kCannon:
      t.kind = CollectiveKind::kSendRecv;
      t.launches = p;  // skew (or unskew) + q−1 shifts
      t.steps = p;
      t.bytes_per_rank = p * shard;
      break;
  }
  return t;
}

int gemm_calls(Algorithm algorithm, const Gemm2dShape& s, const Gemm2dParams& p) {
  switch (algorithm) {
    case Algorithm::kCollective:
      return 1;
    case Algorithm::kMeshSlice:
      return p.slices;
    case Algorithm::kWang:
      return group_size(s, p.wang_decomposed);
    case Algorithm::kSumma:
      return p.panels;
    case Algorithm::kCannon:
      return s.nr;
  }
  return 1;
}

void check_valid(Algorithm algorithm, const Gemm2dShape& s, const Gemm2dParams& p) {
  if (auto reason = gemm2d_invalid_reason(algorithm, s, p)) {
    fail("{} {} GeMM: {}", name(algorithm), name(s.dataflow), *reason);
  }
}

}  // namespace

Gemm2dTraffic gemm2d_traffic(Algorithm algorithm, const Gemm2dShape& s,
                             const Gemm2dParams& params) {
  check_valid(algorithm, s, params);
  Gemm2dTraffic t;
  t.vertical = direction_traffic(algorithm, s, params, Direction::kVertical);
  t.horizontal = direction_traffic(algorithm, s, params, Direction::kHorizontal);
  t.flops_per_rank = s.flops_per_rank();
  t.gemm_calls = gemm_calls(algorithm, s, params);
  return t;
}

// ---- time ------------------------------------------------------------------------------------

PipelineEstimate gemm2d_estimate(Algorithm algorithm, const Gemm2dShape& s,
                                 const Gemm2dParams& params, const MeshLinks& links,
                                 double flops_per_s) {
  check_valid(algorithm, s, params);
  MESHTP_CHECK(links.mesh[0] == s.nr && links.mesh[1] == s.nc,
               "links are for mesh {}x{} but the GeMM runs on {}x{}", links.mesh[0],
               links.mesh[1], s.nr, s.nc);
  MESHTP_CHECK(flops_per_s > 0, "flops_per_s={} must be positive", flops_per_s);
  const Roles r = roles(s.dataflow);
  const bool os = s.dataflow == Dataflow::kOS;
  // The input direction and the output direction (OS: both are inputs).
  const Direction in_dir = s.dataflow == Dataflow::kLS ? Direction::kVertical
                                                       : Direction::kHorizontal;
  const Direction out_dir = in_dir == Direction::kVertical ? Direction::kHorizontal
                                                           : Direction::kVertical;
  auto ring = [&](Direction d) -> const RingParams& {
    const DimLinks& dl = links.dims[d == Direction::kVertical ? 0 : 1];
    const bool is_output = d == Direction::kVertical ? r.vertical_is_output
                                                     : r.horizontal_is_output;
    return is_output ? dl.reduce_scatter : dl.all_gather;
  };
  auto p_of = [&](Direction d) { return group_size(s, d); };
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
    const int p = group_size(s, d);
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
