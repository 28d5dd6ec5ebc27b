// The 2D GeMMs on the seam: every algorithm × dataflow × mesh of this world size, with slicing,
// run on "device" memory the host cannot read (inverted_device.hpp: every byte complemented)
// through the backend's view primitives and host-staged collectives, equals the serial product.
// A block read or sent without the backend or the staging would arrive complemented and fail
// the comparison, so passing here means the algorithms touch memory only through the seam —
// what lets the same code run on a GPU's memory (GpuBackend, host-staged or NCCL groups).
// Also: the refusals when memory and transport do not match.
#include <gtest/gtest.h>

#include <sstream>

#include "core/error.hpp"
#include "inverted_device.hpp"
#include "mesh/dtensor.hpp"
#include "parallel/gemm2d/gemm2d.hpp"
#include "parallel/gemm2d/gemm2d_linear.hpp"
#include "gemm2d_cases.hpp"
#include "parallel/mesh2d.hpp"
#include "tensor/gemm.hpp"
#include "tensor/random.hpp"

namespace meshtp::parallel {
namespace {

using testing::InvertedBackend;

const mesh::ShardingSpec kBlock2d{mesh::Shard{0}, mesh::Shard{1}};

// A host tensor uploaded into a fresh array of the stand-in, and its packed view.
struct OnDevice {
  device::Array array;
  View view;
};
OnDevice upload(InvertedBackend& be, const Tensor& t) {
  OnDevice d{be.alloc(t.numel(), Element::kF32), {}};
  be.upload(d.array, t.values());
  d.view = d.array.view(t.shape()[0], t.shape()[1]);
  return d;
}

// One case on the stand-in: the distributed C gathered on the host, against the reference.
double run_on_device(const mesh::DeviceMesh& host_mesh, const mesh::DeviceMesh& device_mesh,
                     InvertedBackend& be, Gemm2dWorkspace& ws, const Gemm2dShape& shape,
                     const Gemm2dOptions& options) {
  const Tensor a = uniform_tensor(global_a_shape(options.dataflow, shape), 21);
  const Tensor b = uniform_tensor(global_b_shape(options.dataflow, shape), 22);
  const auto da = mesh::DTensor::distribute(a, host_mesh, kBlock2d);
  const auto db = mesh::DTensor::distribute(b, host_mesh, kBlock2d);
  const OnDevice a_dev = upload(be, da.local()), b_dev = upload(be, db.local());
  const Tensor c_poison({shape.m / host_mesh.size(0), shape.n / host_mesh.size(1)}, std::nanf(""));
  const OnDevice c_dev = upload(be, c_poison);
  gemm2d(device_mesh, a_dev.view, b_dev.view, c_dev.view, options, ws);
  Tensor c_local(c_poison.shape());
  const std::vector<float> got = be.download(c_dev.array);
  std::copy(got.begin(), got.end(), c_local.values().begin());
  const Tensor c = mesh::DTensor(host_mesh, kBlock2d, {shape.m, shape.n}, c_local).full();
  const Tensor want = serial_product(options.dataflow, a, b, shape);
  return max_relative_error(c.values(), want.values());
}

TEST(Gemm2dSeam, EveryAlgorithmDataflowAndMeshOnMemoryTheHostCannotRead) {
  const auto world = comm::Communicator::world();
  InvertedBackend be;
  const auto staged = comm::Communicator::host_staged(world, be.memory);
  const Gemm2dShape s{.m = 32, .n = 48, .k = 16};
  int cases = 0;
  for (const auto& shape : meshes2d(world.size())) {
    const mesh::DeviceMesh host_mesh(world, shape), device_mesh(staged, shape);
    Gemm2dWorkspace ws(be);  // shared across cases: reuse must not leak stale data
    for (const Algorithm algo : layout::all<layout::Algorithm>()) {
      if (algo == Algorithm::kCannon && shape[0] != shape[1]) continue;
      const std::vector<int> slice_counts =
          algo == Algorithm::kMeshSlice || algo == Algorithm::kSumma ? std::vector<int>{1, 2}
                                                                     : std::vector<int>{1};
      for (const Dataflow dataflow : layout::all<layout::Dataflow>()) {
        for (const int slices : slice_counts) {
          const Gemm2dOptions o{.algo = algo, .dataflow = dataflow, .params = {.slices = slices}};
          EXPECT_LE(run_on_device(host_mesh, device_mesh, be, ws, s, o), 1e-5)
              << describe(host_mesh, s, o);
          ++cases;
        }
      }
    }
  }
  EXPECT_GT(cases, 0);
  EXPECT_GT(be.gemm_calls, 0);
  // Only the staging touched the memory on the host's behalf when there were peers.
  if (world.size() > 1) {
    EXPECT_GT(be.memory->to_host_calls, 0);
  }
}

TEST(Gemm2dSeam, MeshSliceBlockedSlicesPackThroughTheBackend) {
  // block = 1: every slice is scattered single rows / columns, packed and unpacked by the
  // backend's copy_blocks.
  const auto world = comm::Communicator::world();
  InvertedBackend be;
  const auto staged = comm::Communicator::host_staged(world, be.memory);
  const Gemm2dShape s{.m = 32, .n = 32, .k = 32};
  for (const auto& shape : meshes2d(world.size())) {
    const mesh::DeviceMesh host_mesh(world, shape), device_mesh(staged, shape);
    Gemm2dWorkspace ws(be);
    for (const Dataflow dataflow : layout::all<layout::Dataflow>()) {
      const Gemm2dOptions o{.algo = Algorithm::kMeshSlice,
                            .dataflow = dataflow,
                            .params = {.slices = 2},
                            .block = 1};
      EXPECT_LE(run_on_device(host_mesh, device_mesh, be, ws, s, o), 1e-5)
          << describe(host_mesh, s, o);
    }
  }
}

TEST(Gemm2dSeam, TheLinearLayerRunsOnTheSeamToo) {
  // gemm2d_linear's three products (forward, backward-data, backward-weight += through a
  // workspace slot and the backend's add), on the stand-in, against the host run.
  const auto world = comm::Communicator::world();
  InvertedBackend be;
  const auto staged = comm::Communicator::host_staged(world, be.memory);
  for (const auto& shape : meshes2d(world.size())) {
    const mesh::DeviceMesh host_mesh(world, shape), device_mesh(staged, shape);
    const Gemm2dLinearPlan plan =
        plan_gemm2d_linear(shape[0], shape[1], 16, 24, 32, {.stationary = Stationary::kOutput});
    const auto local = [&](Shape global, std::uint64_t seed) {
      return mesh::DTensor::distribute(uniform_tensor(global, seed), host_mesh, kBlock2d).local();
    };
    const Tensor in = local(plan.input_shape(), 1), weight = local(plan.weight_shape(), 2);
    const Tensor dout = local(plan.output_shape(), 3);
    Tensor out(dout.shape()), din = local(plan.input_shape(), 4), dw = local(plan.weight_shape(), 5);
    const Tensor din0 = din, dw0 = dw;
    Gemm2dWorkspace host_ws;
    gemm2d_linear_forward(host_mesh, plan, out.matrix(), in.matrix(), weight.matrix(), host_ws);
    gemm2d_linear_backward(host_mesh, plan, din.matrix(), dw.matrix(), dout.matrix(), in.matrix(),
                           weight.matrix(), host_ws);

    Gemm2dWorkspace ws(be);
    const OnDevice d_in = upload(be, in), d_w = upload(be, weight), d_dout = upload(be, dout);
    const OnDevice d_out = upload(be, Tensor(dout.shape())), d_din = upload(be, din0),
                   d_dw = upload(be, dw0);
    gemm2d_linear_forward(device_mesh, plan, d_out.view, d_in.view, d_w.view, ws);
    gemm2d_linear_backward(device_mesh, plan, d_din.view, d_dw.view, d_dout.view, d_in.view,
                           d_w.view, ws);
    EXPECT_LE(max_relative_error(be.download(d_out.array), out.values()), 1e-6);
    EXPECT_LE(max_relative_error(be.download(d_din.array), din.values()), 1e-6);
    EXPECT_LE(max_relative_error(be.download(d_dw.array), dw.values()), 1e-6);
  }
}

TEST(Gemm2dSeam, MemoryAndTransportThatDoNotMatchAreRefusedOnEveryRank) {
  const auto world = comm::Communicator::world();
  InvertedBackend be;
  const mesh::DeviceMesh host_mesh(world, {1, world.size()});
  Gemm2dWorkspace ws(be);
  const OnDevice a = upload(be, Tensor({4, 4})), b = upload(be, Tensor({4 * world.size(), 4})),
                 c = upload(be, Tensor({4, 4}));
  try {
    gemm2d(host_mesh, a.view, b.view, c.view, {.dataflow = Dataflow::kOS}, ws);
    ADD_FAILURE() << "device views over an mpi group were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("over mesh dim 0's mpi group"), std::string::npos)
        << e.what();
  }
  // Host blocks with a workspace on the device backend.
  Tensor ha({4, 4}), hb({4 * world.size(), 4}), hc({4, 4});
  EXPECT_THROW(gemm2d(host_mesh, ha.matrix(), hb.matrix(), hc.matrix(), {}, ws), Error);
  // A layer's host slot of a device workspace.
  EXPECT_THROW((void)ws.get(64, std::size_t{16}), Error);
}

}  // namespace
}  // namespace meshtp::parallel
