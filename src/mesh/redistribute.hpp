// Redistribution between two sharding specs, as a plan of per-mesh-dim steps (ATP §3.1, Table 1).
//
//   Shard→Replicate     all_gather      over that mesh dim's group
//   Partial→Replicate   all_reduce
//   Partial→Shard       reduce_scatter
//   Replicate→Shard     local slice     (no communication)
//   Shard(a)→Shard(b)   all_to_all
//   Replicate→Partial   local           (sum: coordinate 0 keeps the values, others zero)
//
// Ordering rule. When several mesh dims shard one tensor dim, the outer mesh dim splits
// first, so a rank's block is only canonical if shards are added inner-most last and
// removed inner-most first. The planner therefore runs in two phases:
//   1. inner → outer: remove every shard that is not part of the common prefix of the
//      source's and the target's sharding mesh dims for that tensor dim (all_gather, or an
//      all_to_all straight into the target shard when that is already in canonical order);
//   2. outer → inner: resolve partials (all_reduce / reduce_scatter) and add shards (slice)
//      and partials (local).
// Example, mesh (2,2): [S(0), R] → [R, S(0)] is not one all_to_all (the block order would
// differ); it plans all_gather on mesh dim 0, then slice on mesh dim 1.
//
// The plan is data: it prints, and tests check which collectives a transition uses.
#pragma once

#include <iosfwd>
#include <string>
#include <variant>
#include <vector>

#include "layout/vocabulary.hpp"
#include "mesh/placement.hpp"

namespace meshtp::mesh {

// A step is a collective over one mesh dim's group, or a local step without communication.
enum class LocalStep { kSlice, kMakePartial };
using StepKind = std::variant<layout::CollectiveKind, LocalStep>;

struct RedistributeStep {
  StepKind kind = LocalStep::kSlice;
  int mesh_dim = 0;
  int tensor_dim = -1;     // gathered / scattered / sliced dim; for all_to_all the gathered one
  int to_tensor_dim = -1;  // all_to_all only: the dim that becomes sharded
  comm::ReduceOp op = comm::ReduceOp::kSum;

  bool operator==(const RedistributeStep&) const = default;
};

std::string to_string(const RedistributeStep& step);  // "all_gather(mesh dim 0, tensor dim 1)"
std::ostream& operator<<(std::ostream& os, const RedistributeStep& step);

// The steps that turn `from` into `to` (both one placement per mesh dim). Pure: no MPI.
std::vector<RedistributeStep> plan_redistribute(const ShardingSpec& from, const ShardingSpec& to);

}  // namespace meshtp::mesh
