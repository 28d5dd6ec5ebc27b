#include "core/precision.hpp"

#include <bit>

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

Element compute_element(Precision p) {
  MESHTP_CHECK(p == Precision::kFp32 || p == Precision::kBf16,
               "--precision {} is not one a device trains in (fp32, bf16)", name(p));
  return p == Precision::kFp32 ? Element::kF32 : Element::kBF16;
}

namespace {

// The fp32 bits of the bf16 nearest to the fp32 with these bits: the low 16 bits rounded away
// to nearest, ties to even (+0x7FFF, +1 more when bit 16 is set); a NaN stays a NaN, made
// quiet (bit 22). Branch-free, so the bulk loop below vectorises.
constexpr std::uint32_t bf16_bits(std::uint32_t bits) {
  const bool nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  return nan ? (bits | 0x00400000u) & 0xFFFF0000u : rounded;
}

}  // namespace

std::uint16_t to_bf16(float value) {
  return static_cast<std::uint16_t>(bf16_bits(std::bit_cast<std::uint32_t>(value)) >> 16);
}

void round_to_bf16(const float* in, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    out[i] = std::bit_cast<float>(bf16_bits(std::bit_cast<std::uint32_t>(in[i])));
  }
}

void floats_to_bf16(const float* in, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<std::uint16_t>(bf16_bits(std::bit_cast<std::uint32_t>(in[i])) >> 16);
  }
}

void bf16_to_floats(const std::uint16_t* in, float* out, std::int64_t n) {
  // from_bf16 spelled out: a shift the compiler vectorises (a call per value cost the bf16
  // step 6% of its time on the CPU).
  for (std::int64_t i = 0; i < n; ++i) {
    out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(in[i]) << 16);
  }
}

float from_bf16(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

}  // namespace meshtp
