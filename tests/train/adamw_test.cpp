#include "train/adamw.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"

namespace meshtp::train {
namespace {

TEST(AdamW, MatchesHandComputedSteps) {
  Tensor w({2}, {1.0f, -2.0f});
  Tensor g({2}, {0.5f, 0.25f});
  Tensor b({1}, {3.0f});
  Tensor gb({1}, {-1.0f});
  const AdamWConfig config{.beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f};
  AdamW opt({{"w", &w, &g, true, 1}, {"b", &b, &gb, false, 1}}, config);
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
  EXPECT_NEAR(opt.first_moments()[0][0], 0.5 * (1 - 0.9) * (1 + 0.9), 1e-7);
}

TEST(AdamW, RejectsBadConfigAndParams) {
  Tensor w({2});
  Tensor g({3});
  EXPECT_THROW(AdamW({{"w", &w, &g, true, 1}}, {}), Error);
  Tensor g2({2});
  EXPECT_THROW(AdamW({{"w", &w, &g2, true, 1}}, {.beta1 = 1.0f}), Error);
  EXPECT_THROW(AdamW({{"w", &w, &g2, true, 0}}, {}), Error);
}

TEST(ClipGradients, ScalesOnlyAboveTheThreshold) {
  Tensor w({2});
  Tensor g({2}, {3.0f, 4.0f});
  const std::vector<ParamRef> params{{"w", &w, &g, true, 1}};
  EXPECT_EQ(clip_gradients(params, 5.0, 10.0), 1.0);
  EXPECT_EQ(g[0], 3.0f);
  EXPECT_NEAR(clip_gradients(params, 5.0, 1.0), 0.2, 1e-7);
  EXPECT_NEAR(g[0], 0.6f, 1e-6);
  EXPECT_NEAR(g[1], 0.8f, 1e-6);
  EXPECT_EQ(clip_gradients(params, 5.0, 0.0), 1.0);  // clipping off
}

}  // namespace
}  // namespace meshtp::train
