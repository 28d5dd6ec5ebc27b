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

#include "comm/communicator.hpp"
#include "model/stack.hpp"
#include "stack_grad_check.hpp"

namespace meshtp::model {
namespace {

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
    EXPECT_EQ(stack.num_params(), 6);  // ln1, qkv, proj, ln2, fc1, fc2 weights: no biases
    testing::expect_stack_gradients(stack, c, 100, std::string(layout::name(attention)));
  }
}

}  // namespace
}  // namespace meshtp::model
