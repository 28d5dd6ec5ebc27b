#include "tensor/blocks.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace meshtp {
namespace {

Tensor iota(Shape shape) {
  Tensor t(std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(i);
  return t;
}

TEST(Blocks, ChunkAlongEachDim) {
  const Tensor t = iota({2, 4, 3});
  const Tensor c0 = chunk(t, 0, 2, 1);  // second half of dim 0
  EXPECT_EQ(c0.shape(), (Shape{1, 4, 3}));
  EXPECT_EQ(c0[0], 12.0f);
  const Tensor c1 = chunk(t, 1, 2, 1);  // rows 2..3 of each [4, 3] slab
  EXPECT_EQ(c1.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(c1.at({0, 0, 0}), 6.0f);
  EXPECT_EQ(c1.at({1, 1, 2}), 23.0f);
  const Tensor c2 = chunk(t, 2, 3, 2);  // last column
  EXPECT_EQ(c2.shape(), (Shape{2, 4, 1}));
  EXPECT_EQ(c2.at({1, 3, 0}), 23.0f);
  EXPECT_EQ(c2.at({0, 1, 0}), 5.0f);
}

TEST(Blocks, PackUnpackRoundTripOnEveryDim) {
  const Tensor t = iota({4, 6, 2});
  for (int dim = 0; dim < 3; ++dim) {
    for (int parts : {1, 2}) {
      std::vector<float> packed(static_cast<std::size_t>(t.numel()));
      pack_chunks(t, dim, parts, packed);
      // Chunk c must sit contiguously at c·numel/parts.
      const std::int64_t chunk_numel = t.numel() / parts;
      for (int c = 0; c < parts; ++c) {
        const Tensor expect = chunk(t, dim, parts, c);
        const std::span<const float> got(packed.data() + c * chunk_numel,
                                         static_cast<std::size_t>(chunk_numel));
        EXPECT_EQ(max_abs_diff(got, expect.values()), 0.0) << "dim " << dim << " chunk " << c;
      }
      Shape chunk_shape = t.shape();
      chunk_shape[dim] /= parts;
      const Tensor back = unpack_chunks(packed, chunk_shape, dim, parts);
      EXPECT_EQ(back.shape(), t.shape());
      EXPECT_EQ(max_abs_diff(back.values(), t.values()), 0.0) << "dim " << dim;
    }
  }
}

TEST(Blocks, WriteChunkInvertsChunk) {
  const Tensor t = iota({3, 4});
  Tensor rebuilt({3, 4});
  for (int c = 0; c < 4; ++c) write_chunk(rebuilt, 1, 4, c, chunk(t, 1, 4, c));
  EXPECT_EQ(max_abs_diff(rebuilt.values(), t.values()), 0.0);
}

TEST(Blocks, NonDivisibleSplitNamesDimAndSizes) {
  const Tensor t = iota({3, 5});
  try {
    chunk(t, 1, 2, 0);
    FAIL() << "split of 5 into 2 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "tensor dim 1 of size 5 (shape [3, 5]) does not split into 2 equal parts");
  }
  EXPECT_THROW(chunk(t, 2, 1, 0), Error);
  EXPECT_THROW(chunk(t, 0, 3, 3), Error);
}

}  // namespace
}  // namespace meshtp
