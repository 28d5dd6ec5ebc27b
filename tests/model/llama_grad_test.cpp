// Finite differences through the runtime's Llama-family block stack (model/block.hpp on a 1×1
// mesh: local shards are the global tensors), every backward path the family adds at once:
// RMSNorm, RoPE on q and k, grouped-query attention (the unfused core's widened KV heads and
// the fused core), SwiGLU on fc1's [gate | up], no biases. L = Σ dy ⊙ y over the stack's
// output; each parameter's analytic gradient (and the input's) against the fourth-order
// stencil of tests/ops/grad_check.hpp, within its one tolerance (observed: ≤ 1.5e-5 of the
// gradient's scale). Weights and inputs are multiples of 2⁻¹², so the perturbed values are
// exact.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "../ops/grad_check.hpp"
#include "comm/communicator.hpp"
#include "model/stack.hpp"

namespace meshtp::model {
namespace {

using testing::check_gradient;
using testing::dot;
using testing::test_tensor;

StackConfig llama_stack(layout::Attention attention) {
  return {.block = {.shape = {.batch = 2,
                              .seq = 4,
                              .hidden = 16,
                              .heads = 4,
                              .layers = 1,
                              .kv_heads = 2,
                              .ffn_hidden = 24,
                              .activation = layout::Activation::kSwiglu,
                              .norm = layout::Norm::kRmsNorm,
                              .position = layout::Position::kRope},
                    .layout = {.attention = attention}}};
}

TEST(LlamaStack, FiniteDifferencesMatchBackward) {
  const auto world = comm::Communicator::world();
  const mesh::DeviceMesh solo(world.split(world.rank(), 0), {1, 1});
  for (const layout::Attention attention : layout::all<layout::Attention>()) {
    const StackConfig c = llama_stack(attention);
    Stack stack(solo, c);
    for (int p = 0; p < stack.num_params(); ++p) {
      const bool norm = stack.param_table()[static_cast<std::size_t>(p)].init == Init::kOnes;
      const Tensor w =
          test_tensor(stack.value(p).shape(), 100 + p, norm ? 0.25f : 0.5f, norm ? 1.0f : 0.0f);
      std::copy(w.values().begin(), w.values().end(), stack.value(p).values().begin());
    }
    const Shape stream{c.block.shape.tokens(), c.block.shape.hidden};
    Tensor x = test_tensor(stream, 7);
    const Tensor dy = test_tensor(stream, 8);
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
    EXPECT_EQ(stack.num_params(), 6);  // ln1, qkv, proj, ln2, fc1, fc2 weights: no biases
    for (int p = 0; p < stack.num_params(); ++p) {
      const auto r = check_gradient(stack.value(p).values(),
                                    grads[static_cast<std::size_t>(p)].values(), loss);
      EXPECT_LT(r.error, testing::kFdTol)
          << layout::name(attention) << " " << stack.param_table()[static_cast<std::size_t>(p)].name
          << ": " << r;
    }
    const auto r = check_gradient(x.values(), dx.values(), loss);
    EXPECT_LT(r.error, testing::kFdTol) << layout::name(attention) << " input: " << r;
  }
}

}  // namespace
}  // namespace meshtp::model
