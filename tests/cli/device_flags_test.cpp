// --device and --collectives resolved (cli/device_flags.hpp): every row of its table, cuda's
// auto by the ranks a node holds against the GPUs they see, and every refusal naming why.
#include "cli/device_flags.hpp"

#include <gtest/gtest.h>

#include "error_of.hpp"

namespace meshtp::cli {
namespace {

using comm::TransportKind;
using test_support::error_of;

TEST(ResolveCollectives, CpuIsMpi) {
  EXPECT_EQ(resolve_collectives("cpu", "auto", 4, 0), TransportKind::kMpi);
  EXPECT_EQ(resolve_collectives("cpu", "mpi", 1, 0), TransportKind::kMpi);
}

TEST(ResolveCollectives, CudaAutoIsNcclWhenEveryRankHasItsOwnGpu) {
  EXPECT_EQ(resolve_collectives("cuda", "auto", 1, 1), TransportKind::kNccl);
  EXPECT_EQ(resolve_collectives("cuda", "auto", 4, 8), TransportKind::kNccl);
  EXPECT_EQ(resolve_collectives("cuda", "auto", 8, 8), TransportKind::kNccl);
}

TEST(ResolveCollectives, CudaAutoIsHostStagedWhenRanksShareAGpu) {
  EXPECT_EQ(resolve_collectives("cuda", "auto", 2, 1), TransportKind::kHostStaged);
  EXPECT_EQ(resolve_collectives("cuda", "auto", 9, 8), TransportKind::kHostStaged);
}

TEST(ResolveCollectives, CudaHonoursAnExplicitChoice) {
  EXPECT_EQ(resolve_collectives("cuda", "host-staged", 1, 1), TransportKind::kHostStaged);
  EXPECT_EQ(resolve_collectives("cuda", "nccl", 2, 1), TransportKind::kNccl);  // NCCL refuses
}

TEST(ResolveCollectives, RefusesWhatCannotRun) {
  EXPECT_EQ(error_of([] { resolve_collectives("cuda", "mpi", 1, 1); }),
            "--collectives mpi moves host memory, but --device cuda keeps tensors in device "
            "memory: use --collectives host-staged (through pinned host copies over Open MPI), "
            "nccl, or auto");
  EXPECT_EQ(error_of([] { resolve_collectives("cpu", "nccl", 1, 1); }),
            "--collectives nccl moves device memory, but --device cpu keeps tensors in host "
            "memory: use --collectives mpi (or auto)");
  EXPECT_EQ(error_of([] { resolve_collectives("tpu", "auto", 1, 1); }),
            "--device 'tpu' is not cpu or cuda");
  EXPECT_EQ(error_of([] { resolve_collectives("cuda", "gloo", 1, 1); }),
            "--collectives 'gloo' is not auto, mpi, host-staged or nccl");
  EXPECT_EQ(error_of([] { resolve_collectives("cuda", "auto", 2, 0); }),
            "--collectives auto: cannot choose with 2 ranks on a node and 0 visible GPUs");
}

TEST(DeviceFlags, CudaResolvesOnTheNodeAndTheCpuDescribesItself) {
  const DeviceFlags flags{.device = "cuda", .collectives = "auto"};
  EXPECT_NO_THROW(flags.check());
  EXPECT_EQ(flags.resolve_on_gpus(2, 1), TransportKind::kHostStaged);
  EXPECT_EQ(flags.resolve_on_gpus(1, 1), TransportKind::kNccl);
  const DeviceFlags cpu;
  EXPECT_EQ(cpu.describe(), "cpu; collectives mpi (host memory over Open MPI)");
}

TEST(DeviceFlags, CheckRefusesMpiForCudaBeforeAnyGpu) {
  const DeviceFlags flags{.device = "cuda", .collectives = "mpi"};
  EXPECT_NE(error_of([&] { flags.check(); }).find("--collectives mpi moves host memory"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtp::cli
