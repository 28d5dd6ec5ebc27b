#include "mesh/placement.hpp"

#include <ostream>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace meshtp::mesh {

bool is_shard(const Placement& p) { return std::holds_alternative<Shard>(p); }
bool is_shard(const Placement& p, int tensor_dim) {
  return is_shard(p) && std::get<Shard>(p).dim == tensor_dim;
}
bool is_partial(const Placement& p) { return std::holds_alternative<Partial>(p); }

std::string to_string(const Placement& p) {
  if (const auto* s = std::get_if<Shard>(&p)) return "S(" + std::to_string(s->dim) + ")";
  if (const auto* q = std::get_if<Partial>(&p)) {
    return q->op == comm::ReduceOp::kSum ? "P(sum)" : "P(max)";
  }
  return "R";
}

std::string to_string(const ShardingSpec& spec) {
  std::string out = "[";
  for (std::size_t i = 0; i < spec.size(); ++i) {
    if (i) out += ", ";
    out += to_string(spec[i]);
  }
  return out + "]";
}

std::ostream& operator<<(std::ostream& os, const ShardingSpec& spec) {
  return os << to_string(spec);
}

ShardingSpec parse_spec(std::string_view text) {
  std::string compact;
  for (const char c : text) {
    if (c != ' ') compact += c;
  }
  std::string_view rest = compact;
  if (rest.size() >= 2 && rest.front() == '[' && rest.back() == ']') {
    rest = rest.substr(1, rest.size() - 2);
  }
  ShardingSpec spec;
  while (!rest.empty()) {
    const auto cut = rest.find(',');
    const std::string_view item = rest.substr(0, cut);
    if (item == "R") {
      spec.emplace_back(Replicate{});
    } else if (item == "P(sum)") {
      spec.emplace_back(Partial{comm::ReduceOp::kSum});
    } else if (item == "P(max)") {
      spec.emplace_back(Partial{comm::ReduceOp::kMax});
    } else if (item.size() >= 4 && item.substr(0, 2) == "S(" && item.back() == ')' &&
               item.find_first_not_of("0123456789", 2) == item.size() - 1) {
      spec.emplace_back(Shard{std::stoi(std::string(item.substr(2, item.size() - 3)))});
    } else {
      fail("bad sharding spec '{}': '{}' is not one of R, S(d), P(sum), P(max)", text, item);
    }
    if (cut == std::string_view::npos) break;
    rest = rest.substr(cut + 1);
    MESHTP_CHECK(!rest.empty(), "bad sharding spec '{}': trailing comma", text);
  }
  MESHTP_CHECK(!spec.empty(), "bad sharding spec '{}': no placements", text);
  return spec;
}

std::vector<int> mesh_dims_sharding(const ShardingSpec& spec, int tensor_dim) {
  std::vector<int> dims;
  for (int i = 0; i < static_cast<int>(spec.size()); ++i) {
    if (is_shard(spec[i], tensor_dim)) dims.push_back(i);
  }
  return dims;
}

void validate_spec(const ShardingSpec& spec, int mesh_ndim, const std::vector<int>& mesh_shape,
                   const Shape& global) {
  MESHTP_CHECK(static_cast<int>(spec.size()) == mesh_ndim,
               "sharding spec {} has {} placements but the mesh {} has {} dims", to_string(spec),
               spec.size(), format_mesh_shape(mesh_shape), mesh_ndim);
  for (int i = 0; i < mesh_ndim; ++i) {
    if (const auto* s = std::get_if<Shard>(&spec[i])) {
      MESHTP_CHECK(s->dim >= 0 && s->dim < static_cast<int>(global.size()),
                   "sharding spec {} shards tensor dim {}, but the tensor {} has {} dims",
                   to_string(spec), s->dim, to_string(global), global.size());
    }
  }
  for (int d = 0; d < static_cast<int>(global.size()); ++d) {
    std::int64_t parts = 1;
    for (const int i : mesh_dims_sharding(spec, d)) parts *= mesh_shape[i];
    MESHTP_CHECK(global[d] % parts == 0,
                 "tensor dim {} of size {} (shape {}) is not divisible by the {} shards of spec "
                 "{} on mesh {}",
                 d, global[d], to_string(global), parts, to_string(spec),
                 format_mesh_shape(mesh_shape));
  }
}

Shape local_shape(const Shape& global, const ShardingSpec& spec,
                  const std::vector<int>& mesh_shape) {
  Shape local = global;
  for (std::size_t i = 0; i < spec.size(); ++i) {
    if (const auto* s = std::get_if<Shard>(&spec[i])) local[s->dim] /= mesh_shape[i];
  }
  return local;
}

std::vector<std::int64_t> local_offset(const Shape& global, const ShardingSpec& spec,
                                       const std::vector<int>& mesh_shape,
                                       const std::vector<int>& coords) {
  const Shape local = local_shape(global, spec, mesh_shape);
  std::vector<std::int64_t> offset(global.size(), 0);
  for (int d = 0; d < static_cast<int>(global.size()); ++d) {
    // Outer mesh dim splits first: block index = Σ over sharding dims, row-major.
    std::int64_t block = 0;
    for (const int i : mesh_dims_sharding(spec, d)) block = block * mesh_shape[i] + coords[i];
    offset[d] = block * local[d];
  }
  return offset;
}

}  // namespace meshtp::mesh
