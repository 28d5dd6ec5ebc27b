// Finite differences through the runtime's mixture-of-experts block stack (model/block.hpp on
// a 1×1 mesh: local shards are the global tensors) with shared experts: the routed experts
// (parallel/moe.hpp), the shared experts' dense MLP beside them, the output bias, and ln2's
// input gradient as the sum of both. Every expert is chosen (top_k = num_experts), so no
// finite-difference step can change the routing and L = Σ dy ⊙ y stays smooth; the router is
// still checked through the gates' softmax. Tolerance and stencil: tests/ops/grad_check.hpp.
#include <gtest/gtest.h>

#include "comm/communicator.hpp"
#include "model/stack.hpp"
#include "stack_grad_check.hpp"

namespace meshtp::model {
namespace {

TEST(MoeStack, SharedExpertsFiniteDifferencesMatchBackward) {
  const auto world = comm::Communicator::world();
  const mesh::DeviceMesh solo(world.split(world.rank(), 0), {1, 1});
  const StackConfig c{.block = {.shape = {.batch = 2,
                                          .seq = 4,
                                          .hidden = 8,
                                          .heads = 2,
                                          .layers = 1,
                                          .num_experts = 2,
                                          .top_k = 2,
                                          .moe_ffn_hidden = 6,
                                          .shared_experts = 1}}};
  Stack stack(solo, c);
  bool shared = false;
  for (const ParamEntry& e : stack.param_table()) {
    shared = shared || e.name.find("moe.shared.") != std::string::npos;
  }
  EXPECT_TRUE(shared) << "the shared experts' parameters are in the table";
  // The input's step is 2⁻⁶: at the default 2⁻⁵ the stencil's truncation shows through the
  // routed experts' curvature in x (observed 1.3e-4 at 2⁻⁵, 1.4e-5 at 2⁻⁶, then rounding: 3.8e-5
  // at 2⁻⁷), with or without the shared experts. Inputs are multiples of 2⁻¹²: still exact.
  // The bound is 1e-4, twice the ops' (tests/ops/grad_check.hpp): through the routing the
  // floor is near theirs — ln1's weight errs by 5.7e-5 on an AVX2 (Zen) machine at 2⁻⁵, its
  // router by 6.6e-5 at 2⁻⁶ (rounding) — while a wrong gradient errs by 7.7e-4 or more.
  testing::expect_stack_gradients(stack, c, 200, "moe", 1.0 / 64, 1e-4);
}

}  // namespace
}  // namespace meshtp::model
