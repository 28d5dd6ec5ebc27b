// Context, Buffer and the caching allocator on the CUDA runtime (gpu.hpp says what they are).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "device/cuda_check.hpp"
#include "device/gpu.hpp"

namespace meshtp::gpu {

bool compiled_with_cuda() { return true; }

std::optional<DeviceInfo> probe(std::string* why_not) { return probe(0, why_not); }

std::optional<DeviceInfo> probe(int ordinal, std::string* why_not) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    if (why_not != nullptr)
      *why_not = status != cudaSuccess
                     ? fmt::format("no CUDA device: {} ({})", cudaGetErrorName(status),
                                   cudaGetErrorString(status))
                     : std::string("no CUDA device: the driver sees none");
    cudaGetLastError();  // clear the sticky-free error so a later probe starts clean
    return std::nullopt;
  }
  if (ordinal < 0 || ordinal >= count) {
    if (why_not != nullptr)
      *why_not = fmt::format("no CUDA device {}: {} {} visible", ordinal, count,
                             count == 1 ? "is" : "are");
    return std::nullopt;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) {
    if (why_not != nullptr)
      *why_not = fmt::format("no CUDA device: cudaGetDeviceProperties({}) failed", ordinal);
    return std::nullopt;
  }
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.memory_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
  info.l2_bytes = prop.l2CacheSize;
  info.memory_bus_bits = prop.memoryBusWidth;
  // CUDA 13 moved the clocks out of cudaDeviceProp: ask for the attributes.
  cudaDeviceGetAttribute(&info.clock_mhz, cudaDevAttrClockRate, ordinal);
  cudaDeviceGetAttribute(&info.memory_clock_mhz, cudaDevAttrMemoryClockRate, ordinal);
  info.clock_mhz /= 1000;  // kHz → MHz
  info.memory_clock_mhz /= 1000;
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  info.devices_visible = count;
  return info;
}

namespace {

// Sizes are rounded up so that a block freed by one tensor fits the next of a similar size:
// 512 B granules below 1 MiB, 2 MiB granules above (cudaMalloc's own granularity for large
// blocks), as PyTorch's caching allocator does.
std::size_t rounded_size(std::size_t bytes) {
  constexpr std::size_t kSmall = 512, kLarge = 2u << 20, kLargeFrom = 1u << 20;
  if (bytes == 0) bytes = 1;
  const std::size_t granule = bytes < kLargeFrom ? kSmall : kLarge;
  return (bytes + granule - 1) / granule * granule;
}

constexpr std::size_t kWorkspaceBytes = 32u << 20;

}  // namespace

struct Context::Impl {
  DeviceInfo info;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cublasHandle_t blas = nullptr;
  void* workspace = nullptr;
  // Free blocks by rounded size (exact-size reuse: a best fit in the same size class).
  std::multimap<std::size_t, void*> free_blocks;
  AllocatorStats stats;
  std::mutex mutex;
};

Context::Context(int ordinal) : impl_(std::make_unique<Impl>()) {
  std::string why;
  const auto info = probe(ordinal, &why);
  MESHTP_CHECK(info.has_value(), "no GPU to run on: {}", why);
  impl_->info = *info;
  MESHTP_CUDA(cudaSetDevice(ordinal));
  MESHTP_CUDA(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking));
  MESHTP_CUBLAS(cublasLtCreate(&impl_->lt));
  MESHTP_CUBLAS(cublasCreate(&impl_->blas));
  MESHTP_CUBLAS(cublasSetStream(impl_->blas, impl_->stream));
  MESHTP_CUDA(cudaMalloc(&impl_->workspace, kWorkspaceBytes));
  MESHTP_CUBLAS(cublasSetWorkspace(impl_->blas, impl_->workspace, kWorkspaceBytes));
}

Context::~Context() {
  if (impl_->stream != nullptr) cudaStreamSynchronize(impl_->stream);
  release_cached();
  if (impl_->blas != nullptr) cublasDestroy(impl_->blas);
  if (impl_->lt != nullptr) cublasLtDestroy(impl_->lt);
  if (impl_->workspace != nullptr) cudaFree(impl_->workspace);
  if (impl_->stream != nullptr) cudaStreamDestroy(impl_->stream);
}

