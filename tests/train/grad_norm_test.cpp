// The global gradient norm counts every global element once, whatever the layout: a
// replicated parameter (replicas = P) and a sharded one (replicas = 1) give the serial norm.
#include <gtest/gtest.h>

#include <cmath>

#include "array_copy.hpp"
#include "train/adamw.hpp"

namespace meshtp::train {
namespace {

TEST(GlobalGradNorm, CountsReplicatedElementsOnce) {
  const auto world = comm::Communicator::world();
  const int p = world.size();
  // Global sharded gradient: values 1..4P, rank r holds [4r+1 … 4r+4].
  Tensor shard({4});
  for (int i = 0; i < 4; ++i) shard[i] = static_cast<float>(4 * world.rank() + i + 1);
  device::Array w = testing::array_of(Tensor({4})), g = testing::array_of(shard);
  // Replicated gradient [2, 2] on every rank.
  device::Array rw = testing::array_of(Tensor({2}));
  device::Array rg = testing::array_of(Tensor({2}, {2.0f, 2.0f}));
  const std::vector<ParamRef> params{{"sharded", &w, &g, true, 1},
                                     {"replicated", &rw, &rg, false, p}};
  double serial = 8.0;  // 2² + 2²
  for (int v = 1; v <= 4 * p; ++v) serial += static_cast<double>(v) * v;
  EXPECT_NEAR(global_grad_norm(cpu_backend(), params, world), std::sqrt(serial), 1e-9);
}

}  // namespace
}  // namespace meshtp::train
