#include "parallel/param_shard.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace meshtp::parallel {
namespace {

// How one tensor dim maps local → global.
struct AxisRule {
  // kQkvColumns: a kBlock of the 2D GeMM's permuted QKV out index, mapped through π
  // (param_shard.hpp), whose head blocks follow mesh dim 1 whatever dim splits the block.
  enum class Type { kFull, kBlock, kQkvHeads, kQkvColumns } type = Type::kFull;
  int mesh_dim = 0;  // kBlock, kQkvColumns: the mesh dim whose coordinate picks the block
};

// axis[d] describes local dim d, which is global dim d, or 1 − d when transposed.
struct Rule {
  int ndim = 1;
  AxisRule axis[2];
  bool transposed = false;
};

Rule rule_of(ParamShard kind) {
  using T = AxisRule::Type;
  switch (kind) {
    case ParamShard::kHidden: return {1, {{T::kBlock, 1}, {}}};
    case ParamShard::kColumnFirstWeight: return {2, {{T::kBlock, 0}, {T::kBlock, 1}}};
    case ParamShard::kColumnFirstBias: return {1, {{T::kBlock, 0}, {}}};
    case ParamShard::kRowFirstWeight: return {2, {{T::kBlock, 1}, {T::kBlock, 0}}};
    case ParamShard::kRowFirstBias: return {1, {{T::kBlock, 1}, {}}};
    case ParamShard::kQkvWeight: return {2, {{T::kQkvHeads, 0}, {T::kBlock, 1}}};
    case ParamShard::kQkvBias: return {1, {{T::kQkvHeads, 0}, {}}};
    case ParamShard::kGemm2dWeightT: return {2, {{T::kBlock, 0}, {T::kBlock, 1}}, true};
    case ParamShard::kGemm2dQkvWeight: return {2, {{T::kQkvColumns, 0}, {T::kBlock, 1}}};
    case ParamShard::kGemm2dQkvWeightT:
      return {2, {{T::kBlock, 0}, {T::kQkvColumns, 1}}, true};
    case ParamShard::kGemm2dBias: return {1, {{T::kBlock, 1}, {}}};
    case ParamShard::kGemm2dQkvBias: return {1, {{T::kQkvColumns, 1}, {}}};
  }
  fail("unknown parameter shard kind {}", static_cast<int>(kind));
}

std::int64_t local_extent(const AxisRule& a, std::int64_t global, ParamShard kind, int dim,
                          const std::vector<int>& mesh_shape) {
  switch (a.type) {
    case AxisRule::Type::kFull: return global;
    case AxisRule::Type::kBlock: {
      const int parts = mesh_shape[static_cast<std::size_t>(a.mesh_dim)];
      MESHTP_CHECK(global % parts == 0,
                   "{} parameter: dim {} (size {}) is not divisible by mesh dim {} (size {})",
                   name(kind), dim, global, a.mesh_dim, parts);
      return global / parts;
    }
    case AxisRule::Type::kQkvHeads: {
      const int d1 = mesh_shape[0], d2 = mesh_shape[1];
      MESHTP_CHECK(global % 3 == 0 && (global / 3) % (d1 * d2) == 0,
                   "{} parameter: dim {} (size {}) is not 3·h with h divisible by d1·d2={}",
                   name(kind), dim, global, d1 * d2);
      return global / d1;
    }
    case AxisRule::Type::kQkvColumns: {
      const int parts = mesh_shape[static_cast<std::size_t>(a.mesh_dim)], nc = mesh_shape[1];
      MESHTP_CHECK(global % 3 == 0 && (global / 3) % nc == 0 && global % parts == 0,
                   "{} parameter: dim {} (size {}) is not 3·h with h divisible by Nc={} and "
                   "3·h divisible by mesh dim {} (size {})",
                   name(kind), dim, global, nc, a.mesh_dim, parts);
      return global / parts;
    }
  }
  return global;
}

std::int64_t global_index(const AxisRule& a, std::int64_t local, std::int64_t global_extent,
                          std::int64_t local_extent_, const std::vector<int>& mesh_shape,
                          const std::vector<int>& coords) {
  switch (a.type) {
    case AxisRule::Type::kFull: return local;
    case AxisRule::Type::kBlock:
      return coords[static_cast<std::size_t>(a.mesh_dim)] * local_extent_ + local;
    case AxisRule::Type::kQkvHeads: {
      const std::int64_t h = global_extent / 3;
      const std::int64_t w = h / (mesh_shape[0] * mesh_shape[1]);
      const std::int64_t j = local / (3 * w), t = (local % (3 * w)) / w, u = local % w;
      return t * h + (coords[0] * mesh_shape[1] + j) * w + u;
    }
    case AxisRule::Type::kQkvColumns: {
      const std::int64_t m = coords[static_cast<std::size_t>(a.mesh_dim)] * local_extent_ + local;
      const std::int64_t h = global_extent / 3, w = h / mesh_shape[1];
      const std::int64_t c = m / (3 * w), r = m % (3 * w);
      return (r / w) * h + c * w + r % w;
    }
  }
  return local;
}

void check_mesh(const std::vector<int>& mesh_shape) {
  MESHTP_CHECK(mesh_shape.size() == 2, "parameters are sharded on a 2-D mesh, got {} dims",
               mesh_shape.size());
}

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
  }
  return "?";
}

