#include "ops/linear.hpp"

#include <gtest/gtest.h>

#include "grad_check.hpp"
#include "tensor/gemm.hpp"

namespace meshtp {
namespace {

using testing::check_gradient;
using testing::dot;
using testing::error_message;
using testing::kFdTol;
using testing::plus;
using testing::test_tensor;

TEST(Linear, ForwardMatchesGemmReferenceOnStridedBlocks) {
  // x: rows 1..N, cols 2..2+K of a wider matrix; W: a row shard of a bigger weight;
  // y: a block in the middle of a wider output. Nothing outside y's block may change.
  const std::int64_t N = 7, K = 5, M = 6;
  const Tensor x_big = test_tensor({N + 2, K + 3}, 1);
  const Tensor w_big = test_tensor({M + 4, K}, 2);
  const Tensor b = test_tensor({M}, 3);
  Tensor y_big = test_tensor({N + 1, M + 4}, 4);
  const Tensor y_before = y_big;
  const ConstMatrixView x = x_big.matrix().block(1, 2, N, K);
  const ConstMatrixView w = w_big.matrix().block(2, 0, M, K);
  linear_forward(y_big.matrix().block(1, 3, N, M), x, w, b.values());

  Tensor ref({N, M});
  gemm_reference(x, Trans::kNo, w, Trans::kYes, ref.matrix());
  for (std::int64_t n = 0; n < N + 1; ++n) {
    for (std::int64_t m = 0; m < M + 4; ++m) {
      const bool inside = n >= 1 && m >= 3 && m < 3 + M;
      const float expected = inside ? ref.at({n - 1, m - 3}) + b[m - 3] : y_before.at({n, m});
      EXPECT_NEAR(y_big.at({n, m}), expected, 1e-5) << "y[" << n << "," << m << "]";
    }
  }
}

TEST(Linear, EmptyBiasMeansNoBias) {
  const Tensor x = test_tensor({4, 3}, 1);
  const Tensor w = test_tensor({5, 3}, 2);
  Tensor y({4, 5}, 7.0f);  // stale values must be overwritten, not accumulated
  Tensor ref({4, 5});
  linear_forward(y.matrix(), x.matrix(), w.matrix(), {});
  gemm_reference(x.matrix(), Trans::kNo, w.matrix(), Trans::kYes, ref.matrix());
  EXPECT_LT(max_relative_error(y.values(), ref.values()), 1e-6);
}

TEST(Linear, GradientsMatchFiniteDifferences) {
  const std::int64_t N = 6, K = 5, M = 4;
  Tensor x = test_tensor({N, K}, 11);
  Tensor w = test_tensor({M, K}, 12);
  Tensor b = test_tensor({M}, 13);
  const Tensor dy = test_tensor({N, M}, 14);
  Tensor y({N, M});
  const auto loss = [&] {
    linear_forward(y.matrix(), x.matrix(), w.matrix(), b.values());
    return dot(dy.values(), y.values());
  };
  Tensor dx({N, K}), dw({M, K}), db({M});
  linear_backward(dx.matrix(), dw.matrix(), db.values(), dy.matrix(), x.matrix(), w.matrix());

  const auto rx = check_gradient(x.values(), dx.values(), loss);
  const auto rw = check_gradient(w.values(), dw.values(), loss);
  const auto rb = check_gradient(b.values(), db.values(), loss);
  EXPECT_LT(rx.error, kFdTol) << "dx: " << rx;
  EXPECT_LT(rw.error, kFdTol) << "dW: " << rw;
  EXPECT_LT(rb.error, kFdTol) << "db: " << rb;
}

TEST(Linear, BackwardAddsIntoGradientsAndHalvesAgree) {
  const std::int64_t N = 5, K = 3, M = 4;
  const Tensor x = test_tensor({N, K}, 1);
  const Tensor w = test_tensor({M, K}, 2);
  const Tensor dy = test_tensor({N, M}, 3);
  // From zero: the gradient itself.
  Tensor dx({N, K}), dw({M, K}), db({M});
  linear_backward(dx.matrix(), dw.matrix(), db.values(), dy.matrix(), x.matrix(), w.matrix());
  // From non-zero priors, through the two halves: prior + gradient.
  const Tensor dx0 = test_tensor({N, K}, 4), dw0 = test_tensor({M, K}, 5),
               db0 = test_tensor({M}, 6);
  Tensor dx_acc = dx0, dw_acc = dw0, db_acc = db0;
  linear_backward_data(dx_acc.matrix(), dy.matrix(), w.matrix());
  linear_backward_weight(dw_acc.matrix(), db_acc.values(), dy.matrix(), x.matrix());
  EXPECT_LT(max_relative_error(dx_acc.values(), plus(dx0, dx).values()), 1e-6);
  EXPECT_LT(max_relative_error(dw_acc.values(), plus(dw0, dw).values()), 1e-6);
  EXPECT_LT(max_relative_error(db_acc.values(), plus(db0, db).values()), 1e-6);
}

TEST(Linear, RowBlocksOfTheBatchSumToTheWholeWeightGradient) {
  // What the chunked-overlap code does: two row chunks of x and dy, same dW and db.
  const std::int64_t N = 6, K = 4, M = 3;
  const Tensor x = test_tensor({N, K}, 1);
  const Tensor dy = test_tensor({N, M}, 2);
  Tensor dw({M, K}), db({M}), dw_chunks({M, K}), db_chunks({M});
  linear_backward_weight(dw.matrix(), db.values(), dy.matrix(), x.matrix());
  for (std::int64_t c = 0; c < 2; ++c) {
    linear_backward_weight(dw_chunks.matrix(), db_chunks.values(),
                           dy.matrix().block(c * 3, 0, 3, M), x.matrix().block(c * 3, 0, 3, K));
  }
  EXPECT_LT(max_relative_error(dw_chunks.values(), dw.values()), 1e-6);
  EXPECT_LT(max_relative_error(db_chunks.values(), db.values()), 1e-6);
}

TEST(Linear, ProductsGoThroughGemmAndAreCounted) {
  const std::int64_t N = 8, K = 6, M = 5;
  const Tensor x = test_tensor({N, K}, 1), w = test_tensor({M, K}, 2), b = test_tensor({M}, 3);
  const Tensor dy = test_tensor({N, M}, 4);
  Tensor y({N, M}), dx({N, K}), dw({M, K}), db({M});
  const ComputeLedger before = compute_ledger();
  linear_forward(y.matrix(), x.matrix(), w.matrix(), b.values());
  linear_backward(dx.matrix(), dw.matrix(), db.values(), dy.matrix(), x.matrix(), w.matrix());
  EXPECT_EQ(compute_ledger().gemm_calls - before.gemm_calls, 3);
  EXPECT_DOUBLE_EQ(compute_ledger().flops - before.flops, 3 * 2.0 * N * K * M);
}

TEST(Linear, RejectsMismatchedShapesNamingThem) {
  const Tensor x = test_tensor({4, 3}, 1), w = test_tensor({5, 2}, 2);
  Tensor y({4, 5});
  EXPECT_NE(error_message([&] {
              linear_forward(y.matrix(), x.matrix(), w.matrix(), {});
            }).find("x (4x3) · W (5x2)"),
            std::string::npos);
  const Tensor w_ok = test_tensor({5, 3}, 2), b = test_tensor({4}, 3);
  EXPECT_NE(error_message([&] {
              linear_forward(y.matrix(), x.matrix(), w_ok.matrix(), b.values());
            }).find("bias has 4 values, expected M=5"),
            std::string::npos);
  Tensor dw({5, 3}), db({4});
  const Tensor dy = test_tensor({4, 5}, 4);
  EXPECT_NE(error_message([&] {
              linear_backward_weight(dw.matrix(), db.values(), dy.matrix(), x.matrix());
            }).find("expected M=5"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtp
