// A CPU-backend array (device/backend.hpp) as a host tensor: the tests' view of the parameters
// and gradients a model holds in its backend's memory (the CPU's here, so the host reads it).
#pragma once

#include "device/backend.hpp"
#include "ops/cpu_backend.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::testing {

// A copy of an fp32 host array's elements, shaped `shape` (empty: one dim of them all).
inline Tensor copy_of(const device::Array& a, Shape shape = {}) {
  const std::span<const float> v = device::floats(a);
  if (shape.empty()) shape = {a.count()};
  return Tensor(std::move(shape), std::vector<float>(v.begin(), v.end()));
}

// A CPU-backend array holding a tensor's values.
inline device::Array array_of(const Tensor& t) {
  device::Array a = cpu_backend().alloc(t.numel(), Element::kF32);
  cpu_backend().upload(a, t.values());
  return a;
}

}  // namespace meshtp::testing
