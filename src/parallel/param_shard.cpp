#include "parallel/param_shard.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "mesh/dtensor.hpp"

namespace meshtp::parallel {
namespace {

using mesh::Replicate;
using mesh::Shard;

// What the stored matrix is: the global one, transposed, its out index regrouped by B head
// blocks (π_B); B = d1·d2 (kAllRanks) or Nc (kMeshDim1).
struct Stored {
  mesh::ShardingSpec spec;
  bool transposed = false;
  enum class Heads { kNone, kAllRanks, kMeshDim1, kMeshDim0 } heads = Heads::kNone;
  bool swiglu = false;  // two equal sections (gate, up) instead of q, k, v
};

Stored stored_of(ParamShard kind) {
  using H = Stored::Heads;
  const Shard s0{0}, s1{1};
  switch (kind) {
    case ParamShard::kHidden: return {{Replicate{}, s0}};
    case ParamShard::kColumnFirstWeight: return {{s0, s1}};
    case ParamShard::kColumnFirstBias: return {{s0, Replicate{}}};
    case ParamShard::kRowFirstWeight: return {{s1, s0}};
    case ParamShard::kRowFirstBias: return {{Replicate{}, s0}};
    case ParamShard::kQkvWeight: return {{s0, s1}, false, H::kAllRanks};
    case ParamShard::kQkvBias: return {{s0, Replicate{}}, false, H::kAllRanks};
    case ParamShard::kGemm2dWeightT: return {{s0, s1}, true};
    case ParamShard::kGemm2dQkvWeight: return {{s0, s1}, false, H::kMeshDim1};
    case ParamShard::kGemm2dQkvWeightT: return {{s0, s1}, true, H::kMeshDim1};
    case ParamShard::kGemm2dBias: return {{Replicate{}, s0}};
    case ParamShard::kGemm2dQkvBias: return {{Replicate{}, s0}, false, H::kMeshDim1};
    case ParamShard::kExpertFc1: return {{s0, s1}};
    case ParamShard::kExpertFc2: return {{s0, Shard{2}}};
    case ParamShard::kSwigluWeight: return {{s0, s1}, false, H::kMeshDim0, true};
  }
  fail("unknown parameter shard kind {}", static_cast<int>(kind));
}

// The stored tensor's shape and, for each stored element, its global flat index.
// π regroups the out index into B blocks of the sections' rows: sections q | k | v (k and v
// kv rows each: (M − K)/2 for a QKV weight [M, K] with K = h query rows, M/3 for a bias) or
// gate | up (M/2 each); stored block c is section 0's rows [c·w0, (c+1)·w0), then section 1's
// [c·w1, …), then section 2's. Replicated KV heads (kv_heads g < B): k and v take one head's
// d = K/g rows per block, block c the rows of KV head c·g/B (B/g blocks share each): the
// stored matrix then has B·(h/B + 2d) rows, more than the global one.
struct StoredMap {
  Stored stored;
  Shape shape;          // stored
  std::int64_t sec[3] = {0, 0, 0};  // π: rows of each section (0: none)
  std::int64_t w[3] = {0, 0, 0};    // π: rows of each section in one block
  std::int64_t wb = 0;              // π: rows of one block (Σ w)
  std::int64_t blocks = 0, kv = 0;  // replicated KV heads: kv < blocks (else kv = 0)
  const Shape* global = nullptr;

