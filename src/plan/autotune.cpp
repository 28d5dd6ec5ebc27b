#include "plan/autotune.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"

namespace meshtp::plan {
namespace {

// The knob values worth trying for `algorithm` on the three GeMMs of one layer.
std::vector<Gemm2dParams> knob_values(Algorithm algorithm,
                                      const std::array<Gemm2dShape, 3>& shapes) {
  std::vector<Gemm2dParams> out;
  const int nr = shapes[0].nr, nc = shapes[0].nc;
  switch (algorithm) {
    case Algorithm::kCollective:
    case Algorithm::kCannon:
      out.push_back({});
      break;
    case Algorithm::kMeshSlice: {
      // S must divide every local sliced extent: the divisors of their gcd.
      std::int64_t g = 0;
      for (const Gemm2dShape& s : shapes) {
        g = std::gcd(g, s.sliced_extent() / nr);
        g = std::gcd(g, s.sliced_extent() / nc);
      }
      for (std::int64_t v = 1; v <= g && v <= 4096; ++v) {
        if (g % v == 0) out.push_back({.slices = static_cast<int>(v)});
      }
      break;
    }
    case Algorithm::kSumma: {
      // Kp = lcm·S panels must divide every sliced extent.
      const std::int64_t lcm = std::lcm(nr, nc);
      std::int64_t limit = shapes[0].sliced_extent();
      for (const Gemm2dShape& s : shapes) limit = std::min(limit, s.sliced_extent());
      for (std::int64_t slices = 1; slices * lcm <= limit && out.size() < 64; ++slices) {
        const Gemm2dParams p{.slices = static_cast<int>(slices)};
        const bool divides = std::all_of(shapes.begin(), shapes.end(), [&](const auto& s) {
          return s.sliced_extent() % p.summa_panels(s) == 0;
        });
        if (divides) out.push_back(p);
      }
      break;
    }
    case Algorithm::kWang:
      // The row direction, as the runtime (parallel/gemm2d/wang.cpp) implements it.
      out.push_back({.wang_decomposed = Direction::kHorizontal});
      break;
  }
  return out;
}

int knob_of(Algorithm algorithm, const Gemm2dParams& p) {
  switch (algorithm) {
    case Algorithm::kMeshSlice:
    case Algorithm::kSumma:
      return p.slices;
    case Algorithm::kWang:
      return p.wang_decomposed == Direction::kVertical ? 0 : 1;
    default: return 0;
  }
}

void accumulate(FcTuning& t) {
  t.total_s = t.comm_s = t.compute_s = 0;
  for (const FcPassCost& p : t.passes) {
    t.total_s += p.weight * p.estimate.total_s;
    t.comm_s += p.weight * p.estimate.comm_s;
    t.compute_s += p.weight * p.estimate.compute_s;
  }
}

// One rank's product of a 1D (Megatron) linear M×K → M×N on p ranks: column-parallel (qkv,
// mlp1) holds K × N/p, row-parallel (proj, mlp2) K/p × N; every pass sees all M tokens
// (gathered first under sequence parallelism).
//   forward  (M, n, k)   backward data (M, k, n)   backward weight (k, n, M)
double tp1d_gemm_seconds(const FcShape& fc, Pass pass, int p, const GemmModel& gemm,
                         int element_bytes) {
  const bool column_parallel = fc.layer == Linear::kQkv || fc.layer == Linear::kMlp1;
  const double M = static_cast<double>(fc.tokens);
  const double k = static_cast<double>(fc.in) / (column_parallel ? 1 : p);
  const double n = static_cast<double>(fc.out) / (column_parallel ? p : 1);
  switch (pass) {
    case Pass::kForward:
      return gemm.seconds(M, n, k, element_bytes);
    case Pass::kBackwardData:
      return gemm.seconds(M, k, n, element_bytes);
    case Pass::kBackwardWeight:
      return gemm.seconds(k, n, M, element_bytes);
  }
  return 0;
}

}  // namespace

FcTuning tune_fc(Algorithm algorithm, const FcShape& fc, const MeshLinks& links,
                 const GemmModel& gemm, int element_bytes, double forward_weight,
                 double step_overhead_s, std::optional<Stationary> stationary) {
  FcTuning best;
  best.fc = fc;
  // X or Y: the whole-model runtime has no weight-stationary block (transposed activations).
  best.stationary = stationary.value_or(choose_stationary(fc, /*allow_weight=*/false));
  const int nr = links.mesh[0], nc = links.mesh[1];
  std::array<Gemm2dShape, 3> shapes;
  for (std::size_t i = 0; i < 3; ++i) {
    shapes[i] = fc_gemm(fc, best.stationary, kPasses[i], nr, nc, element_bytes);
    best.passes[i].pass = kPasses[i];
    best.passes[i].shape = shapes[i];
    best.passes[i].weight = kPasses[i] == Pass::kForward ? forward_weight : 1.0;
  }
  for (const Gemm2dShape& s : shapes) {
    if (auto reason = s.invalid_reason()) {
      best.invalid_reason = *reason;
      return best;
    }
  }
  const auto values = knob_values(algorithm, shapes);
  const FcTuning base = best;
  bool found = false;
  for (const Gemm2dParams& params : values) {
    FcTuning t = base;
    t.params = params;
    std::optional<std::string> reason;
    for (std::size_t i = 0; i < 3 && !reason; ++i) {
      reason = gemm2d_invalid_reason(algorithm, shapes[i], params);
      if (reason) break;
      t.passes[i].estimate =
          gemm2d_estimate(algorithm, shapes[i], params, links, gemm, step_overhead_s);
      t.workspace_bytes = std::max(t.workspace_bytes,
                                   gemm2d_workspace_bytes(algorithm, shapes[i], params));
    }
    if (reason) {
      if (!found) best.invalid_reason = reason;
      continue;
    }
    accumulate(t);
    best.sweep.push_back({.knob = knob_of(algorithm, params),
                          .total_s = t.total_s,
                          .serial_s = t.comm_s + t.compute_s});
    if (!found || t.total_s < best.total_s) {
      auto sweep = std::move(best.sweep);
      best = std::move(t);
      best.sweep = std::move(sweep);
      best.invalid_reason.reset();
      found = true;
    }
  }
  if (!found && !best.invalid_reason) best.invalid_reason = "no valid parameter value";
  return best;
}

FcTuning tp1d_fc(const FcShape& fc, const MeshLinks& links, const GemmModel& gemm,
                 int element_bytes, double forward_weight) {
  MESHTP_CHECK(links.mesh[1] == 1, "1D TP runs on mesh (N, 1), got {}x{}", links.mesh[0],
               links.mesh[1]);
  const int p = links.mesh[0];
  const DimLinks& dim = links.dims[0];
  FcTuning t;
  t.fc = fc;
  t.stationary = Stationary::kWeight;
  for (std::size_t i = 0; i < 3; ++i) {
    FcPassCost& pc = t.passes[i];
    pc.pass = kPasses[i];
    pc.weight = pc.pass == Pass::kForward ? forward_weight : 1.0;
    const Tp1dPass tp = tp1d_pass(fc, pc.pass, p, element_bytes);
    pc.tp1d = tp;
    const RingParams& ring =
        tp.kind == CollectiveKind::kReduceScatter ? dim.reduce_scatter : dim.all_gather;
    const double comm =
        tp.kind == CollectiveKind::kNone ? 0.0 : ring_collective_time(ring, p, tp.shard_bytes);
    const double product = tp1d_gemm_seconds(fc, pc.pass, p, gemm, element_bytes);
    // Blocking: the gather before the GeMM (or the scatter after it) is not overlapped.
    pc.estimate.iterations = 1;
    pc.estimate.prologue_s = comm;
    pc.estimate.epilogue_s = product;
    pc.estimate.total_s = comm + product;
    pc.estimate.comm_s = comm;
    pc.estimate.compute_s = product;
    if (tp.kind == CollectiveKind::kAllGather) {
      t.workspace_bytes = std::max(t.workspace_bytes, tp.shard_bytes * p);
    }
  }
  accumulate(t);
  return t;
}

}  // namespace meshtp::plan
