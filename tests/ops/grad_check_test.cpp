// A test that cannot fail is a defect: these feed the finite-difference check deliberately
// wrong gradients — the kind of bug a backward really has — and require it to reject each.
#include "grad_check.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/attention.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/gelu.hpp"
#include "ops/layernorm.hpp"
#include "ops/linear.hpp"

namespace meshtp {
namespace {

using testing::check_gradient;
using testing::dot;
using testing::FdResult;
using testing::kFdTol;
using testing::test_tensor;

void expect_rejected(const FdResult& r, const char* mutant) {
  EXPECT_FALSE(r.error < kFdTol) << mutant << " passed the check: " << r;
}

TEST(GradCheck, RejectsOneWrongElementZerosAndNaN) {
  const std::int64_t N = 6, K = 5, M = 4;
  Tensor x = test_tensor({N, K}, 1), w = test_tensor({M, K}, 2), b = test_tensor({M}, 3);
  const Tensor dy = test_tensor({N, M}, 4);
  Tensor y({N, M});
  const auto loss = [&] {
    linear_forward(y.matrix(), x.matrix(), w.matrix(), b.values());
    return dot(dy.values(), y.values());
  };
  Tensor dx({N, K}), dw({M, K}), db({M});
  linear_backward(dx.matrix(), dw.matrix(), db.values(), dy.matrix(), x.matrix(), w.matrix());
  ASSERT_LT(check_gradient(w.values(), dw.values(), loss).error, kFdTol);

  const FdResult correct = check_gradient(w.values(), dw.values(), loss);
  Tensor off = dw;  // one element off by 0.1% of the gradient's scale
  off[7] += static_cast<float>(1e-3 * correct.scale);
  const FdResult r_off = check_gradient(w.values(), off.values(), loss);
  expect_rejected(r_off, "one element of dW off by 0.1% of scale");
  EXPECT_EQ(r_off.worst, 7);

  expect_rejected(check_gradient(w.values(), Tensor({M, K}).values(), loss), "all-zero dW");
  Tensor nan = dw;
  nan[3] = std::numeric_limits<float>::quiet_NaN();
  expect_rejected(check_gradient(w.values(), nan.values(), loss), "a NaN in dW");
  // dW with its indices mixed up, as a transposed-convention bug would leave it.
  Tensor transposed({M, K});
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t k = 0; k < K; ++k) transposed[m * K + k] = dw[(k % M) * K + (m % K)];
  }
  expect_rejected(check_gradient(w.values(), transposed.values(), loss), "index-shuffled dW");
}

TEST(GradCheck, RejectsTheExactErfGeluDerivative) {
  // gelu'(x) of the erf GeLU, Φ(x) + x·φ(x): a different function by ~1e-3 — a subtle bug.
  Tensor x = test_tensor({6, 7}, 2, 4.0f);
  const Tensor dy = test_tensor({6, 7}, 3);
  Tensor y({6, 7});
  const auto loss = [&] {
    gelu_forward(y.matrix(), x.matrix());
    return dot(dy.values(), y.values());
  };
  Tensor dx({6, 7});
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double v = x[i];
    const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
    const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2.0 * std::acos(-1.0));
    dx[i] = static_cast<float>(dy[i] * (cdf + v * pdf));
  }
  expect_rejected(check_gradient(x.values(), dx.values(), loss), "erf-GeLU derivative");
}

TEST(GradCheck, RejectsLayerNormWithoutTheVarianceTerm) {
  // dx = rstd·(g − mean(g)): forgets that the variance depends on x.
  const std::int64_t N = 4, C = 7;
  Tensor x = test_tensor({N, C}, 11, 1.0f, 0.5f);
  const Tensor w = test_tensor({C}, 12, 1.0f, 1.0f), b = test_tensor({C}, 13);
  const Tensor dy = test_tensor({N, C}, 14);
  Tensor y({N, C}), mean({N}), rstd({N});
  const auto loss = [&] {
    layernorm_forward(y.matrix(), mean.values(), rstd.values(), x.matrix(), w.values(), b.values());
    return dot(dy.values(), y.values());
  };
  loss();
  Tensor dx({N, C});
  for (std::int64_t n = 0; n < N; ++n) {
    double g_mean = 0;
    for (std::int64_t c = 0; c < C; ++c) g_mean += dy.at({n, c}) * w[c] / C;
    for (std::int64_t c = 0; c < C; ++c) {
      dx.at({n, c}) = static_cast<float>(rstd[n] * (dy.at({n, c}) * w[c] - g_mean));
    }
  }
  expect_rejected(check_gradient(x.values(), dx.values(), loss), "LayerNorm without var term");
}

TEST(GradCheck, RejectsAttentionWithSwappedOrUnscaledQueryKeyGradients) {
  const std::int64_t B = 2, T = 5, NH = 3, HD = 4, Cp = NH * HD;
  Tensor qkv = test_tensor({B * T, 3 * Cp}, 21, 1.5f);
  const Tensor dout = test_tensor({B * T, Cp}, 22);
  Tensor out({B * T, Cp}), att({attention_att_size(B, T, NH)}), scratch({T * T});
  const auto loss = [&] {
    attention_forward(out.matrix(), att.values(), qkv.matrix(), B, T, NH);
    return dot(dout.values(), out.values());
  };
  loss();
  Tensor dqkv(qkv.shape());
  attention_backward(dqkv.matrix(), scratch.values(), dout.matrix(), qkv.matrix(), att.values(), B,
                     T, NH);
  Tensor swapped = dqkv, unscaled = dqkv;
  for (std::int64_t r = 0; r < B * T; ++r) {
    for (std::int64_t c = 0; c < Cp; ++c) {
      std::swap(swapped.at({r, c}), swapped.at({r, Cp + c}));
      unscaled.at({r, c}) *= std::sqrt(static_cast<float>(HD));
      unscaled.at({r, Cp + c}) *= std::sqrt(static_cast<float>(HD));
    }
  }
  expect_rejected(check_gradient(qkv.values(), swapped.values(), loss), "dQ and dK swapped");
  expect_rejected(check_gradient(qkv.values(), unscaled.values(), loss), "1/√HD forgotten");
}

TEST(GradCheck, RejectsCrossEntropyWithoutTheMean) {
  const std::int64_t N = 5, V = 7;
  const std::vector<std::int32_t> targets = {2, 0, 6, 6, 1};
  Tensor logits = test_tensor({N, V}, 11, 3.0f);
  Tensor lse({N});
  const auto loss = [&] { return cross_entropy_forward(lse.values(), logits.matrix(), targets); };
  loss();
  Tensor dlogits({N, V});  // the sum's gradient: dloss = N where 1 is right
  cross_entropy_backward(dlogits.matrix(), logits.matrix(), lse.values(), targets,
                         static_cast<float>(N));
  expect_rejected(check_gradient(logits.values(), dlogits.values(), loss), "CE without 1/N");
}

}  // namespace
}  // namespace meshtp