const DeviceInfo& Context::info() const { return impl_->info; }
void* Context::stream() const { return impl_->stream; }
void* Context::blaslt_handle() const { return impl_->lt; }
void* Context::blas_handle() const { return impl_->blas; }
void* Context::workspace() const { return impl_->workspace; }
std::size_t Context::workspace_bytes() const { return kWorkspaceBytes; }

void Context::synchronize() { MESHTP_CUDA(cudaStreamSynchronize(impl_->stream)); }

void* Context::allocate(std::size_t bytes, std::size_t* block_bytes) {
  const std::size_t size = rounded_size(bytes);
  std::lock_guard lock(impl_->mutex);
  auto& stats = impl_->stats;
  // Best fit among cached blocks of this size up to 2x (a larger block would waste memory).
  auto it = impl_->free_blocks.lower_bound(size);
  if (it != impl_->free_blocks.end() && it->first <= 2 * size) {
    void* p = it->second;
    const std::size_t got = it->first;
    impl_->free_blocks.erase(it);
    stats.cache_hits++;
    stats.bytes_cached -= static_cast<std::int64_t>(got);
    *block_bytes = got;
    stats.bytes_in_use += static_cast<std::int64_t>(got);
    stats.peak_bytes_in_use = std::max(stats.peak_bytes_in_use, stats.bytes_in_use);
    return p;
  }
  void* p = nullptr;
  cudaError_t status = cudaMalloc(&p, size);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    // Give the cache back and try once more.
    cudaStreamSynchronize(impl_->stream);
    for (auto& [bytes_cached, block] : impl_->free_blocks) cudaFree(block);
    impl_->free_blocks.clear();
    stats.bytes_cached = 0;
    status = cudaMalloc(&p, size);
  }
  if (status != cudaSuccess) {
    cudaGetLastError();
    fail("GPU out of memory: cannot allocate {} bytes ({} in use, {} on the device)", size,
         stats.bytes_in_use, impl_->info.memory_bytes);
  }
  *block_bytes = size;
  stats.cuda_mallocs++;
  stats.bytes_in_use += static_cast<std::int64_t>(size);
  stats.peak_bytes_in_use = std::max(stats.peak_bytes_in_use, stats.bytes_in_use);
  return p;
}

void Context::release(void* data, std::size_t bytes) noexcept {
  std::lock_guard lock(impl_->mutex);
  // Work queued on the stream may still read the block; the stream runs in order, so the
  // next user of the block (queued after this point on the same stream) is safe.
  impl_->free_blocks.emplace(bytes, data);
  impl_->stats.bytes_in_use -= static_cast<std::int64_t>(bytes);
  impl_->stats.bytes_cached += static_cast<std::int64_t>(bytes);
}

void Context::release_cached() {
  std::lock_guard lock(impl_->mutex);
  if (impl_->stream != nullptr) cudaStreamSynchronize(impl_->stream);
  for (auto& [bytes, block] : impl_->free_blocks) cudaFree(block);
  impl_->free_blocks.clear();
  impl_->stats.bytes_cached = 0;
}

AllocatorStats Context::allocator_stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}

void Context::upload(void* device, const void* host, std::size_t bytes) {
  MESHTP_CUDA(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, impl_->stream));
  MESHTP_CUDA(cudaStreamSynchronize(impl_->stream));
}

void Context::download(void* host, const void* device, std::size_t bytes) {
  MESHTP_CUDA(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, impl_->stream));
  MESHTP_CUDA(cudaStreamSynchronize(impl_->stream));
}

void Context::fill_bytes(void* device, int byte, std::size_t bytes) {
  MESHTP_CUDA(cudaMemsetAsync(device, byte, bytes, impl_->stream));
}

Buffer Context::upload_values(std::span<const float> values, Element type) {
  Buffer buffer(*this, values.size() * element_size(type));
  if (type == Element::kF32) {
    upload(buffer.data(), values.data(), values.size() * sizeof(float));
  } else {
    std::vector<std::uint16_t> bits(values.size());
    std::transform(values.begin(), values.end(), bits.begin(), to_bf16);
    upload(buffer.data(), bits.data(), bits.size() * sizeof(std::uint16_t));
  }
  return buffer;
}

