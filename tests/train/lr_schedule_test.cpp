#include "train/lr_schedule.hpp"

#include <gtest/gtest.h>

namespace meshtp::train {
namespace {

TEST(LrSchedule, WarmupThenCosineToMin) {
  const LrSchedule s{.peak = 1.0, .min = 0.1, .warmup_steps = 4, .total_steps = 14};
  EXPECT_DOUBLE_EQ(s.at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);                       // progress 0
  EXPECT_NEAR(s.at(9), 0.55, 1e-12);                    // halfway: (peak + min) / 2
  EXPECT_NEAR(s.at(14), 0.1, 1e-12);                    // the end
  EXPECT_NEAR(s.at(100), 0.1, 1e-12);                   // past the end stays at min
  const LrSchedule flat{.peak = 2.0, .min = 2.0, .warmup_steps = 0, .total_steps = 5};
  EXPECT_DOUBLE_EQ(flat.at(3), 2.0);
}

}  // namespace
}  // namespace meshtp::train
