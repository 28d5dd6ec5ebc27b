#include "core/precision.hpp"

#include <bit>
#include <cmath>

#include "core/error.hpp"

namespace meshtp {

const char* name(Precision p) {
  switch (p) {
    case Precision::kFp16:
      return "fp16";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp32:
      return "fp32";
  }
  return "?";
}

Precision parse_precision(std::string_view text, std::string_view what) {
  for (const Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    if (text == name(p)) return p;
  }
  fail("{} '{}' is not fp32, bf16 or fp16", what, text);
}

std::uint16_t to_bf16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  const std::uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<std::uint16_t>((bits + 0x7FFFu + lsb) >> 16);
}

void round_to_bf16(const float* in, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(in[i]);
    const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
    const std::uint32_t quiet_nan = (bits | 0x00400000u) & 0xFFFF0000u;  // to_bf16's NaN
    const bool nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
    out[i] = std::bit_cast<float>(nan ? quiet_nan : rounded);
  }
}

float from_bf16(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

}  // namespace meshtp
