// Finite differences through a whole block stack on a 1×1 mesh (local shards are the global
// tensors), shared by the model's gradient tests: every parameter set to a test tensor (norm
// weights near 1), L = Σ dy ⊙ y over the stack's output, and each parameter's analytic
// gradient and the input's against tests/ops/grad_check.hpp's stencil and tolerance.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../ops/grad_check.hpp"
#include "array_copy.hpp"
#include "model/stack.hpp"

namespace meshtp::model::testing {

// seed: the parameters' (seed + p) and the input's and dy's (seed + 1000, + 1001); input_step:
// the stencil's step for the input (the parameters take the default); tolerance: the bound on
// each relative error.
inline void expect_stack_gradients(Stack& stack, const StackConfig& c, std::uint64_t seed,
                                   const std::string& label,
                                   double input_step = meshtp::testing::kFdStep,
                                   double tolerance = meshtp::testing::kFdTol) {
  using meshtp::testing::check_gradient;
  using meshtp::testing::test_tensor;
  for (int p = 0; p < stack.num_params(); ++p) {
    const bool norm = stack.param_table()[static_cast<std::size_t>(p)].init == Init::kOnes;
    const Tensor w = test_tensor(stack.local_shape(p), seed + static_cast<std::uint64_t>(p),
                                 norm ? 0.25f : 0.5f, norm ? 1.0f : 0.0f);
    std::copy(w.values().begin(), w.values().end(), device::floats(stack.value(p)).begin());
  }
  const Shape stream{c.block.shape.tokens(), c.block.shape.hidden};
  Tensor x = test_tensor(stream, seed + 1000);
  const Tensor dy = test_tensor(stream, seed + 1001);
  const auto loss = [&] {
    stack.set_input(x);
    stack.forward();
    return meshtp::testing::dot(stack.gather_output().values(), dy.values());
  };
  loss();
  stack.zero_grads();
  stack.set_grad_output(dy);
  stack.backward();
  const Tensor dx = stack.gather_grad_input();
  std::vector<Tensor> grads;
  for (int p = 0; p < stack.num_params(); ++p)
    grads.push_back(meshtp::testing::copy_of(stack.grad(p)));
  for (int p = 0; p < stack.num_params(); ++p) {
    const auto r = check_gradient(device::floats(stack.value(p)),
                                  grads[static_cast<std::size_t>(p)].values(), loss);
    EXPECT_LT(r.error, tolerance)
        << label << " " << stack.param_table()[static_cast<std::size_t>(p)].name << ": " << r;
  }
  const auto r = check_gradient(x.values(), dx.values(), loss, input_step);
  EXPECT_LT(r.error, tolerance) << label << " input: " << r;
}

}  // namespace meshtp::model::testing
