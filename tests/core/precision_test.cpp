// Precision's names and bf16's rounding (core/precision.hpp), which the CPU runtime's bf16 GeMMs
// and every bf16 reference in the GPU tests rely on: round to nearest, ties to even, NaN stays
// NaN, overflow rounds to infinity.
#include "core/precision.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.hpp"

namespace meshtp {
namespace {

TEST(Bf16, RoundsToNearestTiesToEven) {
  EXPECT_EQ(round_to_bf16(1.0f), 1.0f);
  EXPECT_EQ(round_to_bf16(1.0f + 1.0f / 256), 1.0f);               // tie, even is down
  EXPECT_EQ(round_to_bf16(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);  // tie, even is up
  EXPECT_EQ(round_to_bf16(1.0f + 1.5f / 256), 1.0f + 2.0f / 256);  // above the tie
  EXPECT_EQ(round_to_bf16(-1.0f - 1.5f / 256), -1.0f - 2.0f / 256);
  EXPECT_EQ(to_bf16(1.0f), 0x3F80);
}

TEST(Bf16, SpecialValues) {
  EXPECT_TRUE(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload is only in the low bits must not become infinity.
  EXPECT_TRUE(std::isnan(round_to_bf16(std::bit_cast<float>(0x7F800001u))));
  EXPECT_EQ(round_to_bf16(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_to_bf16(std::numeric_limits<float>::max()),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_to_bf16(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(round_to_bf16(-0.0f)));
}

TEST(Bf16, RoundingErrorIsAtMostHalfAnUlpOfEightBits) {
  // |round_to_bf16(x) − x| ≤ 2⁻⁸·|x| for normal x, and the rounded value has 8 significant
  // bits (the low 16 bits of its fp32 are zero).
  float x = 1.0e-30f;
  for (int i = 0; i < 2000; ++i, x *= -1.0437f) {
    const float r = round_to_bf16(x);
    EXPECT_LE(std::abs(static_cast<double>(r) - x),
              std::ldexp(std::abs(static_cast<double>(x)), -8));
    EXPECT_EQ(std::bit_cast<std::uint32_t>(r) & 0xFFFFu, 0u);
  }
}

TEST(Bf16, BulkConversionsEqualOneByOne) {
  std::vector<float> in{1.0f + 1.0f / 256,
                        1.0f + 3.0f / 256,
                        -0.0f,
                        3.3e38f,
                        std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(),
                        std::bit_cast<float>(0x7F800001u),
                        std::bit_cast<float>(0xFF800001u),
                        std::numeric_limits<float>::denorm_min()};
  for (std::uint32_t bits = 0x3F800000u; bits < 0x3F820000u; bits += 0x101u) {
    in.push_back(std::bit_cast<float>(bits));
  }
  std::vector<float> out(in.size(), 7.0f), widened(in.size(), 7.0f);
  std::vector<std::uint16_t> bits(in.size(), 7);
  const auto n = static_cast<std::int64_t>(in.size());
  round_to_bf16(in.data(), out.data(), n);
  floats_to_bf16(in.data(), bits.data(), n);
  bf16_to_floats(bits.data(), widened.data(), n);
  for (std::size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(out[i]),
              std::bit_cast<std::uint32_t>(round_to_bf16(in[i])))
        << "element " << i;
    EXPECT_EQ(bits[i], to_bf16(in[i])) << "element " << i;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(widened[i]),
              std::bit_cast<std::uint32_t>(from_bf16(bits[i])))
        << "element " << i;
  }
}

TEST(Precision, NamesParseBack) {
  for (const Precision p : {Precision::kFp16, Precision::kFp32, Precision::kBf16}) {
    EXPECT_EQ(parse_precision(name(p)), p);
  }
  EXPECT_EQ(element_bytes(Precision::kFp32), 4);
  EXPECT_EQ(element_bytes(Precision::kBf16), 2);
  try {
    parse_precision("fp8", "--precision");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--precision 'fp8' is not fp32, bf16 or fp16");
  }
}

// The one bridge from a run's precision to its compute buffers' Element.
TEST(Precision, ComputeElement) {
  EXPECT_EQ(compute_element(Precision::kFp32), Element::kF32);
  EXPECT_EQ(compute_element(Precision::kBf16), Element::kBF16);
  try {
    compute_element(Precision::kFp16);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--precision fp16 is not one a device trains in (fp32, bf16)");
  }
}

}  // namespace
}  // namespace meshtp
