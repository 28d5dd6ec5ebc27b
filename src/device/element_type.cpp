// What gpu.hpp declares that needs no GPU: element types and the host's bf16 rounding.
#include <bit>
#include <cmath>

#include "device/gpu.hpp"

namespace meshtp::gpu {

std::size_t element_size(ElementType type) { return type == ElementType::kF32 ? 4 : 2; }

const char* to_string(ElementType type) { return type == ElementType::kF32 ? "fp32" : "bf16"; }

// bf16 is the top half of an fp32: round the low 16 bits away, to nearest, ties to even
// (what __float2bfloat16_rn does on the GPU).
std::uint16_t to_bf16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  const std::uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<std::uint16_t>((bits + 0x7FFFu + lsb) >> 16);
}

float from_bf16(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

}  // namespace meshtp::gpu
