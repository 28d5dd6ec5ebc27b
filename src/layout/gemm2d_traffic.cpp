#include "layout/gemm2d_traffic.hpp"

#include <fmt/format.h>

#include <numeric>
#include <ostream>
#include <vector>

#include "core/error.hpp"

namespace meshtp::layout {

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



}  // namespace

bool Gemm2dShape::moves_output(Direction d) const {
  const Roles r = roles(dataflow);
  return d == Direction::kVertical ? r.vertical_is_output : r.horizontal_is_output;
}

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
    return fmt::format("GeMM sizes must be positive, got m={} n={} k={} on mesh {}x{}", m, n, k,
                       nr, nc);
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

int summa_panels(int nr, int nc, int slices) { return std::lcm(nr, nc) * slices; }

int Gemm2dParams::summa_panels(const Gemm2dShape& shape) const {
  return layout::summa_panels(shape.nr, shape.nc, slices);
}

std::optional<std::string> gemm2d_invalid_reason(Algorithm algorithm, const Gemm2dShape& s,
                                                 const Gemm2dParams& p) {
  if (auto reason = s.invalid_reason()) return reason;
  const std::int64_t d = s.sliced_extent();
  const char dim = s.dataflow == Dataflow::kOS ? 'k' : s.dataflow == Dataflow::kLS ? 'n' : 'm';
  const int lcm = std::lcm(s.nr, s.nc);
  switch (algorithm) {
    case Algorithm::kMeshSlice:
      // Every rank's block of both moving matrices is cut into S sub-blocks along the
      // sliced dim: S must divide d/Nr and d/Nc.
      if (p.slices < 1) return fmt::format("slices={} must be at least 1", p.slices);
      if ((d / s.nr) % p.slices == 0 && (d / s.nc) % p.slices == 0) return std::nullopt;
      return fmt::format(
          "MeshSlice slices={} does not divide the local {} extents {}/Nr={} and {}/Nc={} "
          "({}={} on mesh {}x{})",
          p.slices, dim, dim, d / s.nr, dim, d / s.nc, dim, d, s.nr, s.nc);
    case Algorithm::kSumma:
      if (p.slices < 1) return fmt::format("slices={} must be at least 1", p.slices);
      if (d % p.summa_panels(s) == 0 && p.summa_packets >= 0) return std::nullopt;
      return fmt::format(
          "SUMMA slices={} cuts {}={} into Kp = lcm(Nr, Nc)·S = {}·{} = {} panels (D={} "
          "packets ≥ 0), which does not divide it (mesh {}x{})",
          p.slices, dim, d, lcm, p.slices, p.summa_panels(s), p.summa_packets, s.nr, s.nc);
    case Algorithm::kCannon:
      if (s.nr == s.nc) return std::nullopt;
      return fmt::format(
          "Cannon's algorithm needs a square mesh, got {}x{} (use summa, collective, wang or "
          "meshslice on rectangular meshes)",
          s.nr, s.nc);
    default:  // Collective and Wang run whatever divides evenly
      return std::nullopt;
  }
}

// ---- traffic ---------------------------------------------------------------------------------

namespace {

DirectionTraffic direction_traffic(Algorithm algorithm, const Gemm2dShape& s,
                                   const Gemm2dParams& params, Direction d) {
  const Roles r = roles(s.dataflow);
  DirectionTraffic t;
  t.direction = d;
  t.matrix = d == Direction::kVertical ? r.vertical : r.horizontal;
  const CollectiveKind ring = s.moves_output(d) ? CollectiveKind::kReduceScatter
                                                : CollectiveKind::kAllGather;
  t.group_size = s.group_size(d);
  const int p = t.group_size;
  if (p == 1) return t;
  const double shard = s.shard_bytes(d);
  // (kind, launches, bytes of one launch's message, steps)
  switch (algorithm) {
    case Algorithm::kCollective:
      t = {t.direction, t.matrix, ring, p, 1, p * shard, p - 1};
      break;
    case Algorithm::kMeshSlice:
      t = {t.direction, t.matrix, ring, p, params.slices, p * shard / params.slices,
           static_cast<std::int64_t>(params.slices) * (p - 1)};
      break;
    case Algorithm::kWang:
      // The decomposed direction: p−1 ring steps, each sending half the block to each
      // neighbour (two messages of shard/2, both directions of the ring at once).
      t = d == params.wang_decomposed
              ? DirectionTraffic{t.direction, t.matrix,    CollectiveKind::kSendRecv,
                                 p,           2 * (p - 1), shard / 2}
              : DirectionTraffic{t.direction, t.matrix, ring, p, 1, p * shard};
      t.steps = p - 1;
      break;
    case Algorithm::kSumma:
      // Panels of the moving block's row (column) of P shards, broadcast (reduced) in turn.
      t = {t.direction,
           t.matrix,
           s.moves_output(d) ? CollectiveKind::kReduce : CollectiveKind::kBroadcast,
           p,
           params.summa_panels(s),
           shard * p / params.summa_panels(s),
           static_cast<std::int64_t>(params.summa_panels(s)) * (p - 1)};
      break;
    case Algorithm::kCannon:  // skew (or unskew) + q−1 shifts
      t = {t.direction, t.matrix, CollectiveKind::kSendRecv, p, p, shard, p};
      break;
  }
  t.bytes_per_rank = t.launches * sent_bytes(t.kind, p, t.message_bytes);
  return t;
}

int gemm_calls(Algorithm algorithm, const Gemm2dShape& s, const Gemm2dParams& p) {
  switch (algorithm) {
    case Algorithm::kCollective:
      return 1;
    case Algorithm::kMeshSlice:
      return p.slices;
    case Algorithm::kWang:  // per ring step, one GeMM for each half-block
      return s.group_size(p.wang_decomposed) == 1 ? 1 : 2 * s.group_size(p.wang_decomposed);
    case Algorithm::kSumma:
      return p.summa_panels(s);
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

}  // namespace meshtp::layout
