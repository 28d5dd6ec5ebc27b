// DTensor: a distributed tensor = this rank's local block + the global shape + the mesh +
// the sharding spec (one placement per mesh dim, see placement.hpp).
//
//   distribute(global, mesh, spec)   every rank holds the same global tensor; each keeps its
//                                    block (Shard), all of it (Replicate), or a summand
//                                    (Partial(sum): coordinate 0 holds it, the others 0)
//   full()                           the global tensor on every rank
//   redistribute(spec)               any spec → any spec, by the steps of plan_redistribute
//
// The mesh is held by reference: it must outlive the DTensor.
#pragma once

#include "mesh/device_mesh.hpp"
#include "mesh/placement.hpp"
#include "mesh/redistribute.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::mesh {

class DTensor {
 public:
  // Wraps an existing local block; its shape must be the spec's local shape.
  DTensor(const DeviceMesh& mesh, ShardingSpec spec, Shape global_shape, Tensor local);

  static DTensor distribute(const Tensor& global, const DeviceMesh& mesh, ShardingSpec spec);

  const DeviceMesh& mesh() const { return *mesh_; }
  const ShardingSpec& spec() const { return spec_; }
  const Shape& global_shape() const { return global_shape_; }
  const Tensor& local() const { return local_; }
  Tensor& local() { return local_; }

  DTensor redistribute(const ShardingSpec& target) const;
  Tensor full() const;

 private:
  const DeviceMesh* mesh_;
  ShardingSpec spec_;
  Shape global_shape_;
  Tensor local_;
};

// Runs one step on a local block in place (collective over the step's mesh dim group).
void apply_step(const RedistributeStep& step, const DeviceMesh& mesh, Tensor& local);

}  // namespace meshtp::mesh
