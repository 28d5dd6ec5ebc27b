// The GPU under the runtime: probing, a context (stream, cuBLASLt handle and workspace, a
// caching allocator), device buffers and explicit host⇄device copies.
//
// This header is plain C++ (no CUDA header): every target can include it, and it compiles
// whether or not meshtp was built with CUDA. Without CUDA (the configure step says which),
// probe() reports why there is no GPU and Context's constructor throws meshtp::Error.
//
//   Context  one per process and GPU: the compute stream every op runs on, in order, so a
//            host read after synchronize() sees every result; a cuBLASLt handle with a 32 MiB
//            workspace (what cuBLASLt's heuristics assume for Hopper's best kernels).
//   Buffer   device memory from the context's caching allocator: freed blocks are kept in
//            per-size free lists and handed out again (cudaMalloc synchronises the device and
//            costs ~100 µs; a training step allocates the same sizes every step). Plain
//            cudaMalloc, never managed memory. When cudaMalloc fails, the cache is returned to
//            the driver and the allocation tried once more before it throws.
//
// Element types: activations and weights for compute in bf16 or fp32, every accumulation,
// statistic and optimizer state in fp32 (mixed precision, Micikevicius et al. 2018).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/device_memory.hpp"
#include "core/element.hpp"
#include "core/precision.hpp"

namespace meshtp::gpu {

// The element type of a device buffer is core/element.hpp's one enum, Element (fp32 or bf16
// here), named as it is everywhere else.
using meshtp::element_size;
using meshtp::to_string;

// One parameter tensor of a multi-tensor AdamW launch (gpu_ops.hpp's adamw_update): device
// pointers to n fp32 values each, and an optional bf16 compute copy of p.
struct AdamWTensor {
  float* p = nullptr;
  const float* g = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  std::int64_t n = 0;
  void* p_compute = nullptr;
};

// True when this meshtp was compiled with the CUDA backend.
bool compiled_with_cuda();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;       // "NVIDIA H100 80GB HBM3"
  int compute_major = 0;  // 9 for Hopper
  int compute_minor = 0;
  int multiprocessors = 0;
  std::int64_t memory_bytes = 0;
  std::int64_t l2_bytes = 0;
  int clock_mhz = 0;  // SM clock (boost) as the driver reports it
  int memory_clock_mhz = 0;
  int memory_bus_bits = 0;
  int driver_version = 0;  // 13000 = CUDA 13.0
  int runtime_version = 0;
  int devices_visible = 0;
};

// The first GPU, or nullopt with *why_not saying why not ("built without CUDA", "no CUDA
// device: …"). Never throws.
std::optional<DeviceInfo> probe(std::string* why_not = nullptr);
// GPU `ordinal` of the devices_visible this process sees (CUDA_VISIBLE_DEVICES), or nullopt
// with *why_not saying why not (as probe(), or "no CUDA device 2: 2 are visible"). Never throws.
std::optional<DeviceInfo> probe(int ordinal, std::string* why_not);

class Context;

// Device memory of `bytes` bytes, returned to its context's cache when destroyed.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Context& ctx, std::size_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  Context* ctx_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

struct AllocatorStats {
  std::int64_t cuda_mallocs = 0;  // calls to cudaMalloc
  std::int64_t cache_hits = 0;    // allocations served from the free lists
  std::int64_t bytes_in_use = 0;
  std::int64_t bytes_cached = 0;  // freed, kept for reuse
  std::int64_t peak_bytes_in_use = 0;
};

class Context {
 public:
  // Opens the first GPU; throws meshtp::Error naming the reason when there is none.
  Context() : Context(0) {}
  // Opens GPU `ordinal` (probe(ordinal)); throws meshtp::Error naming the reason when there is
  // no such device. Every later call of this thread runs on it (cudaSetDevice).
  explicit Context(int ordinal);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& info() const;

  // Waits for everything queued on the compute stream; throws on an asynchronous CUDA error.
  void synchronize();

  // Host ⇄ device copies on the compute stream (the host side is pageable memory, so the
  // copy is complete when the call returns).
  void upload(void* device, const void* host, std::size_t bytes);
  void download(void* host, const void* device, std::size_t bytes);
  void fill_bytes(void* device, int byte, std::size_t bytes);

  // fp32 host values → a new device buffer of `type` (rounded to nearest even for bf16),
  // and back (bf16 widened exactly).
  Buffer upload_values(std::span<const float> values, Element type);
  std::vector<float> download_values(const Buffer& buffer, Element type, std::int64_t count);

  AllocatorStats allocator_stats() const;
  // Returns every cached block to the driver.
  void release_cached();

  // For the ops (gpu_ops.cpp): opaque handles, cast there to the CUDA types.
  void* stream() const;
  void* blaslt_handle() const;
  void* blas_handle() const;
  void* workspace() const;
  std::size_t workspace_bytes() const;

 private:
  friend class Buffer;
  // A block of at least `bytes`; *block_bytes is its real size, which release() is given.
  void* allocate(std::size_t bytes, std::size_t* block_bytes);
  void release(void* data, std::size_t bytes) noexcept;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The context's memory as the host-staged transport sees it (core/device_memory.hpp,
// comm::Communicator::host_staged): copies on the compute stream, so a collective reads what
// the ops queued before it wrote; page-locked host staging (cudaMallocHost). The context must
// outlive it.
std::shared_ptr<DeviceMemory> staging_memory(Context& ctx);

// A CUDA event recorded on the compute stream when made (no timing): the GPU side of
// device::Event. wait_for() makes later work on the compute stream wait for it.
class StreamEvent {
 public:
  explicit StreamEvent(Context& ctx);
  ~StreamEvent();
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;
  bool done() const;  // cudaEventQuery; throws on an asynchronous error
  void synchronize() const;
  void wait_for(Context& ctx) const;  // the compute stream waits (cudaStreamWaitEvent)

 private:
  void* event_ = nullptr;
};

// Times work on the compute stream with CUDA events: start(), queue work, stop_ms().
class StreamTimer {
 public:
  explicit StreamTimer(Context& ctx);
  ~StreamTimer();
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;
  void start();
  double stop_ms();  // waits for the stop event; milliseconds between the two events

 private:
  Context& ctx_;
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

// bf16 ⇄ fp32 on the host, as the GPU rounds: core/precision.hpp's, the CPU runtime's too.
using meshtp::from_bf16;
using meshtp::round_to_bf16;
using meshtp::to_bf16;

}  // namespace meshtp::gpu
