// The device buffers' element types. Runs without a GPU. (The host's bf16 rounding, which every
// bf16 reference in the GPU tests relies on, is core/precision.hpp's: tests/core/precision_test.)
#include <gtest/gtest.h>

#include "device/gpu.hpp"

namespace meshtp::gpu {
namespace {

TEST(Element, SizesAndNames) {
  EXPECT_EQ(element_size(Element::kF32), 4u);
  EXPECT_EQ(element_size(Element::kBF16), 2u);
  EXPECT_STREQ(to_string(Element::kBF16), "bf16");
}

}  // namespace
}  // namespace meshtp::gpu
