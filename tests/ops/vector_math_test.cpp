#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "grad_check.hpp"
#include "ops/vector_math_impl.hpp"

namespace meshtp {
namespace {

using detail::dot_of;
using detail::exp_approx;
using detail::max_of;
using detail::sum_of;
using detail::tanh_approx;

TEST(VectorMath, ExpApproxIsWithinTwoUlpOfExp) {
  double worst = 0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 200000.0f;
    const double exact = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(exp_approx(x) - exact) / exact);
  }
  EXPECT_LT(worst, 1.2e-7);  // observed 8.2e-8; one fp32 ulp is 6e-8 … 1.2e-7
  EXPECT_EQ(exp_approx(0.0f), 1.0f);
  // Clamped, never inf or subnormal: softmax never sees anything below −87 after the max shift.
  EXPECT_GT(exp_approx(-1000.0f), 0.0f);
  EXPECT_TRUE(std::isnormal(exp_approx(-1000.0f)));
  EXPECT_TRUE(std::isfinite(exp_approx(1000.0f)));
}

TEST(VectorMath, TanhApproxHasFp32AbsoluteError) {
  double worst = 0;
  for (int i = -100000; i <= 100000; ++i) {
    const float u = 12.0f * static_cast<float>(i) / 100000.0f;
    worst = std::max(worst, std::abs(tanh_approx(u) - std::tanh(static_cast<double>(u))));
  }
  EXPECT_LT(worst, 2.5e-7);
  EXPECT_EQ(tanh_approx(0.0f), 0.0f);
  EXPECT_EQ(tanh_approx(20.0f), 1.0f);
  EXPECT_EQ(tanh_approx(-20.0f), -1.0f);
}

TEST(VectorMath, LaneReductionsMatchPlainLoopsForEveryLength) {
  const Tensor a = testing::test_tensor({37}, 1, 3.0f), b = testing::test_tensor({37}, 2);
  for (std::int64_t n = 1; n <= 37; ++n) {
    double sum = 0, dot = 0;
    float mx = a[0];
    for (std::int64_t i = 0; i < n; ++i) {
      sum += a[i];
      dot += static_cast<double>(a[i]) * b[i];
      mx = std::max(mx, a[i]);
    }
    EXPECT_EQ(max_of(a.data(), n), mx) << "n=" << n;
    EXPECT_NEAR(sum_of(a.data(), n), sum, 1e-5) << "n=" << n;
    EXPECT_NEAR(dot_of(a.data(), b.data(), n), dot, 1e-5) << "n=" << n;
  }
  // The largest element in the scalar tail (past the last full group of 8) still wins.
  std::vector<float> x(11, 0.0f);
  x[10] = 5.0f;
  EXPECT_EQ(max_of(x.data(), 11), 5.0f);
}

}  // namespace
}  // namespace meshtp
