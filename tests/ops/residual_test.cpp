#include "ops/residual.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "grad_check.hpp"

namespace meshtp {
namespace {

using testing::check_gradient;
using testing::dot;
using testing::kFdTol;
using testing::plus;
using testing::test_tensor;

TEST(Residual, ForwardAddsInPlaceAndOnStridedViews) {
  const Tensor a = test_tensor({3, 4}, 1), b = test_tensor({3, 4}, 2);
  Tensor y({3, 4});
  residual_forward(y.matrix(), a.matrix(), b.matrix());
  for (std::int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y[i], a[i] + b[i]);
  // In place: x = x + f(x), and with b a column block of a wider buffer.
  const Tensor b_wide = test_tensor({3, 7}, 3);
  Tensor x = a;
  residual_forward(x.matrix(), x.matrix(), b_wide.matrix().block(0, 2, 3, 4));
  for (std::int64_t r = 0; r < 3; ++r) {
    for (std::int64_t c = 0; c < 4; ++c)
      EXPECT_EQ(x.at({r, c}), a.at({r, c}) + b_wide.at({r, 2 + c}));
  }
}

TEST(Residual, GradientsMatchFiniteDifferencesAndAccumulate) {
  Tensor a = test_tensor({4, 5}, 11), b = test_tensor({4, 5}, 12);
  const Tensor dy = test_tensor({4, 5}, 13);
  Tensor y({4, 5});
  const auto loss = [&] {
    residual_forward(y.matrix(), a.matrix(), b.matrix());
    return dot(dy.values(), y.values());
  };
  Tensor da({4, 5}), db({4, 5});
  residual_backward(da.matrix(), db.matrix(), dy.matrix());
  const auto ra = check_gradient(a.values(), da.values(), loss);
  const auto rb = check_gradient(b.values(), db.values(), loss);
  EXPECT_LT(ra.error, kFdTol) << "da: " << ra;
  EXPECT_LT(rb.error, kFdTol) << "db: " << rb;

  const Tensor prior = test_tensor({4, 5}, 14);
  Tensor acc_a = prior, acc_b = prior;
  residual_backward(acc_a.matrix(), acc_b.matrix(), dy.matrix());
  EXPECT_LT(max_relative_error(acc_a.values(), plus(prior, da).values()), 1e-6);
  EXPECT_LT(max_relative_error(acc_b.values(), plus(prior, db).values()), 1e-6);
}

TEST(Residual, RejectsMismatchedShapes) {
  const Tensor a({3, 4}), b({3, 5});
  Tensor y({3, 4});
  EXPECT_THROW(residual_forward(y.matrix(), a.matrix(), b.matrix()), Error);
}

}  // namespace
}  // namespace meshtp