std::vector<float> Context::download_values(const Buffer& buffer, Element type,
                                            std::int64_t count) {
  const auto n = static_cast<std::size_t>(count);
  MESHTP_CHECK(n * element_size(type) <= buffer.bytes(),
               "download of {} {} values from a buffer of {} bytes", count, to_string(type),
               buffer.bytes());
  std::vector<float> values(n);
  if (type == Element::kF32) {
    download(values.data(), buffer.data(), n * sizeof(float));
  } else {
    std::vector<std::uint16_t> bits(n);
    download(bits.data(), buffer.data(), n * sizeof(std::uint16_t));
    std::transform(bits.begin(), bits.end(), values.begin(), from_bf16);
  }
  return values;
}

Buffer::Buffer(Context& ctx, std::size_t bytes) : ctx_(&ctx) {
  data_ = ctx.allocate(bytes, &bytes_);
}

Buffer::~Buffer() {
  if (data_ != nullptr) ctx_->release(data_, bytes_);
}

Buffer::Buffer(Buffer&& other) noexcept
    : ctx_(other.ctx_), data_(other.data_), bytes_(other.bytes_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ctx_->release(data_, bytes_);
    ctx_ = other.ctx_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

namespace {

class CudaStagingMemory final : public DeviceMemory {
 public:
  explicit CudaStagingMemory(Context& ctx) : ctx_(ctx) {}
  std::string name() const override {
    return fmt::format("cuda:{} ({})", ctx_.info().ordinal, ctx_.info().name);
  }
  void* alloc_host(std::size_t bytes) override {
    void* p = nullptr;
    MESHTP_CUDA(cudaMallocHost(&p, bytes));
    return p;
  }
  void free_host(void* host, std::size_t) noexcept override { cudaFreeHost(host); }
  void to_host(void* host, const void* device, std::size_t bytes) override {
    ctx_.download(host, device, bytes);
  }
  void to_device(void* device, const void* host, std::size_t bytes) override {
    ctx_.upload(device, host, bytes);
  }
  // Device or managed memory; host memory (pageable, or pinned) is not.
  bool holds(const void* p) const override {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
      cudaGetLastError();  // an unknown pointer is host memory; clear the sticky error
      return false;
    }
    return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  }

 private:
  Context& ctx_;
};

}  // namespace

std::shared_ptr<DeviceMemory> staging_memory(Context& ctx) {
  return std::make_shared<CudaStagingMemory>(ctx);
}

StreamEvent::StreamEvent(Context& ctx) {
  MESHTP_CUDA(cudaEventCreateWithFlags(reinterpret_cast<cudaEvent_t*>(&event_),
                                       cudaEventDisableTiming));
  MESHTP_CUDA(
      cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(ctx.stream())));
}

StreamEvent::~StreamEvent() { cudaEventDestroy(static_cast<cudaEvent_t>(event_)); }

bool StreamEvent::done() const {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (status == cudaErrorNotReady) return false;
  MESHTP_CUDA(status);
  return true;
}

void StreamEvent::synchronize() const {
  MESHTP_CUDA(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
}

void StreamEvent::wait_for(Context& ctx) const {
  MESHTP_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(ctx.stream()),
                                  static_cast<cudaEvent_t>(event_), 0));
}

StreamTimer::StreamTimer(Context& ctx) : ctx_(ctx) {
  MESHTP_CUDA(cudaEventCreate(reinterpret_cast<cudaEvent_t*>(&start_)));
  MESHTP_CUDA(cudaEventCreate(reinterpret_cast<cudaEvent_t*>(&stop_)));
}

StreamTimer::~StreamTimer() {
  cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

void StreamTimer::start() {
  MESHTP_CUDA(
      cudaEventRecord(static_cast<cudaEvent_t>(start_), static_cast<cudaStream_t>(ctx_.stream())));
}

double StreamTimer::stop_ms() {
  MESHTP_CUDA(
      cudaEventRecord(static_cast<cudaEvent_t>(stop_), static_cast<cudaStream_t>(ctx_.stream())));
  MESHTP_CUDA(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)));
  float ms = 0;
  MESHTP_CUDA(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)));
  return ms;
}

}  // namespace meshtp::gpu
