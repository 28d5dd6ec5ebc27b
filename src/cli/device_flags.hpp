// --device cpu|cuda and --collectives auto|mpi|host-staged|nccl: where a command's tensors live
// and which transport moves them (docs/seam.md), declared once for every command that takes them.
//
//   --device   --collectives   transport (comm/communicator.hpp TransportKind)
//   cpu        auto | mpi      mpi: host memory over Open MPI
//   cpu        host-staged     refused: host memory needs no staging
//   cpu        nccl            refused: NCCL moves device memory
//   cuda       mpi             refused: device memory travels staged or over NCCL
//   cuda       auto            nccl when every node has no more ranks than visible GPUs (one
//                              GPU each), host-staged when ranks share a GPU
//   cuda       host-staged     host-staged (any number of ranks per GPU)
//   cuda       nccl            nccl (NCCL itself refuses two ranks on one GPU, naming both)
//
// Every command that takes them (gemm, bench gemm2d, train, bench train, bench layer, bench
// rank, block) runs on the CUDA backend through cuda_run.hpp, which resolves the collectives
// with resolve_on_gpus.
#pragma once

#include <string>

#include "cli/cli11.hpp"
#include "comm/communicator.hpp"

namespace meshtp::cli {

// The transport for a device and collectives choice (the table above), given the worst node
// of the run: the most ranks any node holds and the fewest GPUs any rank sees (both used for
// cuda's auto only). Pure: throws meshtp::Error naming the values for a combination that
// cannot run.
comm::TransportKind resolve_collectives(const std::string& device, const std::string& collectives,
                                        int ranks_on_node, int visible_gpus);

// What a transport moves, for a command's header: "host memory over Open MPI", …
std::string describe_transport(comm::TransportKind kind);

struct DeviceFlags {
  std::string device = "cpu";
  std::string collectives = "auto";

  void add_to(CLI::App* app);
  // Throws meshtp::Error for a combination refused whatever the node has (unknown names,
  // cuda with mpi, cpu with device-memory collectives). Needs no GPU: call it first.
  void check() const;
  // resolve_collectives with this run's worst node.
  comm::TransportKind resolve_on_gpus(int ranks_on_node, int visible_gpus) const;
  // "cpu; collectives mpi (host memory over Open MPI)", for a command's header (--device cpu;
  // cuda_run.hpp says what a GPU run is).
  std::string describe() const;
};

}  // namespace meshtp::cli
