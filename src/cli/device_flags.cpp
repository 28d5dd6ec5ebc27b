#include "cli/device_flags.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace meshtp::cli {
namespace {

void check_spelling(const std::string& device, const std::string& collectives) {
  MESHTP_CHECK(device == "cpu" || device == "cuda", "--device '{}' is not cpu or cuda", device);
  MESHTP_CHECK(collectives == "auto" || collectives == "mpi" || collectives == "host-staged" ||
                   collectives == "nccl",
               "--collectives '{}' is not auto, mpi, host-staged or nccl", collectives);
}

void check_names(const std::string& device, const std::string& collectives) {
  check_spelling(device, collectives);
  if (device == "cpu") {
    MESHTP_CHECK(collectives == "auto" || collectives == "mpi",
                 "--collectives {} moves device memory, but --device cpu keeps tensors in host "
                 "memory: use --collectives mpi (or auto)",
                 collectives);
  } else {
    MESHTP_CHECK(collectives != "mpi",
                 "--collectives mpi moves host memory, but --device cuda keeps tensors in device "
                 "memory: use --collectives host-staged (through pinned host copies over Open "
                 "MPI), nccl, or auto");
  }
}

}  // namespace

comm::TransportKind resolve_collectives(const std::string& device, const std::string& collectives,
                                        int ranks_on_node, int visible_gpus) {
  check_names(device, collectives);
  if (device == "cpu") return comm::TransportKind::kMpi;
  if (collectives == "host-staged") return comm::TransportKind::kHostStaged;
  if (collectives == "nccl") return comm::TransportKind::kNccl;
  MESHTP_CHECK(ranks_on_node >= 1 && visible_gpus >= 1,
               "--collectives auto: cannot choose with {} ranks on a node and {} visible GPUs",
               ranks_on_node, visible_gpus);
  return ranks_on_node <= visible_gpus ? comm::TransportKind::kNccl
                                       : comm::TransportKind::kHostStaged;
}

std::string describe_transport(comm::TransportKind kind) {
  switch (kind) {
    case comm::TransportKind::kMpi:
      return "host memory over Open MPI";
    case comm::TransportKind::kAlone:
      return "no peer";
    case comm::TransportKind::kHostStaged:
      return "device memory through pinned host copies over Open MPI";
    case comm::TransportKind::kNccl:
      return "device memory over NCCL, one GPU per rank";
  }
  return "?";
}

void DeviceFlags::add_to(CLI::App* app) {
  app->add_option("--device", device,
                  "Where tensors live: cpu, or cuda (the CUDA plugin libmeshtp_cuda.so beside "
                  "meshtp; GPU = local rank mod visible GPUs)")
      ->capture_default_str();
  app->add_option("--collectives", collectives,
                  "What moves them: auto, mpi (host memory), host-staged or nccl (device memory)")
      ->capture_default_str();
}

void DeviceFlags::check() const { check_names(device, collectives); }

comm::TransportKind DeviceFlags::resolve_on_gpus(int ranks_on_node, int visible_gpus) const {
  return resolve_collectives(device, collectives, ranks_on_node, visible_gpus);
}

std::string DeviceFlags::describe() const {
  check_spelling(device, collectives);
  MESHTP_CHECK(device == "cpu", "describe(): --device {} is described by its run (cuda_run.hpp)",
               device);
  const comm::TransportKind kind = resolve_collectives(device, collectives, 1, 0);
  return fmt::format("{}; collectives {} ({})", device, comm::to_string(kind),
                     describe_transport(kind));
}

}  // namespace meshtp::cli