  StoredMap(ParamShard kind, const Shape& g, const std::vector<int>& mesh_shape,
            std::int64_t kv_heads = 0)
      : stored(stored_of(kind)), shape(g), global(&g) {
    MESHTP_CHECK(mesh_shape.size() == 2, "parameters are sharded on a 2-D mesh, got {} dims",
                 mesh_shape.size());
    const bool experts = on_expert_mesh(kind);
    MESHTP_CHECK(experts ? g.size() == 3 : g.size() == 1 || g.size() == 2,
                 "{} parameter must be {}, got {}", name(kind), experts ? "3-D" : "1-D or 2-D",
                 to_string(g));
    MESHTP_CHECK(!stored.transposed || g.size() == 2, "{} parameter must be 2-D, got {}",
                 name(kind), to_string(g));
    if (stored.transposed) shape = {g[1], g[0]};
    if (stored.heads != Stored::Heads::kNone) {
      using H = Stored::Heads;
      blocks = stored.heads == H::kAllRanks   ? mesh_shape[0] * mesh_shape[1]
               : stored.heads == H::kMeshDim1 ? mesh_shape[1]
                                              : mesh_shape[0];
      if (!stored.swiglu && kv_heads > 0 && kv_heads < blocks) {
        MESHTP_CHECK(kind == ParamShard::kQkvWeight && blocks % kv_heads == 0,
                     "{} parameter: kv_heads={} below {} head blocks must divide them (each "
                     "block then reads one KV head)",
                     name(kind), kv_heads, blocks);
        kv = kv_heads;
      }
      if (stored.swiglu) {
        MESHTP_CHECK(g[0] % 2 == 0 && (g[0] / 2) % blocks == 0,
                     "{} parameter: dim 0 (size {}) is not 2·f (gate and up) with f divisible "
                     "by {} blocks",
                     name(kind), g[0], blocks);
        sec[0] = sec[1] = g[0] / 2;
      } else if (g.size() == 2 && g[0] != 3 * g[1]) {  // grouped-query: q h rows, k, v fewer
        MESHTP_CHECK(g[0] > g[1] && (g[0] - g[1]) % 2 == 0,
                     "{} parameter: dim 0 (size {}) is not h + 2·kv rows for h={}", name(kind),
                     g[0], g[1]);
        sec[0] = g[1];
        sec[1] = sec[2] = (g[0] - g[1]) / 2;
      } else {
        MESHTP_CHECK(g[0] % 3 == 0, "{} parameter: dim 0 (size {}) is not 3·h", name(kind),
                     g[0]);
        sec[0] = sec[1] = sec[2] = g[0] / 3;
      }
      for (int k = 0; k < 3; ++k) {
        if (k > 0 && kv > 0) {  // replicated: one KV head's d rows per block
          MESHTP_CHECK(sec[k] % kv == 0, "{} parameter: {} KV rows are not {} heads", name(kind),
                       sec[k], kv);
          w[k] = sec[k] / kv;
          wb += w[k];
          continue;
        }
        MESHTP_CHECK(sec[k] % blocks == 0,
                     "{} parameter: section {} of dim 0 ({} rows) is not divisible by {} head "
                     "blocks",
                     name(kind), k, sec[k], blocks);
        w[k] = sec[k] / blocks;
        wb += w[k];
      }
      if (kv > 0) shape[0] = blocks * wb;
    }
    mesh::validate_spec(stored.spec, 2, mesh_shape, shape);
  }
  // Global row of stored out index m' (π_B, or m' itself).
  std::int64_t out_row(std::int64_t m) const {
    if (wb == 0) return m;
    const std::int64_t c = m / wb;
    std::int64_t r = m % wb, first = 0;
    int k = 0;
    while (r >= w[k]) {
      r -= w[k];
      first += sec[k];
      ++k;
    }
    if (k > 0 && kv > 0) return first + (c * kv / blocks) * w[k] + r;
    return first + c * w[k] + r;
  }
  std::int64_t global_index(std::int64_t i, std::int64_t j) const {
    if (global->size() == 1) return out_row(i);
    return stored.transposed ? out_row(j) * (*global)[1] + i : out_row(i) * (*global)[1] + j;
  }
  // fn(stored flat index, global flat index) over the block of `local` extents at `offset`.
  template <class Fn>
  void for_each(const Shape& local, const std::vector<std::int64_t>& offset, Fn&& fn) const {
    if (global->size() == 3) {  // the experts' [E, ·, ·]: stored as the global tensor itself
      const Shape& g = *global;
      std::int64_t s = 0;
      for (std::int64_t e = 0; e < local[0]; ++e) {
        for (std::int64_t i = 0; i < local[1]; ++i) {
          const std::int64_t row = ((offset[0] + e) * g[1] + offset[1] + i) * g[2] + offset[2];
          for (std::int64_t j = 0; j < local[2]; ++j) fn(s++, row + j);
        }
      }
      return;
    }
    const std::int64_t rows = local[0], cols = local.size() == 2 ? local[1] : 1;
    for (std::int64_t i = 0; i < rows; ++i) {
      for (std::int64_t j = 0; j < cols; ++j) {
        fn(i * cols + j, global_index(offset[0] + i, local.size() == 2 ? offset[1] + j : 0));
      }
    }
  }
};

}  // namespace

std::string_view name(ParamShard kind) {
  switch (kind) {
    case ParamShard::kHidden: return "hidden";
    case ParamShard::kColumnFirstWeight: return "column-first weight";
    case ParamShard::kColumnFirstBias: return "column-first bias";
    case ParamShard::kRowFirstWeight: return "row-first weight";
    case ParamShard::kRowFirstBias: return "row-first bias";
    case ParamShard::kQkvWeight: return "qkv weight";
    case ParamShard::kQkvBias: return "qkv bias";
    case ParamShard::kGemm2dWeightT: return "2D GeMM transposed weight";
    case ParamShard::kGemm2dQkvWeight: return "2D GeMM qkv weight";
    case ParamShard::kGemm2dQkvWeightT: return "2D GeMM transposed qkv weight";
    case ParamShard::kGemm2dBias: return "2D GeMM bias";
    case ParamShard::kGemm2dQkvBias: return "2D GeMM qkv bias";
    case ParamShard::kExpertFc1: return "experts' fc1";
    case ParamShard::kExpertFc2: return "experts' fc2";
    case ParamShard::kSwigluWeight: return "swiglu weight";
  }
  return "?";
}

mesh::ShardingSpec placements(ParamShard kind) { return stored_of(kind).spec; }

Shape local_shape(ParamShard kind, const Shape& global, const std::vector<int>& mesh_shape,
                  std::int64_t kv_heads) {
  const StoredMap map(kind, global, mesh_shape, kv_heads);
  return mesh::local_shape(map.shape, map.stored.spec, mesh_shape);
}

std::vector<int> replicated_dims(ParamShard kind) {
  const mesh::ShardingSpec spec = placements(kind);
  std::vector<int> out;
  for (int m = 0; m < static_cast<int>(spec.size()); ++m) {
    if (std::holds_alternative<Replicate>(spec[static_cast<std::size_t>(m)])) out.push_back(m);
  }
  return out;
}

void for_each_local(ParamShard kind, const Shape& global, const std::vector<int>& mesh_shape,
                    const std::vector<int>& coords,
                    const std::function<void(std::int64_t, std::int64_t)>& fn,
                    std::int64_t kv_heads) {
  const StoredMap map(kind, global, mesh_shape, kv_heads);
  const mesh::ShardingSpec& spec = map.stored.spec;
  map.for_each(mesh::local_shape(map.shape, spec, mesh_shape),
               mesh::local_offset(map.shape, spec, mesh_shape, coords), fn);
}

void scatter_param(ParamShard kind, const Tensor& global, const mesh::DeviceMesh& mesh,
                   std::span<float> local, std::int64_t kv_heads) {
  const StoredMap map(kind, global.shape(), mesh.shape(), kv_heads);
  Tensor stored(map.shape);
  map.for_each(map.shape, std::vector<std::int64_t>(map.shape.size(), 0), [&](std::int64_t s, std::int64_t g) { stored[s] = global[g]; });
  const Tensor block = mesh::DTensor::distribute(stored, mesh, map.stored.spec).local();
  MESHTP_CHECK(static_cast<std::int64_t>(local.size()) == block.numel(),
               "scatter_param: local buffer has {} values, the {} shard of {} has {}",
               local.size(), name(kind), to_string(global.shape()), block.numel());
  std::copy(block.values().begin(), block.values().end(), local.begin());
}

Tensor gather_param(ParamShard kind, std::span<const float> local, const Shape& global,
                    const mesh::DeviceMesh& mesh, std::int64_t kv_heads) {
  const StoredMap map(kind, global, mesh.shape(), kv_heads);
  const Shape ls = mesh::local_shape(map.shape, map.stored.spec, mesh.shape());
  MESHTP_CHECK(static_cast<std::int64_t>(local.size()) == numel(ls),
               "gather_param: local buffer has {} values, the {} shard of {} has {}",
               local.size(), name(kind), to_string(global), numel(ls));
  Tensor block(ls);
  std::copy(local.begin(), local.end(), block.values().begin());
  const Tensor stored = mesh::DTensor(mesh, map.stored.spec, map.shape, std::move(block)).full();
  Tensor out(global);
  map.for_each(map.shape, std::vector<std::int64_t>(map.shape.size(), 0), [&](std::int64_t s, std::int64_t g) { out[g] = stored[s]; });
  return out;
}

}  // namespace meshtp::parallel
