// --device cuda for a command (cli, linked into meshtp): the CUDA plugin loaded
// (cuda_plugin.hpp says what it is and why it is a plugin), this rank's GPU opened, the
// collectives resolved (device_flags.hpp) and the device-memory group made over the world.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli/cuda_plugin.hpp"
#include "cli/device_flags.hpp"
#include "comm/communicator.hpp"

namespace meshtp::cli {

// Where meshtp looks for the plugin: beside its own executable (/proc/self/exe).
std::filesystem::path cuda_plugin_path();

// Loads the plugin (once per process; it stays loaded) and opens the device of this local
// rank. Throws meshtp::Error naming the library path and dlerror(), or CUDA's reason.
std::unique_ptr<CudaDevice> open_cuda_device(int local_rank);

// A command's GPU and the device-memory group over its world, for --device cuda.
struct CudaRun {
  std::unique_ptr<CudaDevice> device;   // declared first: destroyed after the group
  comm::TransportKind transport = comm::TransportKind::kHostStaged;
  std::optional<comm::Communicator> group;  // host-staged over the world, or NCCL
  std::string header;  // "cuda (GPU 0 of 1: NAME); collectives nccl (auto: …)", to print
};

// Where a command's layers run (--device): the CPU backend over the world, or this rank's GPU
// over the device-memory group (open_cuda_run below). Whatever was made on the backend or
// the group must go before it does.
struct RunDevice {
  std::optional<CudaRun> cuda;
  device::Backend* backend = nullptr;         // null: the CPU's (GptConfig / BlockConfig take null)
  const comm::Communicator* group = nullptr;  // the world, or cuda->group
  std::string header;  // "cpu; collectives mpi (…)" or CudaRun::header, to print
  // The GPU's memory shared by the ranks of a node (-1 on the CPU: the host's is checked by
  // the command).
  double device_bytes_per_rank = -1;
};
// flags.check() must have passed. Collective over `world`.
RunDevice open_run_device(const comm::Communicator& world, const DeviceFlags& flags);

// Every rank opens its GPU (local rank mod visible GPUs); if any rank cannot, every rank
// throws (its own reason, or which ranks failed), so none waits. Then resolves --collectives
// (flags.resolve_on_gpus with the worst node of the world) and makes the group. Collective
// over `world`. flags.check() must have passed.
CudaRun open_cuda_run(const comm::Communicator& world, const DeviceFlags& flags);

}  // namespace meshtp::cli
