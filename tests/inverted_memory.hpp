// Memory the host cannot read as it is, for tests of code that moves device buffers without a
// GPU: every byte is held complemented (~b). A transport that handed such a pointer to MPI
// without staging it through to_host/to_device would reduce complemented values; a layer that
// computed on it on the host would compute on them (inverted_device.hpp has the backend).
// Copies and staging allocations are counted. Its "device" allocations are registered
// (track/untrack, process-wide), so that holds() tells them from host memory as
// cudaPointerGetAttributes does on a GPU.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <new>
#include <string>

#include "core/device_memory.hpp"

namespace meshtp::testing {

class InvertedMemory final : public DeviceMemory {
 public:
  std::string name() const override { return "inverted host memory"; }
  void* alloc_host(std::size_t bytes) override {
    ++host_allocs;
    return ::operator new(bytes);
  }
  void free_host(void* host, std::size_t) noexcept override { ::operator delete(host); }
  void to_host(void* host, const void* device, std::size_t bytes) override {
    ++to_host_calls;
    invert(static_cast<unsigned char*>(host), static_cast<const unsigned char*>(device), bytes);
  }
  void to_device(void* device, const void* host, std::size_t bytes) override {
    ++to_device_calls;
    invert(static_cast<unsigned char*>(device), static_cast<const unsigned char*>(host), bytes);
  }
  static void invert(unsigned char* dst, const unsigned char* src, std::size_t bytes) {
    for (std::size_t i = 0; i < bytes; ++i) dst[i] = static_cast<unsigned char>(~src[i]);
  }
  bool holds(const void* p) const override {
    const std::lock_guard lock(mutex());
    const auto& live = registry();
    auto it = live.upper_bound(static_cast<const unsigned char*>(p));
    if (it == live.begin()) return false;
    --it;
    return static_cast<const unsigned char*>(p) < it->first + it->second;
  }
  // [p, p + bytes) is "device" memory until untracked.
  static void track(const void* p, std::size_t bytes) {
    const std::lock_guard lock(mutex());
    registry()[static_cast<const unsigned char*>(p)] = bytes;
  }
  static void untrack(const void* p) {
    const std::lock_guard lock(mutex());
    registry().erase(static_cast<const unsigned char*>(p));
  }

  int host_allocs = 0;
  int to_host_calls = 0;
  int to_device_calls = 0;

 private:
  static std::map<const unsigned char*, std::size_t>& registry() {
    static std::map<const unsigned char*, std::size_t> live;
    return live;
  }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
};

}  // namespace meshtp::testing
