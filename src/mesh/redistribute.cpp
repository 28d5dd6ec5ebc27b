#include "mesh/redistribute.hpp"

#include <ostream>

#include "core/error.hpp"

namespace meshtp::mesh {
namespace {

using layout::CollectiveKind;

std::string_view kind_name(const StepKind& kind) {
  if (const auto* c = std::get_if<CollectiveKind>(&kind)) return layout::name(*c);
  return std::get<LocalStep>(kind) == LocalStep::kSlice ? "slice" : "make_partial";
}

// Is mesh dim i (currently sharding tensor dim d in `cur`) part of the common prefix of
// cur's and target's ordered sharding dims for d? Those shards are already final.
bool in_common_prefix(const ShardingSpec& cur, const ShardingSpec& target, int i, int d) {
  const std::vector<int> lc = mesh_dims_sharding(cur, d);
  const std::vector<int> lt = mesh_dims_sharding(target, d);
  for (std::size_t p = 0; p < lc.size(); ++p) {
    if (p >= lt.size() || lc[p] != lt[p]) return false;
    if (lc[p] == i) return true;
  }
  return false;
}

// May mesh dim i start sharding tensor dim b now and still end in canonical order? Yes iff
// b's current sharders are exactly the target's sharders of b that are outer to i.
bool can_add_shard(const ShardingSpec& cur, const ShardingSpec& target, int i, int b) {
  std::vector<int> outer_target;
  for (const int j : mesh_dims_sharding(target, b)) {
    if (j < i) outer_target.push_back(j);
  }
  return mesh_dims_sharding(cur, b) == outer_target;
}

}  // namespace

std::string to_string(const RedistributeStep& step) {
  std::string text = std::string(kind_name(step.kind)) + "(mesh dim " +
                     std::to_string(step.mesh_dim);
  if (step.kind == StepKind{CollectiveKind::kAllToAll}) {
    text += ", tensor dim " + std::to_string(step.tensor_dim) + " → " +
            std::to_string(step.to_tensor_dim);
  } else if (step.tensor_dim >= 0) {
    text += ", tensor dim " + std::to_string(step.tensor_dim);
  }
  if (step.kind == StepKind{CollectiveKind::kAllReduce} ||
      step.kind == StepKind{CollectiveKind::kReduceScatter} ||
      step.kind == StepKind{LocalStep::kMakePartial}) {
    text += step.op == comm::ReduceOp::kSum ? ", sum" : ", max";
  }
  return text + ")";
}

std::ostream& operator<<(std::ostream& os, const RedistributeStep& step) {
  return os << to_string(step);
}

std::vector<RedistributeStep> plan_redistribute(const ShardingSpec& from,
                                                const ShardingSpec& to) {
  MESHTP_CHECK(from.size() == to.size(), "redistribute from {} to {}: specs of different length",
               to_string(from), to_string(to));
  const int n = static_cast<int>(from.size());
  ShardingSpec cur = from;
  std::vector<RedistributeStep> steps;

  // Phase 1, inner → outer: take off shards that are not final.
  for (int i = n - 1; i >= 0; --i) {
    const auto* shard = std::get_if<Shard>(&cur[i]);
    if (shard == nullptr || in_common_prefix(cur, to, i, shard->dim)) continue;
    const int d = shard->dim;
    const auto* target_shard = std::get_if<Shard>(&to[i]);
    ShardingSpec without_i = cur;
    without_i[i] = Replicate{};
    if (target_shard != nullptr && target_shard->dim != d &&
        can_add_shard(without_i, to, i, target_shard->dim)) {
      steps.push_back({.kind = CollectiveKind::kAllToAll,
                       .mesh_dim = i,
                       .tensor_dim = d,
                       .to_tensor_dim = target_shard->dim});
      cur[i] = *target_shard;
    } else {
      steps.push_back({.kind = CollectiveKind::kAllGather, .mesh_dim = i, .tensor_dim = d});
      cur[i] = Replicate{};
    }
  }

  // Phase 2, outer → inner: resolve partials, add shards and partials.
  for (int i = 0; i < n; ++i) {
    if (cur[i] == to[i]) continue;
    if (const auto* partial = std::get_if<Partial>(&cur[i])) {
      const auto* target_shard = std::get_if<Shard>(&to[i]);
      ShardingSpec without_i = cur;
      without_i[i] = Replicate{};
      if (target_shard != nullptr && can_add_shard(without_i, to, i, target_shard->dim)) {
        steps.push_back({.kind = CollectiveKind::kReduceScatter,
                         .mesh_dim = i,
                         .tensor_dim = target_shard->dim,
                         .op = partial->op});
        cur[i] = *target_shard;
        continue;
      }
      steps.push_back({.kind = CollectiveKind::kAllReduce, .mesh_dim = i, .op = partial->op});
      cur[i] = Replicate{};
      if (cur[i] == to[i]) continue;
    }
    MESHTP_CHECK(std::holds_alternative<Replicate>(cur[i]),
                 "internal: redistribute {} → {} reached {} at mesh dim {}", to_string(from),
                 to_string(to), to_string(cur), i);
    if (const auto* target_shard = std::get_if<Shard>(&to[i])) {
      MESHTP_CHECK(can_add_shard(cur, to, i, target_shard->dim),
                   "internal: redistribute {} → {} cannot slice mesh dim {} from {}",
                   to_string(from), to_string(to), i, to_string(cur));
      steps.push_back({.kind = LocalStep::kSlice, .mesh_dim = i, .tensor_dim = target_shard->dim});
    } else {
      steps.push_back(
          {.kind = LocalStep::kMakePartial, .mesh_dim = i, .op = std::get<Partial>(to[i]).op});
    }
    cur[i] = to[i];
  }
  return steps;
}

}  // namespace meshtp::mesh
