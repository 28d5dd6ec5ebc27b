// The transports for device memory on a real GPU (label gpu; exits 77 without one), one
// process, no mpirun: the host-staged transport over an alone group, through the CUDA
// context's staging (gpu::staging_memory: pinned host, copies on the compute stream), and
// NCCL on a group of one, every operation, blocking and not; and host buffers over both, which
// travel over the host group (DeviceMemory::holds: cudaPointerGetAttributes). comm_host_staged_test
// checks the staging's logic on 1-8 ranks on the host; this checks the CUDA half.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "device/gpu.hpp"

namespace meshtp {
namespace {

using gpu::Buffer;
using gpu::Context;

Context& ctx() {
  static Context context;
  return context;
}

Buffer upload(const std::vector<float>& v) { return ctx().upload_values(v, Element::kF32); }
std::vector<float> download(const Buffer& b) {
  ctx().synchronize();
  return ctx().download_values(b, Element::kF32, static_cast<std::int64_t>(b.bytes() / 4));
}
std::span<float> span(Buffer& b) { return {b.as<float>(), b.bytes() / 4}; }
std::span<const float> cspan(const Buffer& b) { return {b.as<const float>(), b.bytes() / 4}; }

TEST(GpuStagingMemory, TellsDeviceMemoryFromHostMemory) {
  const std::shared_ptr<DeviceMemory> memory = gpu::staging_memory(ctx());
  Buffer on_device = upload({1, 2, 3});
  std::vector<float> on_host(3);
  void* pinned = memory->alloc_host(64);
  EXPECT_TRUE(memory->holds(on_device.as<float>()));
  EXPECT_TRUE(memory->holds(on_device.as<float>() + 2));
  EXPECT_FALSE(memory->holds(on_host.data()));
  EXPECT_FALSE(memory->holds(pinned));
  memory->free_host(pinned, 64);
  // An unknown pointer leaves no sticky CUDA error: the next copy still works.
  EXPECT_EQ(download(on_device), (std::vector<float>{1, 2, 3}));
}

// NCCL moves device memory only: a host buffer (a loss, a norm) goes over the host group.
TEST(GpuNccl, HostBuffersTravelOverTheHostGroup) {
  const comm::Communicator c = comm::Communicator::nccl(comm::Communicator::alone(0, 1),
                                                        ctx().stream(), gpu::staging_memory(ctx()));
  std::vector<double> loss{2.5};
  c.all_reduce(std::span<double>(loss));
  EXPECT_EQ(loss[0], 2.5);
  std::vector<float> gathered(2);
  const std::vector<float> mine{1, 2};
  c.all_gather(std::span<const float>(mine), std::span<float>(gathered));
  EXPECT_EQ(gathered, mine);
  Buffer device = upload({1, 2});
  EXPECT_THROW(c.all_gather(std::span<const float>(mine), span(device)), Error);
}

TEST(GpuHostStaged, AloneGroupLeavesThisRanksPartOnTheDevice) {
  const comm::Communicator c =
      comm::Communicator::host_staged(comm::Communicator::alone(1, 3), gpu::staging_memory(ctx()));
  const Buffer send = upload({1, 2});
  Buffer recv = upload({-7, -7, -7, -7, -7, -7});
  c.all_gather(cspan(send), span(recv));
  EXPECT_EQ(download(recv), (std::vector<float>{-7, -7, 1, 2, -7, -7}));
  Buffer big = upload(std::vector<float>(1 << 20, 3.0f));
  comm::Request r = c.iall_reduce(span(big));
  r.wait();
  EXPECT_EQ(download(big)[12345], 3.0f);
}

TEST(GpuNccl, EveryOperationOnAGroupOfOne) {
  const comm::Communicator c = comm::Communicator::nccl(comm::Communicator::alone(0, 1),
                                                        ctx().stream(), gpu::staging_memory(ctx()));
  EXPECT_EQ(c.transport(), comm::TransportKind::kNccl);
  Buffer a = upload({1, 2, 3, 4});
  c.all_reduce(span(a));
  EXPECT_EQ(download(a), (std::vector<float>{1, 2, 3, 4}));
  Buffer g = upload({0, 0, 0, 0});
  c.all_gather(cspan(a), span(g));
  EXPECT_EQ(download(g), (std::vector<float>{1, 2, 3, 4}));
  Buffer rs = upload({0, 0, 0, 0});
  c.reduce_scatter(cspan(a), span(rs));
  EXPECT_EQ(download(rs), (std::vector<float>{1, 2, 3, 4}));
  Buffer t = upload({0, 0, 0, 0});
  c.all_to_all(cspan(a), span(t));
  EXPECT_EQ(download(t), (std::vector<float>{1, 2, 3, 4}));
  Buffer v = upload({0, 0, 0, 0});
  const std::vector<std::int64_t> counts{4};
  c.all_to_allv(cspan(a), counts, span(v), counts);
  EXPECT_EQ(download(v), (std::vector<float>{1, 2, 3, 4}));
  Buffer s = upload({0, 0, 0, 0});
  c.sendrecv(cspan(a), 0, span(s), 0, 0);
  EXPECT_EQ(download(s), (std::vector<float>{1, 2, 3, 4}));
  Buffer m = upload({5, 6, 7, 8});
  comm::Request r = c.iall_reduce(span(m), comm::ReduceOp::kMax);
  bool after = false;
  r.then([&] { after = true; });
  r.wait();
  EXPECT_TRUE(after);
  EXPECT_EQ(download(m), (std::vector<float>{5, 6, 7, 8}));
  c.barrier();
}

}  // namespace
}  // namespace meshtp
