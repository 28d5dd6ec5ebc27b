#include "tensor/gemm.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "tensor/random.hpp"

namespace meshtp {
namespace {

// Stored shape of X given op(X) = rows × cols.
Shape stored(std::int64_t rows, std::int64_t cols, Trans t) {
  return t == Trans::kNo ? Shape{rows, cols} : Shape{cols, rows};
}

TEST(Gemm, MatchesReferenceForAllTransposesAlphaBeta) {
  const std::int64_t m = 13, n = 7, k = 19;
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      const Tensor a = uniform_tensor(stored(m, k, ta), 1);
      const Tensor b = uniform_tensor(stored(k, n, tb), 2);
      Tensor c = uniform_tensor({m, n}, 3);
      Tensor c_ref = c;
      gemm(a.matrix(), ta, b.matrix(), tb, c.matrix(), 0.5f, -2.0f);
      gemm_reference(a.matrix(), ta, b.matrix(), tb, c_ref.matrix(), 0.5f, -2.0f);
      EXPECT_LT(max_relative_error(c.values(), c_ref.values()), 1e-6);
    }
  }
}

TEST(Gemm, ExactSmallProduct) {
  // [1 2; 3 4] · [5 6; 7 8] = [19 22; 43 50]
  const Tensor a({2, 2}, {1, 2, 3, 4});
  const Tensor b({2, 2}, {5, 6, 7, 8});
  Tensor c({2, 2});
  gemm(a.matrix(), Trans::kNo, b.matrix(), Trans::kNo, c.matrix());
  EXPECT_EQ(c.values()[0], 19.0f);
  EXPECT_EQ(c.values()[1], 22.0f);
  EXPECT_EQ(c.values()[2], 43.0f);
  EXPECT_EQ(c.values()[3], 50.0f);
}

TEST(Gemm, WorksOnStridedBlocks) {
  // Multiply the bottom-right 3×4 block of A by the left 4×2 block of B, into a block of C.
  Tensor a = uniform_tensor({5, 6}, 4);
  Tensor b = uniform_tensor({4, 5}, 5);
  Tensor c({4, 4});
  Tensor c_ref({4, 4});
  const ConstMatrixView ab = std::as_const(a).matrix().block(2, 2, 3, 4);
  const ConstMatrixView bb = std::as_const(b).matrix().block(0, 0, 4, 2);
  gemm(ab, Trans::kNo, bb, Trans::kNo, c.matrix().block(1, 2, 3, 2));
  gemm_reference(ab, Trans::kNo, bb, Trans::kNo, c_ref.matrix().block(1, 2, 3, 2));
  EXPECT_LT(max_relative_error(c.values(), c_ref.values()), 1e-6);
  EXPECT_EQ(c.values()[0], 0.0f);  // untouched outside the block
}

TEST(Gemm, CountsFlopsInTheLedger) {
  const Tensor a = uniform_tensor({4, 3}, 1);
  const Tensor b = uniform_tensor({3, 5}, 2);
  Tensor c({4, 5});
  const ComputeLedger before = compute_ledger();
  gemm(a.matrix(), Trans::kNo, b.matrix(), Trans::kNo, c.matrix());
  EXPECT_EQ(compute_ledger().gemm_calls, before.gemm_calls + 1);
  EXPECT_DOUBLE_EQ(compute_ledger().flops - before.flops, 2.0 * 4 * 5 * 3);
}

TEST(Gemm, ShapeMismatchIsAClearError) {
  const Tensor a({4, 3});
  const Tensor b({4, 5});
  Tensor c({4, 5});
  try {
    gemm(a.matrix(), Trans::kNo, b.matrix(), Trans::kNo, c.matrix());
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "gemm shapes do not chain: op(A) 4x3 · op(B) 4x5 → C 4x5");
  }
}

}  // namespace
}  // namespace meshtp
