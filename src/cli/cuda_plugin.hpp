// The CUDA plugin: how `meshtp` reaches a GPU without linking CUDA.
//
// `meshtp` links no CUDA library (cuBLASLt's initialisers cost every process about 0.5 s, and
// the planner's commands must start on machines without a driver). For --device cuda it
// dlopens libmeshtp_cuda.so from its own directory (as `meshtp gpu` finds meshtp-gpu) and
// calls the one extern "C" entry point below, which hands back a CudaDevice: the GPU backend
// and what the collectives need from the device. This is how ggml loads its backends when
// built with GGML_BACKEND_DL (ggml/src/ggml-backend-reg.cpp: dlopen a library per backend,
// look up one entry point, check its API version, get an interface back); here there is one
// backend and the interface is plain C++, since plugin and executable are built together.
//
//   libmeshtp_cuda.so   src/cli/cuda_plugin.cpp + the GPU backend (src/device) and the NCCL
//                       transport (src/comm) compiled position-independent. It links CUDA,
//                       cuBLAS(Lt) and NCCL, and no meshtp library: the core, layout, tensor
//                       and comm code it calls is the executable's (linked with
//                       ENABLE_EXPORTS), so the process has one copy of every global.
//   cuda_run.hpp/.cpp   in meshtp: finds, dlopens and asks the plugin; every failure (no
//                       library, missing symbol, another API version, no CUDA device) is one
//                       meshtp::Error naming the library path or CUDA's error.
//
// Built only with the CUDA toolkit; a meshtp built without it says so when --device cuda asks.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "core/device_memory.hpp"
#include "device/backend.hpp"

namespace meshtp::cli {

// One GPU of this process, as the plugin opened it. Destroying it releases the device
// (whatever was made on backend() must be gone first).
class CudaDevice {
 public:
  virtual ~CudaDevice() = default;
  virtual int ordinal() const = 0;          // the CUDA device index opened
  virtual int visible_devices() const = 0;  // how many this process sees
  virtual std::string name() const = 0;     // "NVIDIA H100 80GB HBM3"
  virtual std::int64_t memory_bytes() const = 0;  // the device's global memory
  // GpuBackend over the device's gpu::Context (compute stream, cuBLASLt, caching allocator).
  virtual device::Backend& backend() = 0;
  // The context's memory as the host-staged transport sees it (comm::Communicator::host_staged).
  virtual std::shared_ptr<DeviceMemory> staging_memory() = 0;
  // An NCCL group over the ranks of `host`, its streams ordered after the backend's compute
  // stream (comm::Communicator::nccl). Collective over `host`.
  virtual comm::Communicator nccl(const comm::Communicator& host) = 0;
};

// The plugin's entry point: opens CUDA device (local_rank mod the devices this process sees)
// and returns a new CudaDevice, or returns null with the reason (CUDA's error, named) written
// to error[0..error_size). `api` must be kCudaPluginApi (a plugin from another build refuses,
// naming both). Never throws.
inline constexpr int kCudaPluginApi = 2;
inline constexpr const char* kCudaPluginEntry = "meshtp_cuda_open";
inline constexpr const char* kCudaPluginFile = "libmeshtp_cuda.so";
extern "C" {
using CudaPluginOpen = CudaDevice* (*)(int api, int local_rank, char* error,
                                       std::size_t error_size);
}

}  // namespace meshtp::cli
