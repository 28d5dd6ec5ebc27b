// device::BlockStack on the CPU backend computes model::ReferenceStack's output, input
// gradient and every parameter gradient: the stack's call order, shapes, transposes and "+="
// bookkeeping, checked where there is no GPU. (The GPU backend's ops are gpu_ops_test's; the
// stack on the GPU against this one is gpu_model_test's.) Its bad inputs name the value.
#include "device/block_stack.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.hpp"
#include "device/model_fixtures.hpp"
#include "model/params.hpp"
#include "model/reference.hpp"
#include "ops/cpu_backend.hpp"
#include "tensor/random.hpp"

namespace meshtp::device {
namespace {

using test::random_block_weights;

std::map<std::string, Tensor> named(const std::vector<BlockWeights>& weights, std::int64_t c) {
  std::map<std::string, Tensor> out;
  const int layers = static_cast<int>(weights.size());
  for (const model::ParamEntry& e : model::stack_param_table(layers, c)) {
    // "layers.{l}.{suffix}" → the BlockWeights field of that parameter
    const int l = std::stoi(e.name.substr(7, e.name.find('.', 7) - 7));
    const auto fields = test::fields(weights[static_cast<std::size_t>(l)]);
    const std::string suffix = e.name.substr(e.name.find('.', 7) + 1);
    out.emplace(e.name, Tensor(e.shape, fields.at(suffix)));
  }
  return out;
}

void expect_close(const std::vector<float>& got, std::span<const float> want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  EXPECT_LE(max_relative_error(got, want), 1e-6) << what;
}

TEST(BlockStack, CpuBackendIsTheReferenceStack) {
  for (const layout::ModelShape& shape :
       {layout::ModelShape{.batch = 2, .seq = 16, .hidden = 32, .heads = 4, .layers = 2},
        layout::ModelShape{.batch = 1, .seq = 8, .hidden = 24, .heads = 3, .layers = 1},
        layout::ModelShape{.batch = 3, .seq = 5, .hidden = 16, .heads = 1, .layers = 3}}) {
    SCOPED_TRACE(::testing::Message() << shape);
    const std::int64_t n = shape.tokens(), c = shape.hidden;
    const std::vector<BlockWeights> weights =
        random_block_weights(static_cast<int>(shape.layers), c, 7);
    const Tensor x = normal_tensor({n, c}, 11);
    const Tensor dy = normal_tensor({n, c}, 12);

    model::ReferenceStack reference({.block = {.shape = shape}}, named(weights, c));
    const Tensor y_ref = reference.forward(x);
    const Tensor dx_ref = reference.backward(dy);

    CpuBackend cpu;
    BlockStack stack(cpu, shape, weights, Element::kF32);
    Array x_dev = stack.input_like();
    cpu.upload(x_dev, x.values());
    Array dy_dev = stack.input_like();
    cpu.upload(dy_dev, dy.values());
    // Twice: a second step reuses every buffer and must not accumulate into the first's.
    for (int step = 0; step < 2; ++step) {
      expect_close(cpu.download(stack.forward(x_dev)), y_ref.values(), "y");
      expect_close(cpu.download(stack.backward(dy_dev)), dx_ref.values(), "dx");
    }
    const std::map<std::string, Tensor> grads_ref = reference.grads();
    const std::map<std::string, Tensor> grads = named(stack.gradients(), c);
    ASSERT_EQ(grads.size(), grads_ref.size());
    for (const auto& [name, g] : grads_ref) {
      const std::span<const float> got = grads.at(name).values();
      expect_close({got.begin(), got.end()}, g.values(), name);
    }
  }
}

TEST(BlockStack, BadInputsNameTheValue) {
  const layout::ModelShape shape{.batch = 2, .seq = 4, .hidden = 8, .heads = 2, .layers = 1};
  CpuBackend cpu;
  std::vector<BlockWeights> weights = random_block_weights(1, 8, 3);
  EXPECT_NE(test::error_message([&] {
              BlockStack(cpu, shape, random_block_weights(2, 8, 3), Element::kF32);
            }).find("2 layers of weights for a stack of 1"),
            std::string::npos);
  std::vector<BlockWeights> short_qkv = weights;
  short_qkv[0].qkv_w.pop_back();
  EXPECT_NE(test::error_message([&] {
              BlockStack(cpu, shape, short_qkv, Element::kF32);
            }).find("layer 0 attn.qkv.weight has 191 values, expected 192"),
            std::string::npos);
  layout::ModelShape odd = shape;
  odd.heads = 3;
  EXPECT_NE(test::error_message([&] {
              BlockStack(cpu, odd, weights, Element::kF32);
            }).find("hidden=8 is not divisible by heads=3"),
            std::string::npos);
  EXPECT_NE(test::error_message([&] {
              BlockStack(cpu, shape, weights, Element::kBF16);
            }).find("cpu backend: arrays are fp32"),
            std::string::npos);
  BlockStack stack(cpu, shape, weights, Element::kF32);
  Array dy = stack.input_like();
  cpu.zero(dy);
  EXPECT_NE(test::error_message([&] { stack.backward(dy); }).find("after a forward"),
            std::string::npos);
  Array wrong = cpu.alloc(5, Element::kF32);
  EXPECT_NE(
      test::error_message([&] { stack.forward(wrong); }).find("x has 5 values, expected 8 x 8"),
      std::string::npos);
}

}  // namespace
}  // namespace meshtp::device
