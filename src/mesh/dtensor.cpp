#include "mesh/dtensor.hpp"

#include "core/error.hpp"
#include "tensor/blocks.hpp"

namespace meshtp::mesh {

DTensor::DTensor(const DeviceMesh& mesh, ShardingSpec spec, Shape global_shape, Tensor local)
    : mesh_(&mesh),
      spec_(std::move(spec)),
      global_shape_(std::move(global_shape)),
      local_(std::move(local)) {
  validate_spec(spec_, mesh.ndim(), mesh.shape(), global_shape_);
  const Shape expected = local_shape(global_shape_, spec_, mesh.shape());
  MESHTP_CHECK(local_.shape() == expected,
               "local block of shape {} does not match spec {} of a {} tensor on {} (expected {})",
               to_string(local_.shape()), to_string(spec_), to_string(global_shape_),
               mesh.to_string(), to_string(expected));
}

DTensor DTensor::distribute(const Tensor& global, const DeviceMesh& mesh, ShardingSpec spec) {
  validate_spec(spec, mesh.ndim(), mesh.shape(), global.shape());
  // Start fully replicated; the same local steps a redistribute would take produce the
  // block (slice, outer mesh dim first) and the summands (make_partial).
  const ShardingSpec replicated(spec.size(), Replicate{});
  Tensor local = global;
  for (const RedistributeStep& step : plan_redistribute(replicated, spec)) {
    apply_step(step, mesh, local);
  }
  return DTensor(mesh, std::move(spec), global.shape(), std::move(local));
}

DTensor DTensor::redistribute(const ShardingSpec& target) const {
  validate_spec(target, mesh_->ndim(), mesh_->shape(), global_shape_);
  Tensor local = local_;
  for (const RedistributeStep& step : plan_redistribute(spec_, target)) {
    apply_step(step, *mesh_, local);
  }
  return DTensor(*mesh_, target, global_shape_, std::move(local));
}

Tensor DTensor::full() const {
  return redistribute(ShardingSpec(spec_.size(), Replicate{})).local_;
}

void apply_step(const RedistributeStep& step, const DeviceMesh& mesh, Tensor& local) {
  const comm::Communicator& group = mesh.dim_comm(step.mesh_dim);
  const int parts = group.size();
  // Over a mesh dim of size 1 every step is the identity: skip it rather than copy the block.
  if (parts == 1) return;
  if (step.kind == StepKind{LocalStep::kSlice}) {
    local = chunk(local, step.tensor_dim, parts, group.rank());
    return;
  }
  if (step.kind == StepKind{LocalStep::kMakePartial}) {
    if (step.op == comm::ReduceOp::kSum && group.rank() != 0) local.fill(0.0f);
    return;
  }
  using layout::CollectiveKind;
  switch (std::get<CollectiveKind>(step.kind)) {
    case CollectiveKind::kAllGather: {
      Tensor gathered({local.numel() * parts});  // tensor storage: never zero-filled
      group.all_gather(std::span<const float>(local.values()), gathered.values());
      local = unpack_chunks(gathered.values(), local.shape(), step.tensor_dim, parts);
      return;
    }
    case CollectiveKind::kAllReduce:
      group.all_reduce(local.values(), step.op);
      return;
    case CollectiveKind::kReduceScatter: {
      Tensor packed({local.numel()});
      pack_chunks(local, step.tensor_dim, parts, packed.values());
      Shape part_shape = local.shape();
      part_shape[step.tensor_dim] /= parts;
      Tensor part(part_shape);
      group.reduce_scatter(std::span<const float>(packed.values()), part.values(), step.op);
      local = std::move(part);
      return;
    }
    case CollectiveKind::kAllToAll: {
      // Send chunk j along the new shard dim to peer j; peer i's piece comes back as the
      // i-th block along the dim being gathered.
      Tensor packed({local.numel()}), received({local.numel()});
      pack_chunks(local, step.to_tensor_dim, parts, packed.values());
      group.all_to_all(std::span<const float>(packed.values()), received.values());
      Shape piece_shape = local.shape();
      piece_shape[step.to_tensor_dim] /= parts;
      local = unpack_chunks(received.values(), piece_shape, step.tensor_dim, parts);
      return;
    }
    default:
      fail("redistribute has no {} step", to_string(step));
  }
}

}  // namespace meshtp::mesh
