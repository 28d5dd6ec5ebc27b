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

// x with every element rounded to bf16: the operand a bf16 GeMM multiplies.
Tensor rounded(const Tensor& x) {
  Tensor r = x;
  for (float& v : r.values()) v = round_to_bf16(v);
  return r;
}

TEST(GemmBf16, MultipliesTheRoundedOperandsInFp32) {
  // On strided blocks, every transpose, alpha and beta: the product of the bf16-rounded
  // operands accumulated in fp32 (the reference accumulates in double on the rounded
  // operands; C's prior value is not rounded: outputs are fp32).
  const std::int64_t m = 13, n = 7, k = 300;
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      const Shape sa = stored(m, k, ta), sb = stored(k, n, tb);
      const Tensor a = uniform_tensor({sa[0] + 2, sa[1] + 3}, 1);
      const Tensor b = uniform_tensor({sb[0] + 1, sb[1] + 2}, 2);
      Tensor c = uniform_tensor({m, n}, 3);
      Tensor c_ref = c, c_fp32 = c;
      const Tensor a16 = rounded(a), b16 = rounded(b);
      {
        const ScopedGemmPrecision bf16(Precision::kBf16);
        EXPECT_EQ(gemm_precision(), Precision::kBf16);
        gemm(a.matrix().block(2, 3, sa[0], sa[1]), ta, b.matrix().block(1, 2, sb[0], sb[1]), tb,
             c.matrix(), 0.5f, -2.0f);
      }
      EXPECT_EQ(gemm_precision(), Precision::kFp32);
      gemm_reference(a16.matrix().block(2, 3, sa[0], sa[1]), ta,
                     b16.matrix().block(1, 2, sb[0], sb[1]), tb, c_ref.matrix(), 0.5f, -2.0f);
      gemm(a.matrix().block(2, 3, sa[0], sa[1]), ta, b.matrix().block(1, 2, sb[0], sb[1]), tb,
           c_fp32.matrix(), 0.5f, -2.0f);
      EXPECT_LT(max_relative_error(c.values(), c_ref.values()), 1e-5);
      // And it is not the fp32 product: the rounding moved it, by up to 2⁻⁸ per operand.
      const double moved = max_relative_error(c.values(), c_fp32.values());
      EXPECT_GT(moved, 1e-4);
      EXPECT_LT(moved, 2e-2);
    }
  }
}

TEST(GemmBf16, ScopesNestAndRestore) {
  EXPECT_EQ(gemm_precision(), Precision::kFp32);
  {
    const ScopedGemmPrecision outer(Precision::kBf16);
    {
      const ScopedGemmPrecision inner(Precision::kFp32);
      EXPECT_EQ(gemm_precision(), Precision::kFp32);
    }
    EXPECT_EQ(gemm_precision(), Precision::kBf16);
  }
  EXPECT_EQ(gemm_precision(), Precision::kFp32);
}

TEST(GemmBf16, Fp16IsRefused) {
  try {
    const ScopedGemmPrecision fp16(Precision::kFp16);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "GeMM precision fp16 is not supported by the runtime (fp32, bf16)");
  }
  EXPECT_EQ(gemm_precision(), Precision::kFp32);
}

}  // namespace
}  // namespace meshtp
