#include "tensor/tensor.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "tensor/random.hpp"

namespace meshtp {
namespace {

TEST(Tensor, ShapeAndRowMajorIndexing) {
  Tensor t({2, 3, 4});
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(i);
  EXPECT_EQ(t.ndim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_EQ(t.at({1, 2, 3}), 23.0f);
  EXPECT_EQ(t.at({1, 0, 1}), 13.0f);
  EXPECT_THROW(t.at({2, 0, 0}), Error);
  EXPECT_THROW(t.dim(3), Error);
}

TEST(Tensor, MatrixViewFlattensLeadingDims) {
  Tensor t({2, 3, 4});
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(i);
  const ConstMatrixView m = std::as_const(t).matrix();
  EXPECT_EQ(m.rows, 6);
  EXPECT_EQ(m.cols, 4);
  EXPECT_EQ(m(5, 3), 23.0f);
  const ConstMatrixView b = m.block(1, 1, 2, 2);  // rows 1..2, cols 1..2
  EXPECT_EQ(b(0, 0), 5.0f);
  EXPECT_EQ(b(1, 1), 10.0f);
  EXPECT_FALSE(b.contiguous());
  EXPECT_THROW(m.block(5, 0, 2, 1), Error);
}

TEST(Tensor, CopyBetweenStridedBlocks) {
  Tensor src({4, 4});
  for (std::int64_t i = 0; i < 16; ++i) src[i] = static_cast<float>(i);
  Tensor dst({2, 2});
  copy(std::as_const(src).matrix().block(2, 2, 2, 2), dst.matrix());
  EXPECT_EQ(dst.values()[0], 10.0f);
  EXPECT_EQ(dst.values()[3], 15.0f);
  EXPECT_THROW(copy(std::as_const(src).matrix(), dst.matrix()), Error);
}

TEST(Tensor, RejectsWrongValueCountAndReshape) {
  EXPECT_THROW(Tensor({2, 2}, std::vector<float>(3)), Error);
  Tensor t({2, 6});
  t.reshape({3, 4});
  EXPECT_EQ(t.shape(), (Shape{3, 4}));
  EXPECT_THROW(t.reshape({5}), Error);
}

TEST(Tensor, RelativeErrorIsScaledByReferenceMagnitude) {
  const std::vector<float> ref{100.0f, 1.0f, 0.0f};
  const std::vector<float> got{100.0f, 1.5f, 0.0f};
  EXPECT_DOUBLE_EQ(max_abs_diff(got, ref), 0.5);
  EXPECT_DOUBLE_EQ(max_relative_error(got, ref), 0.005);
  const std::vector<float> nan{std::numeric_limits<float>::quiet_NaN(), 1.0f, 0.0f};
  EXPECT_TRUE(std::isnan(max_relative_error(nan, ref)));
}

TEST(Random, DependsOnlyOnSeedAndIndex) {
  const Tensor a = uniform_tensor({8, 8}, 42);
  const Tensor b = uniform_tensor({64}, 42);
  const Tensor c = uniform_tensor({8, 8}, 43);
  EXPECT_EQ(max_abs_diff(a.values(), b.values()), 0.0);
  EXPECT_GT(max_abs_diff(a.values(), c.values()), 0.1);
  double mean = 0.0;
  double var = 0.0;
  const Tensor n = normal_tensor({20000}, 7);
  for (const float v : n.values()) mean += v;
  mean /= n.numel();
  for (const float v : n.values()) var += (v - mean) * (v - mean);
  var /= n.numel();
  EXPECT_NEAR(mean, 0.0, 0.03);
  EXPECT_NEAR(var, 1.0, 0.05);
  for (const float v : a.values()) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
}

}  // namespace
// The tensor-storage counter sees every allocation and free, and its peak stays at the most
// alive at once until reset.
TEST(TensorMemory, CountsStorageAndKeepsThePeak) {
  const std::int64_t before = tensor_bytes();
  reset_tensor_peak();
  {
    Tensor a({1000});
    EXPECT_EQ(tensor_bytes() - before, 4000);
    {
      Tensor b({500});
      EXPECT_EQ(tensor_bytes() - before, 6000);
    }
    EXPECT_EQ(tensor_bytes() - before, 4000);
    Tensor c = a;  // a copy holds its own storage
    EXPECT_EQ(tensor_bytes() - before, 8000);
  }
  EXPECT_EQ(tensor_bytes(), before);
  EXPECT_EQ(tensor_peak_bytes() - before, 8000);
  reset_tensor_peak();
  EXPECT_EQ(tensor_peak_bytes(), before);
  EXPECT_GT(max_rss_bytes(), 0);
}

}  // namespace meshtp
