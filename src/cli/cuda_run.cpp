#include "cli/cuda_run.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <mutex>
#include <system_error>
#include <vector>

#include "core/error.hpp"

namespace meshtp::cli {
namespace {

// The entry point, loaded once; the library stays loaded until the process ends (its objects
// may live until then).
CudaPluginOpen load_plugin() {
#ifndef MESHTP_CUDA_PLUGIN
  fail("--device cuda: this meshtp was built without CUDA (the CUDA toolkit was not found when "
       "it was configured, so there is no {}; docs/gpu.md says how to build with it)",
       kCudaPluginFile);
#else
  static std::mutex mutex;
  static CudaPluginOpen entry = nullptr;
  std::lock_guard lock(mutex);
  if (entry != nullptr) return entry;
  const std::string path = cuda_plugin_path().string();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    fail("--device cuda: cannot load the CUDA plugin {}: {}", path,
         why != nullptr ? why : "dlopen failed");
  }
  void* symbol = dlsym(handle, kCudaPluginEntry);
  if (symbol == nullptr) {
    const char* why = dlerror();
    fail("--device cuda: the CUDA plugin {} has no entry point {}: {}", path, kCudaPluginEntry,
         why != nullptr ? why : "dlsym failed");
  }
  entry = reinterpret_cast<CudaPluginOpen>(symbol);
  return entry;
#endif
}

// This rank's index among the ranks on its host, and how many share it: the host names of
// the world gathered (the GPU a rank opens is its local rank mod the GPUs it sees).
std::pair<int, int> local_rank_and_count(const comm::Communicator& world) {
  std::array<char, 256> name{};
  gethostname(name.data(), name.size() - 1);
  std::vector<char> all(name.size() * static_cast<std::size_t>(world.size()));
  world.all_gather(comm::ConstBuffer{name.data(), Element::kU8, name.size()},
                   comm::Buffer{all.data(), Element::kU8, all.size()});
  int local = 0, count = 0;
  for (int r = 0; r < world.size(); ++r) {
    const bool same = std::string(all.data() + static_cast<std::size_t>(r) * name.size()) ==
                      std::string(name.data());
    if (!same) continue;
    if (r < world.rank()) ++local;
    ++count;
  }
  return {local, count};
}

}  // namespace

std::filesystem::path cuda_plugin_path() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  MESHTP_CHECK(!ec, "--device cuda: cannot find this executable's directory (/proc/self/exe: {})",
               ec.message());
  return self.parent_path() / kCudaPluginFile;
}

std::unique_ptr<CudaDevice> open_cuda_device(int local_rank) {
  const CudaPluginOpen entry = load_plugin();
  std::array<char, 1024> error{};
  CudaDevice* device = entry(kCudaPluginApi, local_rank, error.data(), error.size());
  MESHTP_CHECK(device != nullptr, "--device cuda: {}", error.data());
  return std::unique_ptr<CudaDevice>(device);
}

CudaRun open_cuda_run(const comm::Communicator& world, const DeviceFlags& flags) {
  const auto [local_rank, on_node] = local_rank_and_count(world);
  CudaRun run;
  std::string error;
  try {
    run.device = open_cuda_device(local_rank);
  } catch (const Error& e) {
    error = e.what();
  }
  // Every rank's verdict before any throws: a rank that opened its GPU does not wait for one
  // that could not.
  std::array<int, 3> worst{error.empty() ? 0 : 1, on_node,
                           error.empty() ? -run.device->visible_devices() : 0};
  world.all_reduce(std::span<int>(worst), comm::ReduceOp::kMax);
  if (!error.empty()) fail("{}", error);
  MESHTP_CHECK(worst[0] == 0,
               "--device cuda: another rank could not open its GPU (this one opened GPU {}); "
               "rank 0's error says why",
               run.device->ordinal());
  const int ranks_on_node = worst[1], visible = -worst[2];
  run.transport = flags.resolve_on_gpus(ranks_on_node, visible);
  const std::string why =
      flags.collectives != "auto" ? std::string("as asked")
      : run.transport == comm::TransportKind::kNccl
          ? fmt::format("auto: {} rank{} on a node, {} GPU{} visible", ranks_on_node,
                        ranks_on_node == 1 ? "" : "s", visible, visible == 1 ? "" : "s")
          : fmt::format("auto: {} ranks on a node share {} GPU{}", ranks_on_node, visible,
                        visible == 1 ? "" : "s");
  if (run.transport == comm::TransportKind::kNccl) {
    run.group.emplace(run.device->nccl(world));
  } else {
    run.group.emplace(comm::Communicator::host_staged(world, run.device->staging_memory()));
  }
  run.header = fmt::format("cuda (rank 0: GPU {} of {}, {}); collectives {} ({}; {})",
                           run.device->ordinal(), run.device->visible_devices(),
                           run.device->name(), comm::to_string(run.transport),
                           describe_transport(run.transport), why);
  return run;
}

RunDevice open_run_device(const comm::Communicator& world, const DeviceFlags& flags) {
  RunDevice rd;
  if (flags.device != "cuda") {
    rd.group = &world;
    rd.header = flags.describe();
    return rd;
  }
  rd.cuda.emplace(open_cuda_run(world, flags));
  rd.backend = &rd.cuda->device->backend();
  rd.group = &*rd.cuda->group;
  rd.header = rd.cuda->header;
  // Ranks of a node spread over its GPUs (local rank mod visible GPUs).
  const auto [local_rank, on_node] = local_rank_and_count(world);
  (void)local_rank;
  const int visible = std::max(1, rd.cuda->device->visible_devices());
  const int sharing = (on_node + visible - 1) / visible;
  rd.device_bytes_per_rank = static_cast<double>(rd.cuda->device->memory_bytes()) / sharing;
  return rd;
}

}  // namespace meshtp::cli
