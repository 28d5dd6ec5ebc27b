#include "plan/fc_layers.hpp"

namespace meshtp::plan {

const char* name(Pass p) {
  switch (p) {
    case Pass::kForward: return "fwd";
    case Pass::kBackwardData: return "bwd-data";
    case Pass::kBackwardWeight: return "bwd-weight";
  }
  return "?";
}

std::array<FcShape, 4> fc_layers(const ModelSpec& model) {
  const std::int64_t m = model.tokens();
  const std::int64_t h = model.hidden;
  return {FcShape{Linear::kQkv, m, h, model.qkv_width()}, FcShape{Linear::kProj, m, h, h},
          FcShape{Linear::kMlp1, m, h, model.mlp1_width()},
          FcShape{Linear::kMlp2, m, model.ffn(), h}};
}

Stationary choose_stationary(const FcShape& fc, bool allow_weight) {
  return layout::choose_stationary(fc.tokens, fc.in, fc.out, allow_weight);
}

Gemm2dShape fc_gemm(const FcShape& fc, Stationary stationary, Pass pass, int nr, int nc,
                    int element_bytes) {
  const std::int64_t M = fc.tokens, K = fc.in, N = fc.out;
  Gemm2dShape g;
  g.nr = nr;
  g.nc = nc;
  g.element_bytes = element_bytes;
  // (dataflow, m, n, k) per the table in the header.
  auto set = [&g](Dataflow d, std::int64_t m, std::int64_t n, std::int64_t k) {
    g.dataflow = d;
    g.m = m;
    g.n = n;
    g.k = k;
  };
  switch (stationary) {
    case Stationary::kOutput:
      if (pass == Pass::kForward) set(Dataflow::kOS, M, N, K);              // Y = X·W
      if (pass == Pass::kBackwardData) set(Dataflow::kLS, M, K, N);         // dX = dY·Wᵀ
      if (pass == Pass::kBackwardWeight) set(Dataflow::kRS, K, N, M);       // dW = Xᵀ·dY
      break;
    case Stationary::kInput:
      if (pass == Pass::kForward) set(Dataflow::kLS, M, N, K);              // Y = X·(Wᵀ)ᵀ
      if (pass == Pass::kBackwardData) set(Dataflow::kOS, M, K, N);         // dX = dY·Wᵀ
      if (pass == Pass::kBackwardWeight) set(Dataflow::kRS, N, K, M);       // dWᵀ = dYᵀ·X
      break;
    case Stationary::kWeight:
      if (pass == Pass::kForward) set(Dataflow::kLS, N, M, K);              // Yᵀ = Wᵀ·Xᵀ
      if (pass == Pass::kBackwardData) set(Dataflow::kRS, M, K, N);         // dX = (dYᵀ)ᵀ·Wᵀ
      if (pass == Pass::kBackwardWeight) set(Dataflow::kOS, N, K, M);       // dWᵀ = dYᵀ·X
      break;
  }
  return g;
}

Tp1dPass tp1d_pass(const FcShape& fc, Pass pass, int p, int element_bytes) {
  const bool column_parallel = fc.layer == Linear::kQkv || fc.layer == Linear::kMlp1;
  const double M = static_cast<double>(fc.tokens), K = static_cast<double>(fc.in),
               N = static_cast<double>(fc.out);
  Tp1dPass t;
  t.flops_per_rank = 2.0 * M * N * K / p;
  // The activation that crosses the wire: the input X (or dX) for column-parallel layers,
  // the output Y (or dY) for row-parallel ones.
  const double activation = column_parallel ? M * K : M * N;
  const CollectiveKind gather = CollectiveKind::kAllGather,
                       scatter = CollectiveKind::kReduceScatter;
  t.kind = pass == Pass::kForward        ? (column_parallel ? gather : scatter)
           : pass == Pass::kBackwardData ? (column_parallel ? scatter : gather)
                                         : CollectiveKind::kNone;
  if (p == 1 || t.kind == CollectiveKind::kNone) {
    t.kind = CollectiveKind::kNone;
    return t;
  }
  t.shard_bytes = activation / p * element_bytes;
  t.bytes_per_rank = (p - 1) * t.shard_bytes;
  t.steps = p - 1;
  return t;
}

}  // namespace meshtp::plan
