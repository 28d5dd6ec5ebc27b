#include "ops/layernorm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "grad_check.hpp"

namespace meshtp {
namespace {

using testing::check_gradient;
using testing::dot;
using testing::error_message;
using testing::kFdTol;
using testing::plus;
using testing::test_tensor;

// y = (x − μ)/√(var + eps)·w + b in double, straight from the definition.
std::vector<double> layernorm_naive(const Tensor& x, const Tensor& w, const Tensor& b) {
  const std::int64_t N = x.dim(0), C = x.dim(1);
  std::vector<double> y(static_cast<std::size_t>(N * C));
  for (std::int64_t n = 0; n < N; ++n) {
    double mu = 0, var = 0;
    for (std::int64_t c = 0; c < C; ++c) mu += x.at({n, c});
    mu /= C;
    for (std::int64_t c = 0; c < C; ++c) var += (x.at({n, c}) - mu) * (x.at({n, c}) - mu);
    var /= C;
    for (std::int64_t c = 0; c < C; ++c) {
      y[n * C + c] = (x.at({n, c}) - mu) / std::sqrt(var + 1e-5) * w[c] + b[c];
    }
  }
  return y;
}

TEST(LayerNorm, ForwardMatchesNaiveDoubleAndSavesStatistics) {
  const std::int64_t N = 5, C = 16;
  const Tensor x = test_tensor({N, C}, 1, 2.0f, 3.0f);  // a large offset: centring matters
  const Tensor w = test_tensor({C}, 2), b = test_tensor({C}, 3);
  Tensor y({N, C}), mean({N}), rstd({N});
  layernorm_forward(y.matrix(), mean.values(), rstd.values(), x.matrix(), w.values(), b.values());
  const std::vector<double> ref = layernorm_naive(x, w, b);
  for (std::int64_t i = 0; i < y.numel(); ++i) EXPECT_NEAR(y[i], ref[i], 2e-6) << "y[" << i << "]";
  // With w = 1, b = 0 every row has mean 0 and (biased) variance var/(var + eps).
  const Tensor ones({C}, 1.0f), zeros({C}, 0.0f);
  layernorm_forward(y.matrix(), mean.values(), rstd.values(), x.matrix(), ones.values(),
                    zeros.values());
  for (std::int64_t n = 0; n < N; ++n) {
    double mu = 0, sq = 0;
    for (std::int64_t c = 0; c < C; ++c) mu += y.at({n, c});
    for (std::int64_t c = 0; c < C; ++c) sq += y.at({n, c}) * y.at({n, c});
    EXPECT_NEAR(mu / C, 0.0, 1e-6);
    const double var_x = 1.0 / (double(rstd[n]) * rstd[n]) - 1e-5;
    EXPECT_NEAR(sq / C, var_x / (var_x + 1e-5), 1e-5);
    EXPECT_NEAR(mean[n], 3.0, 0.5);
  }
}

TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  const std::int64_t N = 4, C = 7;
  Tensor x = test_tensor({N, C}, 11, 1.0f, 0.5f);
  Tensor w = test_tensor({C}, 12, 1.0f, 1.0f);
  Tensor b = test_tensor({C}, 13);
  const Tensor dy = test_tensor({N, C}, 14);
  Tensor y({N, C}), mean({N}), rstd({N});
  const auto loss = [&] {
    layernorm_forward(y.matrix(), mean.values(), rstd.values(), x.matrix(), w.values(), b.values());
    return dot(dy.values(), y.values());
  };
  loss();
  Tensor dx({N, C}), dw({C}), db({C});
  layernorm_backward(dx.matrix(), dw.values(), db.values(), dy.matrix(), x.matrix(), w.values(),
                     mean.values(), rstd.values());
  const auto rx = check_gradient(x.values(), dx.values(), loss);
  const auto rw = check_gradient(w.values(), dw.values(), loss);
  const auto rb = check_gradient(b.values(), db.values(), loss);
  EXPECT_LT(rx.error, kFdTol) << "dx: " << rx;
  EXPECT_LT(rw.error, kFdTol) << "dw: " << rw;
  EXPECT_LT(rb.error, kFdTol) << "db: " << rb;
}

TEST(LayerNorm, BackwardAddsAndRowShardsAgree) {
  // Sequence parallelism normalises a row shard: rows [2, 5) alone equal those rows of all.
  const std::int64_t N = 5, C = 6;
  const Tensor x = test_tensor({N, C}, 1), w = test_tensor({C}, 2), b = test_tensor({C}, 3);
  const Tensor dy = test_tensor({N, C}, 4);
  Tensor y({N, C}), mean({N}), rstd({N});
  layernorm_forward(y.matrix(), mean.values(), rstd.values(), x.matrix(), w.values(), b.values());
  Tensor dx({N, C}), dw({C}), db({C});
  layernorm_backward(dx.matrix(), dw.values(), db.values(), dy.matrix(), x.matrix(), w.values(),
                     mean.values(), rstd.values());

  Tensor y_s({3, C}), mean_s({3}), rstd_s({3});
  layernorm_forward(y_s.matrix(), mean_s.values(), rstd_s.values(), x.matrix().block(2, 0, 3, C),
                    w.values(), b.values());
  for (std::int64_t i = 0; i < 3 * C; ++i) EXPECT_EQ(y_s[i], y[2 * C + i]);

  const Tensor dx0 = test_tensor({N, C}, 5), dw0 = test_tensor({C}, 6), db0 = test_tensor({C}, 7);
  Tensor dx_acc = dx0, dw_acc = dw0, db_acc = db0;
  layernorm_backward(dx_acc.matrix(), dw_acc.values(), db_acc.values(), dy.matrix(), x.matrix(),
                     w.values(), mean.values(), rstd.values());
  EXPECT_LT(max_relative_error(dx_acc.values(), plus(dx0, dx).values()), 1e-6);
  EXPECT_LT(max_relative_error(dw_acc.values(), plus(dw0, dw).values()), 1e-6);
  EXPECT_LT(max_relative_error(db_acc.values(), plus(db0, db).values()), 1e-6);
}

TEST(LayerNorm, RejectsWrongParameterSizes) {
  const Tensor x({3, 4}), w({5}), b({4});
  Tensor y({3, 4}), mean({3}), rstd({3});
  EXPECT_NE(error_message([&] {
              layernorm_forward(y.matrix(), mean.values(), rstd.values(), x.matrix(), w.values(),
                                b.values());
            }).find("weight has 5 and bias 4 values, expected C=4"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtp
