// DeviceMemory: memory the host cannot read directly (a GPU's), as the layers that move bytes
// see it — what a transport needs to stage a device buffer through host memory, and nothing
// else. It lives in core so that both sides of the seam reach it without knowing each other:
// the comm layer's host-staged transport uses it (comm::Communicator::host_staged), the device
// layer implements it for CUDA (device/gpu.hpp staging_memory), and tests implement it on the
// host with a representation of their own.
//
//   to_host(host, device, n)    host[0, n) ← device[0, n): complete when it returns, ordered
//                               after every op already queued on the device's compute stream
//                               (so a collective reads what the layer before it wrote)
//   to_device(device, host, n)  device[0, n) ← host[0, n), before any op queued after it
//   alloc_host(n), free_host    host staging of n bytes: page-locked (pinned) where the device
//                               has such memory, so copies run at the bus's speed
//   holds(p)                    whether p points into the device's memory. A group that moves
//                               device memory moves host buffers too (a loss, a norm, a count
//                               the layers reduce on the host), unstaged over its host group
#pragma once

#include <cstddef>
#include <string>

namespace meshtp {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;

  virtual std::string name() const = 0;  // "cuda:0 (NVIDIA H100 80GB HBM3)"
  virtual void* alloc_host(std::size_t bytes) = 0;
  virtual void free_host(void* host, std::size_t bytes) noexcept = 0;
  virtual void to_host(void* host, const void* device, std::size_t bytes) = 0;
  virtual void to_device(void* device, const void* host, std::size_t bytes) = 0;
  virtual bool holds(const void* p) const = 0;
};

}  // namespace meshtp
