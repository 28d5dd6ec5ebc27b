// The small stack `bench layer` / `bench plan` check against the serial reference: its sizes
// must stay small whatever the slice counts (S = 128 once made it 2 GiB per rank).
#include <gtest/gtest.h>

#include "bench/layer.hpp"

namespace meshtp::bench {
namespace {

model::GptConfig with_slices(int qkv, int proj, int mlp1, int mlp2) {
  model::GptConfig c;
  c.shape = {.batch = 8, .seq = 128, .hidden = 256, .heads = 8, .layers = 4, .vocab = 256};
  c.layout.strategy = layout::Strategy::kMeshSlice;
  const int slices[] = {qkv, proj, mlp1, mlp2};
  for (std::size_t i = 0; i < 4; ++i) c.layout.linears[i].gemm2d.slices = slices[i];
  return c;
}

TEST(LayerCheck, SliceCountsAreCappedSoTheCheckStaysSmall) {
  // bench plan's MeshSlice candidate on 2x2 (S 64, 32, 128, 128): every linear runs 8 slices,
  // h = 8·4·8 = 256 and s = 256 (not 4096 and 4096).
  const model::GptConfig c = check_config(with_slices(64, 32, 128, 128), 2, 2);
  for (const layout::LinearPlan& l : c.layout.linears) EXPECT_EQ(l.gemm2d.slices, 8);
  EXPECT_EQ(c.shape.heads, 4);
  EXPECT_EQ(c.shape.hidden, 256);
  EXPECT_EQ(c.shape.seq, 256);
  EXPECT_EQ(c.shape.batch, 2);   // chunks·d1
  EXPECT_EQ(c.shape.layers, 2);  // at most 2
}

TEST(LayerCheck, SizesAreAMultipleOfEverySliceCount) {
  // Slices 5 and 3 (under the cap): features and tokens are 8·T·lcm = 8·4·15 = 480, which
  // both divide; 8·T·max = 160 would not be a multiple of 3.
  const model::GptConfig c = check_config(with_slices(5, 3, 1, 1), 1, 4);
  EXPECT_EQ(c.layout.linears[0].gemm2d.slices, 5);
  EXPECT_EQ(c.shape.hidden, 480);
  EXPECT_EQ(c.shape.seq, 480);
  for (const layout::LinearPlan& l : c.layout.linears) {
    EXPECT_EQ(c.shape.hidden % l.gemm2d.slices, 0);
    EXPECT_EQ(c.shape.seq % l.gemm2d.slices, 0);
  }
}

}  // namespace
}  // namespace meshtp::bench
