// libmeshtp_cuda.so: the CUDA plugin's one entry point (cuda_plugin.hpp says what it is).
// Built as a MODULE library only, never into meshtp.
#include "cli/cuda_plugin.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "core/error.hpp"
#include "device/gpu.hpp"
#include "device/gpu_backend.hpp"

namespace meshtp::cli {
namespace {

class GpuDevice final : public CudaDevice {
 public:
  explicit GpuDevice(int ordinal) : ctx_(ordinal), backend_(ctx_) {}
  int ordinal() const override { return ctx_.info().ordinal; }
  int visible_devices() const override { return ctx_.info().devices_visible; }
  std::string name() const override { return ctx_.info().name; }
  std::int64_t memory_bytes() const override { return ctx_.info().memory_bytes; }
  device::Backend& backend() override { return backend_; }
  std::shared_ptr<DeviceMemory> staging_memory() override { return backend_.device_memory(); }
  comm::Communicator nccl(const comm::Communicator& host) override {
    return comm::Communicator::nccl(host, backend_.native_stream(), backend_.device_memory());
  }

 private:
  gpu::Context ctx_;
  device::GpuBackend backend_;
};

void write_error(char* error, std::size_t error_size, const std::string& text) {
  if (error == nullptr || error_size == 0) return;
  const std::size_t n = std::min(text.size(), error_size - 1);
  std::memcpy(error, text.data(), n);
  error[n] = '\0';
}

}  // namespace
}  // namespace meshtp::cli

extern "C" __attribute__((visibility("default"))) meshtp::cli::CudaDevice* meshtp_cuda_open(
    int api, int local_rank, char* error, std::size_t error_size) {
  using meshtp::cli::write_error;
  if (api != meshtp::cli::kCudaPluginApi) {
    write_error(error, error_size,
                fmt::format("the CUDA plugin speaks API {}, meshtp asks for {} (they come from "
                            "different builds: rebuild both)",
                            meshtp::cli::kCudaPluginApi, api));
    return nullptr;
  }
  try {
    std::string why;
    const auto first = meshtp::gpu::probe(&why);
    if (!first) {
      write_error(error, error_size, "no GPU to run on: " + why);
      return nullptr;
    }
    return new meshtp::cli::GpuDevice(local_rank % first->devices_visible);
  } catch (const std::exception& e) {
    write_error(error, error_size, e.what());
  } catch (...) {
    write_error(error, error_size, "unknown error opening the CUDA device");
  }
  return nullptr;
}
