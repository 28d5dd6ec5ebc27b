#include "layout/atp_traffic.hpp"

#include <fmt/format.h>

namespace meshtp::layout {

std::vector<AtpCall> atp_block_traffic(const AtpShape& s) {
  const double nc = static_cast<double>(s.tokens) / s.chunks, h = static_cast<double>(s.hidden);
  const double e = s.element_bytes;
  const double stats = nc * kLayerNormStatsBytesPerRow;
  const double qkv = nc * 3 * h / s.d1 * e, attn = nc * h / s.d1 * e,
               mlp = nc * 4 * h / s.d1 * e, stream = nc * h / s.d2 * e;
  using K = CollectiveKind;
  const struct {
    const char* op;
    bool backward;
    K kind;
    int dim;
    double bytes;
  } calls[] = {
      {"ln1", false, K::kAllReduce, 1, stats},      {"qkv", false, K::kReduceScatter, 1, qkv},
      {"proj", false, K::kAllGather, 1, attn},      {"proj", false, K::kAllReduce, 0, stream},
      {"ln2", false, K::kAllReduce, 1, stats},      {"mlp1", false, K::kAllReduce, 1, mlp},
      {"mlp2", false, K::kAllReduce, 0, stream},    {"mlp2", true, K::kAllReduce, 1, mlp},
      {"mlp1", true, K::kAllReduce, 0, stream},     {"ln2", true, K::kAllReduce, 1, stats},
      {"proj", true, K::kReduceScatter, 1, attn},   {"qkv", true, K::kAllGather, 1, qkv},
      {"qkv", true, K::kAllReduce, 0, stream},      {"ln1", true, K::kAllReduce, 1, stats},
  };
  std::vector<AtpCall> out;
  for (const auto& c : calls) {
    const int p = c.dim == 0 ? s.d1 : s.d2;
    if (p == 1) continue;
    out.push_back({.op = c.op,
                   .backward = c.backward,
                   .kind = c.kind,
                   .mesh_dim = c.dim,
                   .group_size = p,
                   .launches = s.chunks,
                   .message_bytes = c.bytes});
  }
  return out;
}

std::vector<AtpCall> elementwise_traffic(Strategy strategy, const AtpShape& s, int layers) {
  const double e = s.element_bytes, h = static_cast<double>(s.hidden);
  using K = CollectiveKind;
  std::vector<AtpCall> out;
  const auto add = [&](const char* op, bool backward, K kind, int dim, int launches,
                       double bytes) {
    const int p = dim == 0 ? s.d1 : s.d2;
    if (p > 1) out.push_back({op, backward, kind, dim, p, launches, bytes});
  };
  if (strategy == Strategy::kTp1d) {
    add("ln grads", true, K::kAllReduce, 0, 1, layers * 4 * h * e);
  } else if (is_gemm2d(strategy)) {
    const double stats = static_cast<double>(s.tokens) / s.d1 * kLayerNormStatsBytesPerRow;
    for (const bool backward : {false, true}) {
      for (const char* ln : {"ln1", "ln2"}) add(ln, backward, K::kAllReduce, 1, layers, stats);
    }
    add("bias, ln grads", true, K::kAllReduce, 0, layers, 13 * h / s.d2 * e);
  }
  return out;
}

std::optional<std::string> atp_block_invalid_reason(const ModelShape& shape, int d1, int d2,
                                                    int chunks) {
  const std::int64_t batch = shape.batch, hidden = shape.hidden, heads = shape.heads;
  const std::int64_t ranks = static_cast<std::int64_t>(d1) * d2;
  const std::string mesh = fmt::format("{}x{}", d1, d2);
  if (chunks < 1 || batch % chunks != 0) {
    return fmt::format("batch={} is not divisible by chunks={} (chunks hold whole sequences)",
                       batch, chunks);
  }
  if (hidden % heads != 0) {
    return fmt::format("hidden={} is not divisible by heads={}", hidden, heads);
  }
  if (hidden % d1 != 0) {
    return fmt::format("hidden={} is not divisible by d1={} (mesh {})", hidden, d1, mesh);
  }
  if (hidden % d2 != 0) {
    return fmt::format("hidden={} is not divisible by d2={} (mesh {})", hidden, d2, mesh);
  }
  if (heads % ranks != 0) {
    return fmt::format(
        "heads={} is not divisible by d1·d2={} (mesh {}): the fully sharded "
        "attention core needs whole heads on every rank",
        heads, ranks, mesh);
  }
  return std::nullopt;
}

}  // namespace meshtp::layout
