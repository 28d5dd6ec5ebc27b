// GemmModel (core/gemm_model.hpp): the flat form is 2·m·n·k/F; the tiled form counts waves of
// output tiles, splits k when tiles leave units idle, pays a fixed cost per kernel and the
// memory roofline — each checked on shapes worked by hand.
#include "core/gemm_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.hpp"
#include "core/op_costs.hpp"

namespace meshtp {
namespace {

// The header's A100: 0.82·312 TFLOP/s over 108 units, 128×256 tiles, no kernel or memory cost.
GemmModel a100() { return GemmModel(312, 0.82, 108, 0, 0); }

// The fused core's FLOPs for 32 pairs of 4096 tokens, head dim 128, backward.
double op_costs_flops() {
  return op_costs::flash_attention_flops(4096, 4096, 128, op_costs::kFlashBlockQ,
                                         op_costs::kFlashBlockK, 0, 32, true);
}

TEST(GemmModel, FlatIsTwoMnkOverTheRate) {
  const GemmModel flat(250e12);
  EXPECT_TRUE(flat.flat());
  EXPECT_DOUBLE_EQ(flat.seconds(1000, 2000, 3000, 2), 2.0 * 1000 * 2000 * 3000 / 250e12);
  EXPECT_DOUBLE_EQ(flat.seconds(10, 20, 30, 2, 7), 7 * 2.0 * 10 * 20 * 30 / 250e12);
  EXPECT_EQ(flat.seconds(0, 20, 30, 2), 0);
}

TEST(GemmModel, WavesRoundUp) {
  const GemmModel g = a100();
  // The header's worked example: 64·9 = 576 tiles = 5.33 waves of 108, run as 6.
  const double t = g.seconds(8192, 2304, 6144, 2);
  const double per_wave = 2.0 * 128 * 256 * 6144 / (312e12 * 0.82 / 108);
  EXPECT_NEAR(t, 6 * per_wave, 1e-15);
  EXPECT_NEAR(2.0 * 8192 * 2304 * 6144 / t / 1e12, 227.4, 0.1);
  // A whole number of waves runs at the sustained rate: 108 tiles of 128×256.
  EXPECT_NEAR(2.0 * (12 * 128) * (9 * 256) * 4096 / g.seconds(12 * 128, 9 * 256, 4096, 2),
              312e12 * 0.82, 1e3);
  // One more tile costs a whole wave.
  EXPECT_NEAR(g.seconds(12 * 128 + 1, 9 * 256, 4096, 2) / g.seconds(12 * 128, 9 * 256, 4096, 2),
              2.0, 1e-12);
}

TEST(GemmModel, SplitKFillsIdleUnits) {
  const GemmModel g = a100();
  // 4 tiles of 128×256 leave 104 of 108 units idle: k = 8192 splits 27 ways (⌊108/4⌋, and
  // ⌊8192/256⌋ = 32 allows it): one wave of depth ⌈8192/27⌉ = 304.
  const double t = g.seconds(256, 512, 8192, 2);
  EXPECT_NEAR(t, 2.0 * 128 * 256 * 304 / (312e12 * 0.82 / 108), 1e-15);
  // k too short to split: ⌊300/256⌋ = 1.
  EXPECT_NEAR(g.seconds(256, 512, 300, 2), 2.0 * 128 * 256 * 300 / (312e12 * 0.82 / 108),
              1e-15);
}

TEST(GemmModel, KernelCostAndMemoryRoofline) {
  GemmModel g = a100();
  g.kernel_us = 10;
  g.memory_gbps = 2000;
  // A skinny product is memory bound: (m·k + k·n + m·n)·e / B, plus the kernel.
  const double m = 128 * 108, n = 256, k = 8;
  const double memory = 2 * (m * k + k * n + m * n) / 2000e9;
  EXPECT_GT(memory, 2.0 * 128 * 256 * k / (312e12 * 0.82 / 108));
  EXPECT_NEAR(g.seconds(m, n, k, 2), 10e-6 + memory, 1e-15);
  // Cutting a GeMM into 8 slices costs 8 kernels and 8 quantised waves, not the same time.
  // One whole wave (12·9 = 108 tiles) against 8 column slices of 288: 12·2 tiles each, split
  // 4 ways, a wave of depth k/4 per slice, so 2 waves' time in all plus 8 kernels.
  const double whole = g.seconds(12 * 128, 9 * 256, 4096, 2);
  double sliced = 0;
  for (int i = 0; i < 8; ++i) sliced += g.seconds(12 * 128, 9 * 256 / 8, 4096, 2);
  EXPECT_NEAR(sliced - 8 * 10e-6, 2 * (whole - 10e-6), 1e-12);
}

TEST(GemmModel, TheFusedAttentionRunsAtItsOwnRateWhereSet) {
  // flash_attention_seconds: the causal tiles' FLOPs (core/op_costs.hpp) at peak·efficiency,
  // or at attention_tflops where the topology sets it (the kernel's measured rate).
  GemmModel g = a100();
  const double at_gemm_rate = flash_attention_seconds(g, 4096, 128, 32, true);
  EXPECT_NEAR(at_gemm_rate, g.flat_seconds(op_costs_flops()), 1e-15);
  g.attention_tflops = 0.82 * 312 / 2;
  EXPECT_NEAR(flash_attention_seconds(g, 4096, 128, 32, true), 2 * at_gemm_rate, 1e-15);
  EXPECT_NEAR(g.attention_seconds(1e12), 1e12 / (0.41 * 312e12), 1e-15);
  // The GeMMs keep the GeMM rate.
  EXPECT_EQ(g.seconds(4096, 4096, 4096, 2), a100().seconds(4096, 4096, 4096, 2));
}

TEST(GemmModel, BadModelsAreNamed) {
  const auto error_of = [](const GemmModel& g) {
    try {
      g.validate("topology 't', device gemm");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of(a100()), "");
  EXPECT_NE(error_of(GemmModel(0, 0.8, 108, 0, 0)).find("peak_tflops=0 must be positive"),
            std::string::npos);
  EXPECT_NE(error_of(GemmModel(312, 1.5, 108, 0, 0)).find("efficiency=1.5 must be in (0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of(GemmModel(312, 0.8, 108, -1, 0)).find("kernel_us=-1"), std::string::npos);
  GemmModel tile = a100();
  tile.tile_m = 0;
  EXPECT_NE(error_of(tile).find("tile 0x256"), std::string::npos);
  GemmModel attention = a100();
  attention.attention_tflops = -1;
  EXPECT_NE(error_of(attention).find("attention_tflops=-1 must be in [0, peak_tflops=312]"),
            std::string::npos);
  attention.attention_tflops = 400;
  EXPECT_NE(error_of(attention).find("attention_tflops=400"), std::string::npos);
  EXPECT_THROW((void)GemmModel(0.0).seconds(1, 1, 1, 2), Error);
}

}  // namespace
}  // namespace meshtp
