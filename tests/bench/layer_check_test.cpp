// The small stack `bench layer` / `bench plan` check against the serial reference: its sizes
// must stay small whatever the slice counts (S = 128 once made it 2 GiB per rank). And the
// layer benchmark on a device (--device cuda): the same run on the inverted stand-in.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/layer.hpp"
#include "inverted_device.hpp"

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

// bench layer on a device's backend (the inverted stand-in: memory the host cannot read, over
// a host-staged group of one): its serial check passes through the seam, its streams and
// gradients are found finite through the backend, and the baseline is the backend's GeMM.
TEST(LayerBench, RunsOnADevicesBackend) {
  testing::InvertedBackend stand_in;
  const comm::Communicator one =
      comm::Communicator::host_staged(comm::Communicator::alone(0, 1), stand_in.memory);
  const mesh::DeviceMesh mesh(one, {1, 1});
  LayerBenchOptions o;
  o.config.shape = {.batch = 2, .seq = 8, .hidden = 16, .heads = 2, .layers = 1, .vocab = 256};
  o.config.layout.mesh = {1, 1};
  o.config.backend = &stand_in;
  o.target_seconds = 0.01;
  o.min_iterations = o.max_iterations = 1;
  const LayerBenchSample s = run_layer_bench(mesh, o);
  EXPECT_LE(s.check_error, 1e-3);
  EXPECT_GE(s.check_error, 0.0);
  EXPECT_GT(s.step_s, 0.0);
  EXPECT_GT(s.blas_gflops, 0.0);
  EXPECT_TRUE(std::isfinite(s.ratio_to_blas));
  EXPECT_GT(stand_in.gemm_calls, 0);
}

}  // namespace
}  // namespace meshtp::bench
