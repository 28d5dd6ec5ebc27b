// Finite differences through the runtime's mixture-of-experts block stack (model/block.hpp on
// a 1×1 mesh: local shards are the global tensors) with shared experts: the routed experts
// (parallel/moe.hpp), the shared experts' dense MLP beside them, the output bias, and ln2's
// input gradient as the sum of both. Every expert is chosen (top_k = num_experts), so no
// finite-difference step can change the routing and L = Σ dy ⊙ y stays smooth; the router is
// still checked through the gates' softmax. Tolerance and stencil: tests/ops/grad_check.hpp.
#include <gtest/gtest.h>

#include "../ops/grad_check.hpp"
#include "comm/communicator.hpp"
#include "model/stack.hpp"

namespace meshtp::model {
namespace {

using testing::check_gradient;
using testing::dot;
using testing::test_tensor;

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
  for (int p = 0; p < stack.num_params(); ++p) {
    const bool norm = stack.param_table()[static_cast<std::size_t>(p)].init == Init::kOnes;
    const Tensor w =
        test_tensor(stack.value(p).shape(), 200 + p, norm ? 0.25f : 0.5f, norm ? 1.0f : 0.0f);
    std::copy(w.values().begin(), w.values().end(), stack.value(p).values().begin());
  }
  const Shape stream{c.block.shape.tokens(), c.block.shape.hidden};
  Tensor x = test_tensor(stream, 17);
  const Tensor dy = test_tensor(stream, 18);
  const auto loss = [&] {
    stack.set_input(x);
    stack.forward();
    return dot(stack.gather_output().values(), dy.values());
  };
  loss();
  stack.zero_grads();
  stack.set_grad_output(dy);
  stack.backward();
  const Tensor dx = stack.gather_grad_input();
  std::vector<Tensor> grads;
  for (int p = 0; p < stack.num_params(); ++p) grads.push_back(stack.grad(p));
  bool saw_shared = false;
  for (int p = 0; p < stack.num_params(); ++p) {
    const std::string& name = stack.param_table()[static_cast<std::size_t>(p)].name;
    saw_shared = saw_shared || name.find("moe.shared.") != std::string::npos;
    const auto r =
        check_gradient(stack.value(p).values(), grads[static_cast<std::size_t>(p)].values(), loss);
    EXPECT_LT(r.error, testing::kFdTol) << name << ": " << r;
  }
  EXPECT_TRUE(saw_shared) << "the shared experts' parameters are in the table";
  // The input's step is 2⁻⁶: at the default 2⁻⁵ the stencil's truncation shows through the
  // routed experts' curvature in x (observed 1.3e-4 at 2⁻⁵, 1.4e-5 at 2⁻⁶, then rounding: 3.8e-5
  // at 2⁻⁷), with or without the shared experts. Inputs are multiples of 2⁻¹²: still exact.
  const auto r = check_gradient(x.values(), dx.values(), loss, 1.0 / 64);
  EXPECT_LT(r.error, testing::kFdTol) << "input: " << r;
}

}  // namespace
}  // namespace meshtp::model
