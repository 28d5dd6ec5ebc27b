#include "ops/cross_entropy.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "grad_check.hpp"

namespace meshtp {
namespace {

using testing::check_gradient;
using testing::error_message;
using testing::kFdTol;
using testing::plus;
using testing::test_tensor;

const std::vector<std::int32_t> kTargets = {2, 0, 6, 6, 1};
constexpr std::int64_t kN = 5, kV = 7;

TEST(CrossEntropy, ForwardMatchesNaiveLogSoftmax) {
  const Tensor logits = test_tensor({kN, kV}, 1, 4.0f, 30.0f);  // large offset: needs the max
  Tensor lse({kN});
  const double loss = cross_entropy_forward(lse.values(), logits.matrix(), kTargets);
  double ref = 0;
  for (std::int64_t n = 0; n < kN; ++n) {
    double sum = 0;
    for (std::int64_t v = 0; v < kV; ++v) sum += std::exp(double(logits.at({n, v})) - 30.0);
    const double l = 30.0 + std::log(sum);
    EXPECT_NEAR(lse[n], l, 1e-5);
    ref += l - logits.at({n, kTargets[n]});
  }
  EXPECT_NEAR(loss, ref / kN, 1e-6);
  // Equal logits: every class has probability 1/V, the loss is log V.
  const Tensor flat({kN, kV}, 0.25f);
  EXPECT_NEAR(cross_entropy_forward(lse.values(), flat.matrix(), kTargets), std::log(7.0), 1e-6);
}

TEST(CrossEntropy, GradientMatchesFiniteDifferencesAndAccumulates) {
  Tensor logits = test_tensor({kN, kV}, 11, 3.0f);
  Tensor lse({kN});
  const float dloss = 0.75f;
  const auto loss = [&] {
    return dloss * cross_entropy_forward(lse.values(), logits.matrix(), kTargets);
  };
  loss();
  Tensor dlogits({kN, kV});
  cross_entropy_backward(dlogits.matrix(), logits.matrix(), lse.values(), kTargets, dloss);
  const auto r = check_gradient(logits.values(), dlogits.values(), loss);
  EXPECT_LT(r.error, kFdTol) << "dlogits: " << r;
  // Each row of softmax − onehot sums to zero.
  for (std::int64_t n = 0; n < kN; ++n) {
    double sum = 0;
    for (std::int64_t v = 0; v < kV; ++v) sum += dlogits.at({n, v});
    EXPECT_NEAR(sum, 0.0, 1e-6);
  }
  // check_gradient leaves lse from its last (perturbed) forward: recompute it.
  loss();
  const Tensor prior = test_tensor({kN, kV}, 12);
  Tensor acc = prior;
  cross_entropy_backward(acc.matrix(), logits.matrix(), lse.values(), kTargets, dloss);
  EXPECT_LT(max_relative_error(acc.values(), plus(prior, dlogits).values()), 1e-6);
}

TEST(CrossEntropy, RejectsTargetsOutsideTheClasses) {
  const Tensor logits({kN, kV});
  Tensor lse({kN});
  std::vector<std::int32_t> bad = kTargets;
  bad[3] = 7;
  EXPECT_NE(error_message([&] {
              cross_entropy_forward(lse.values(), logits.matrix(), bad);
            }).find("target 7 of row 3 is outside the classes [0, 7)"),
            std::string::npos);
  const std::vector<std::int32_t> short_targets = {1, 2};
  EXPECT_NE(error_message([&] {
              cross_entropy_forward(lse.values(), logits.matrix(), short_targets);
            }).find("2 targets for 5 rows"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtp
