#include "tensor/random.hpp"

#include <cmath>
#include <numbers>

namespace meshtp {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1], 24 random bits: exactly representable in float, never 0 (log-safe).
double unit_open(std::uint64_t bits) { return (static_cast<double>(bits >> 40) + 1.0) / 16777216.0; }

}  // namespace

float uniform_at(std::uint64_t seed, std::uint64_t index) {
  const std::uint64_t bits = splitmix64(splitmix64(seed) + index);
  return static_cast<float>(2.0 * unit_open(bits) - 1.0);
}

float normal_at(std::uint64_t seed, std::uint64_t index) {
  const std::uint64_t base = splitmix64(splitmix64(seed ^ 0x6E6F726D616Cull) + index);
  const double u1 = unit_open(base);
  const double u2 = unit_open(splitmix64(base));
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                            std::cos(2.0 * std::numbers::pi * u2));
}

Tensor uniform_tensor(Shape shape, std::uint64_t seed, float scale) {
  Tensor t(std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    t[i] = scale * uniform_at(seed, static_cast<std::uint64_t>(i));
  }
  return t;
}

Tensor normal_tensor(Shape shape, std::uint64_t seed, float stddev) {
  Tensor t(std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    t[i] = stddev * normal_at(seed, static_cast<std::uint64_t>(i));
  }
  return t;
}

}  // namespace meshtp