Shape local_shape(ParamShard kind, const Shape& global, const std::vector<int>& mesh_shape) {
  check_mesh(mesh_shape);
  const Rule r = rule_of(kind);
  MESHTP_CHECK(static_cast<int>(global.size()) == r.ndim, "{} parameter must be {}-D, got {}",
               name(kind), r.ndim, to_string(global));
  Shape local(global.size());
  for (int d = 0; d < r.ndim; ++d) {
    const int gd = r.transposed ? 1 - d : d;
    local[static_cast<std::size_t>(d)] =
        local_extent(r.axis[d], global[static_cast<std::size_t>(gd)], kind, gd, mesh_shape);
  }
  return local;
}

std::vector<int> replicated_dims(ParamShard kind) {
  const Rule r = rule_of(kind);
  std::vector<int> out;
  for (int m = 0; m < 2; ++m) {
    bool used = false;
    for (int d = 0; d < r.ndim; ++d) {
      const auto& a = r.axis[d];
      used |= ((a.type == AxisRule::Type::kBlock || a.type == AxisRule::Type::kQkvColumns) &&
               a.mesh_dim == m) ||
              (a.type == AxisRule::Type::kQkvHeads && m == 0);
    }
    if (!used) out.push_back(m);
  }
  return out;
}

void for_each_local(ParamShard kind, const Shape& global, const std::vector<int>& mesh_shape,
                    const std::vector<int>& coords,
                    const std::function<void(std::int64_t, std::int64_t)>& fn) {
  const Shape local = local_shape(kind, global, mesh_shape);
  const Rule r = rule_of(kind);
  if (r.ndim == 1) {
    for (std::int64_t i = 0; i < local[0]; ++i) {
      fn(i, global_index(r.axis[0], i, global[0], local[0], mesh_shape, coords));
    }
    return;
  }
  // Global extents of local dims 0 and 1.
  const std::int64_t e0 = global[r.transposed ? 1 : 0], e1 = global[r.transposed ? 0 : 1];
  for (std::int64_t i = 0; i < local[0]; ++i) {
    const std::int64_t gi = global_index(r.axis[0], i, e0, local[0], mesh_shape, coords);
    for (std::int64_t j = 0; j < local[1]; ++j) {
      const std::int64_t gj = global_index(r.axis[1], j, e1, local[1], mesh_shape, coords);
      fn(i * local[1] + j, r.transposed ? gj * global[1] + gi : gi * global[1] + gj);
    }
  }
}

void scatter_param(ParamShard kind, const Tensor& global, const mesh::DeviceMesh& mesh,
                   std::span<float> local) {
  const Shape ls = local_shape(kind, global.shape(), mesh.shape());
  MESHTP_CHECK(static_cast<std::int64_t>(local.size()) == numel(ls),
               "scatter_param: local buffer has {} values, the {} shard of {} has {}",
               local.size(), name(kind), to_string(global.shape()), numel(ls));
  for_each_local(kind, global.shape(), mesh.shape(), mesh.coords(),
                 [&](std::int64_t l, std::int64_t g) { local[static_cast<std::size_t>(l)] = global[g]; });
}

Tensor gather_param(ParamShard kind, std::span<const float> local, const Shape& global,
                    const mesh::DeviceMesh& mesh) {
  const Shape ls = local_shape(kind, global, mesh.shape());
  const std::int64_t L = numel(ls);
  MESHTP_CHECK(static_cast<std::int64_t>(local.size()) == L,
               "gather_param: local buffer has {} values, the {} shard of {} has {}",
               local.size(), name(kind), to_string(global), L);
  const int P = mesh.size();
  std::vector<float> all(static_cast<std::size_t>(L * P));
  mesh.comm().all_gather(local, std::span<float>(all));
  Tensor out(global);
  const std::vector<int> rep = replicated_dims(kind);
  for (int r = 0; r < P; ++r) {
    const std::vector<int> coords = mesh.coords_of(r);
    const bool owner = std::all_of(rep.begin(), rep.end(), [&](int m) {
      return coords[static_cast<std::size_t>(m)] == 0;
    });
    if (!owner) continue;
    const float* block = all.data() + static_cast<std::int64_t>(r) * L;
    for_each_local(kind, global, mesh.shape(), coords,
                   [&](std::int64_t l, std::int64_t g) { out[g] = block[l]; });
  }
  return out;
}

}  // namespace meshtp::parallel
