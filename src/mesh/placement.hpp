// Placements (ATP §3.1, Fig. 4): how one mesh dim holds a tensor.
//
//   Shard(d)      the group of that mesh dim splits tensor dim d into equal, ordered blocks;
//                 the member with coordinate c holds block c
//   Replicate     every member holds the same values
//   Partial(op)   every member holds a summand (op = sum) or a candidate (op = max); the
//                 tensor is op over the group
//
// A ShardingSpec is one placement per mesh dim. When several mesh dims shard the same
// tensor dim, the outer (lower-numbered) mesh dim splits first: with Shard(0) on mesh dims
// 0 and 1 of a (2,2) mesh, rank (c0, c1) holds block 2·c0 + c1 of four.
//
// Worked example (ATP Fig. 4): mesh (2,2), tensor [[1,2,3,4],[5,6,7,8]],
// spec [Replicate, Shard(0)] → ranks 0 and 2 hold [1,2,3,4], ranks 1 and 3 hold [5,6,7,8].
//
// Uneven shards are rejected: a tensor dim that does not divide by the product of the
// mesh dims sharding it is an error naming the dim and both sizes.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "comm/communicator.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::mesh {

using ::meshtp::to_string;  // Shape's, alongside the placement overloads below

struct Shard {
  int dim = 0;
  bool operator==(const Shard&) const = default;
};
struct Replicate {
  bool operator==(const Replicate&) const = default;
};
struct Partial {
  comm::ReduceOp op = comm::ReduceOp::kSum;
  bool operator==(const Partial&) const = default;
};

using Placement = std::variant<Shard, Replicate, Partial>;
using ShardingSpec = std::vector<Placement>;

bool is_shard(const Placement& p);
bool is_shard(const Placement& p, int tensor_dim);
bool is_partial(const Placement& p);

// "S(0)", "R", "P(sum)", "P(max)"; a spec prints as "[R, S(0)]".
std::string to_string(const Placement& p);
std::string to_string(const ShardingSpec& spec);
std::ostream& operator<<(std::ostream& os, const ShardingSpec& spec);

// Parses the printed form back: "[R, S(0)]", "S(1),P(sum)", "R". Throws on anything else.
ShardingSpec parse_spec(std::string_view text);

// Throws unless the spec fits a mesh of `mesh_ndim` dims and a tensor of `global` shape:
// one placement per mesh dim, Shard dims exist, sharded dims divide evenly.
void validate_spec(const ShardingSpec& spec, int mesh_ndim, const std::vector<int>& mesh_shape,
                   const Shape& global);

// Mesh dims that shard tensor dim d, in mesh-dim order (outer first).
std::vector<int> mesh_dims_sharding(const ShardingSpec& spec, int tensor_dim);

// The local block shape: global dims divided by the mesh dims that shard them.
Shape local_shape(const Shape& global, const ShardingSpec& spec,
                  const std::vector<int>& mesh_shape);

// Offset of this rank's block in the global tensor, per tensor dim.
std::vector<std::int64_t> local_offset(const Shape& global, const ShardingSpec& spec,
                                       const std::vector<int>& mesh_shape,
                                       const std::vector<int>& coords);

}  // namespace meshtp::mesh
