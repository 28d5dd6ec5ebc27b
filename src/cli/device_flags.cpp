#include "cli/device_flags.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace meshtp::cli {

void DeviceFlags::add_to(CLI::App* app) {
  app->add_option("--device", device,
                  "Where tensors live: cpu (cuda: the tensor-parallel layers do not run on it "
                  "yet; `meshtp gpu train` trains on one GPU)")
      ->capture_default_str();
  app->add_option("--collectives", collectives,
                  "What moves them: auto, mpi (host memory), host-staged or nccl (device memory)")
      ->capture_default_str();
}

comm::TransportKind DeviceFlags::resolve() const {
  MESHTP_CHECK(device == "cpu" || device == "cuda", "--device '{}' is not cpu or cuda", device);
  MESHTP_CHECK(collectives == "auto" || collectives == "mpi" || collectives == "host-staged" ||
                   collectives == "nccl",
               "--collectives '{}' is not auto, mpi, host-staged or nccl", collectives);
  MESHTP_CHECK(device == "cpu",
               "--device cuda: the tensor-parallel layers do not run on the CUDA backend yet "
               "(docs/seam.md says what is built); `meshtp gpu train` trains on one GPU, and "
               "--device cpu runs this layout on the host");
  MESHTP_CHECK(collectives == "auto" || collectives == "mpi",
               "--collectives {} moves device memory, but --device cpu keeps tensors in host "
               "memory: use --collectives mpi (or auto)",
               collectives);
  return comm::TransportKind::kMpi;
}

std::string DeviceFlags::describe() const {
  return fmt::format("{}; collectives {} (host memory over Open MPI)", device,
                     comm::to_string(resolve()));
}

}  // namespace meshtp::cli
