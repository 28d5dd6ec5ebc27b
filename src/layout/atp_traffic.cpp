#include "layout/atp_traffic.hpp"

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

}  // namespace meshtp::layout
