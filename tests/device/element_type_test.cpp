// The host's bf16 rounding (device/gpu.hpp), which every bf16 reference in the GPU tests relies
// on: round to nearest, ties to even, NaN stays NaN, overflow rounds to infinity. Runs without
// a GPU.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "device/gpu.hpp"

namespace meshtp::gpu {
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

TEST(ElementType, SizesAndNames) {
  EXPECT_EQ(element_size(ElementType::kF32), 4u);
  EXPECT_EQ(element_size(ElementType::kBF16), 2u);
  EXPECT_STREQ(to_string(ElementType::kBF16), "bf16");
}

}  // namespace
}  // namespace meshtp::gpu
