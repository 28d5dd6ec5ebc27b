#include "ops/gelu.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "grad_check.hpp"

namespace meshtp {
namespace {

using testing::check_gradient;
using testing::dot;
using testing::kFdTol;
using testing::plus;
using testing::test_tensor;

double gelu_naive(double x) {
  const double pi = std::acos(-1.0);
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

TEST(Gelu, ForwardMatchesDoubleFormulaAndKnownValues) {
  const Tensor x = test_tensor({5, 9}, 1, 5.0f);  // covers both tails
  Tensor y({5, 9});
  gelu_forward(y.matrix(), x.matrix());
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    EXPECT_NEAR(y[i], gelu_naive(x[i]), 2e-6) << "x = " << x[i];
  }
  // torch.nn.functional.gelu(torch.tensor([1., -1., 3.]), approximate='tanh')
  const Tensor known({1, 3}, {1.0f, -1.0f, 3.0f});
  Tensor out({1, 3});
  gelu_forward(out.matrix(), known.matrix());
  EXPECT_NEAR(out[0], 0.8411920f, 1e-6);
  EXPECT_NEAR(out[1], -0.1588080f, 1e-6);
  EXPECT_NEAR(out[2], 2.9963627f, 1e-6);
}

TEST(Gelu, GradientMatchesFiniteDifferences) {
  Tensor x = test_tensor({6, 7}, 2, 4.0f);
  const Tensor dy = test_tensor({6, 7}, 3);
  Tensor y({6, 7}), dx({6, 7});
  const auto loss = [&] {
    gelu_forward(y.matrix(), x.matrix());
    return dot(dy.values(), y.values());
  };
  gelu_backward(dx.matrix(), x.matrix(), dy.matrix());
  const auto r = check_gradient(x.values(), dx.values(), loss);
  EXPECT_LT(r.error, kFdTol) << "dx: " << r;
}

TEST(Gelu, BackwardAddsAndWorksOnStridedViews) {
  // x and dy are column blocks of wider matrices; dx accumulates onto a prior.
  const Tensor x_big = test_tensor({4, 10}, 1, 3.0f), dy_big = test_tensor({4, 8}, 2);
  const ConstMatrixView x = x_big.matrix().block(0, 3, 4, 5);
  const ConstMatrixView dy = dy_big.matrix().block(0, 1, 4, 5);
  Tensor x_c({4, 5}), dy_c({4, 5});
  copy(x, x_c.matrix());
  copy(dy, dy_c.matrix());
  Tensor dx({4, 5});
  gelu_backward(dx.matrix(), x_c.matrix(), dy_c.matrix());
  const Tensor prior = test_tensor({4, 5}, 3);
  Tensor dx_acc = prior;
  gelu_backward(dx_acc.matrix(), x, dy);
  EXPECT_LT(max_relative_error(dx_acc.values(), plus(prior, dx).values()), 1e-6);
}

TEST(Gelu, RejectsMismatchedShapes) {
  const Tensor x({3, 4});
  Tensor y({4, 3});
  EXPECT_THROW(gelu_forward(y.matrix(), x.matrix()), Error);
}

}  // namespace
}  // namespace meshtp
