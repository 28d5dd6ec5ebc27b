// --device cpu|cuda and --collectives auto|mpi|host-staged|nccl: where a command's tensors live
// and which transport moves them (docs/seam.md), declared once for train, bench train, bench
// layer, bench rank and block.
//
//   --device   --collectives   transport (comm/communicator.hpp TransportKind)
//   cpu        auto | mpi      mpi: host memory over Open MPI
//   cpu        host-staged     refused: host memory needs no staging
//   cpu        nccl            refused: NCCL moves device memory
//   cuda       any             refused, saying why: the tensor-parallel layers do not run on
//                              the CUDA backend yet (the transports for device memory exist:
//                              host-staged where ranks share a GPU, NCCL where they do not)
#pragma once

#include <string>

#include "cli/cli11.hpp"
#include "comm/communicator.hpp"

namespace meshtp::cli {

struct DeviceFlags {
  std::string device = "cpu";
  std::string collectives = "auto";

  void add_to(CLI::App* app);
  // The transport this run's collectives use; throws meshtp::Error naming the values for a
  // combination that cannot run. Prints nothing.
  comm::TransportKind resolve() const;
  // "cpu; collectives mpi (host memory over Open MPI)", for a command's header.
  std::string describe() const;
};

}  // namespace meshtp::cli
