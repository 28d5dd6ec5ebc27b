#include "train/adamw.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "array_copy.hpp"
#include "core/error.hpp"

namespace meshtp::train {
namespace {

using testing::array_of;

TEST(AdamW, MatchesHandComputedSteps) {
  device::Array wa = array_of(Tensor({2}, {1.0f, -2.0f}));
  device::Array ga = array_of(Tensor({2}, {0.5f, 0.25f}));
  device::Array ba = array_of(Tensor({1}, {3.0f}));
  device::Array gba = array_of(Tensor({1}, {-1.0f}));
  const std::span<float> w = device::floats(wa), b = device::floats(ba);
  const AdamWConfig config{.beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f};
  AdamW opt(cpu_backend(), {{"w", &wa, &ga, true, 1}, {"b", &ba, &gba, false, 1}}, config);
  opt.step(0.01f);
  // Step 1: m̂ = g, v̂ = g², so the Adam term is sign(g) (up to ε); decay only on w.
  EXPECT_NEAR(w[0], 1.0 - 0.01 * (1.0 + 0.1 * 1.0), 1e-6);
  EXPECT_NEAR(w[1], -2.0 - 0.01 * (1.0 + 0.1 * -2.0), 1e-6);
  EXPECT_NEAR(b[0], 3.0 + 0.01, 1e-6);
  // Step 2 with the same gradient: m = g(1−β1)(1+β1), m̂ = g again, same for v: Adam term 1.
  const float w0 = w[0];
  opt.step(0.01f);
  EXPECT_NEAR(w[0], w0 - 0.01 * (1.0 + 0.1 * w0), 1e-6);
  EXPECT_EQ(opt.steps(), 2);
  EXPECT_NEAR(device::floats(opt.first_moments()[0])[0], 0.5 * (1 - 0.9) * (1 + 0.9), 1e-7);
}

TEST(AdamW, RejectsBadConfigAndParams) {
  device::Array w = array_of(Tensor({2}));
  device::Array g = array_of(Tensor({3}));
  EXPECT_THROW(AdamW(cpu_backend(), {{"w", &w, &g, true, 1}}, {}), Error);
  device::Array g2 = array_of(Tensor({2}));
  EXPECT_THROW(AdamW(cpu_backend(), {{"w", &w, &g2, true, 1}}, {.beta1 = 1.0f}), Error);
  EXPECT_THROW(AdamW(cpu_backend(), {{"w", &w, &g2, true, 0}}, {}), Error);
}

TEST(ClipGradients, ScalesOnlyAboveTheThreshold) {
  device::Array w = array_of(Tensor({2}));
  device::Array ga = array_of(Tensor({2}, {3.0f, 4.0f}));
  const std::span<float> g = device::floats(ga);
  const std::vector<ParamRef> params{{"w", &w, &ga, true, 1}};
  EXPECT_EQ(clip_gradients(cpu_backend(), params, 5.0, 10.0), 1.0);
  EXPECT_EQ(g[0], 3.0f);
  EXPECT_NEAR(clip_gradients(cpu_backend(), params, 5.0, 1.0), 0.2, 1e-7);
  EXPECT_NEAR(g[0], 0.6f, 1e-6);
  EXPECT_NEAR(g[1], 0.8f, 1e-6);
  EXPECT_EQ(clip_gradients(cpu_backend(), params, 5.0, 0.0), 1.0);  // clipping off
}

}  // namespace
}  // namespace meshtp::train
