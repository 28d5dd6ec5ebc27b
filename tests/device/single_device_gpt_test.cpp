// device::SingleDeviceGpt on the CPU backend computes the serial reference GPT's loss and
// every parameter's gradient (tests/model/serial_gpt.hpp: embedding, the reference stack,
// LayerNorm, tied head, cross-entropy): its call order and the tied embedding's two gradient
// terms, checked where there is no GPU. gpu_model_test runs it on the GPU. Its bad
// inputs name the value.
#include "device/single_device_gpt.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "adamw_reference.hpp"
#include "core/error.hpp"
#include "device/model_fixtures.hpp"
#include "model/params.hpp"
#include "model/serial_gpt.hpp"
#include "ops/cpu_backend.hpp"
#include "tensor/random.hpp"

namespace meshtp::device {
namespace {

using test::random_ids;

TEST(SingleDeviceGpt, CpuBackendIsTheSerialReference) {
  for (const layout::ModelShape& shape :
       {layout::ModelShape{
            .batch = 2, .seq = 8, .hidden = 32, .heads = 4, .layers = 2, .vocab = 50},
        layout::ModelShape{
            .batch = 3, .seq = 5, .hidden = 16, .heads = 2, .layers = 1, .vocab = 7}}) {
    SCOPED_TRACE(::testing::Message() << shape);
    const std::int64_t n = shape.tokens(), c = shape.hidden, v = shape.vocab;
    const GptWeights weights = test::random_gpt_weights(shape, 1);
    const std::vector<std::int32_t> tokens = random_ids(n, v, 6), targets = random_ids(n, v, 7);

    std::map<std::string, Tensor> named{{"wte", Tensor({v, c}, weights.wte)},
                                        {"wpe", Tensor({shape.seq, c}, weights.wpe)},
                                        {"lnf.weight", Tensor({c}, weights.lnf_w)},
                                        {"lnf.bias", Tensor({c}, weights.lnf_b)}};
    for (int l = 0; l < static_cast<int>(shape.layers); ++l) {
      const auto fields = test::fields(weights.blocks[static_cast<std::size_t>(l)]);
      for (const model::ParamEntry& e : model::block_param_table(l, c)) {
        if (!model::present(e)) continue;
        named.emplace(e.name, Tensor(e.shape, fields.at(e.name.substr(e.name.find('.', 7) + 1))));
      }
    }
    const model::SerialResult want = model::serial_gpt({.shape = shape}, named, tokens, targets);

    CpuBackend cpu;
    SingleDeviceGpt gpt(cpu, shape, weights, Element::kF32);
    for (int step = 0; step < 2; ++step) {  // buffers reused: nothing accumulates across steps
      EXPECT_NEAR(gpt.forward_backward(tokens, targets), want.loss, 1e-6 * want.loss);
    }
    const GptWeights g = gpt.gradients();
    auto expect_close = [&](const std::vector<float>& got, const std::string& name) {
      const Tensor& ref = want.grads.at(name);
      ASSERT_EQ(got.size(), ref.values().size()) << name;
      EXPECT_LE(max_relative_error(got, ref.values()), 1e-6) << name;
    };
    expect_close(g.wte, "wte");
    expect_close(g.wpe, "wpe");
    expect_close(g.lnf_w, "lnf.weight");
    expect_close(g.lnf_b, "lnf.bias");
    for (int l = 0; l < static_cast<int>(shape.layers); ++l) {
      for (const auto& [suffix, got] : test::fields(g.blocks[static_cast<std::size_t>(l)])) {
        expect_close(got, "layers." + std::to_string(l) + "." + suffix);
      }
    }
  }
}

// update() is AdamW on the fp32 masters with the step's gradients, decay on the matrices and
// embeddings only; the next forward reads the updated weights.
TEST(SingleDeviceGpt, UpdateIsAdamWWithDecayOnTheMatricesAndTheNextForwardSeesIt) {
  const layout::ModelShape shape{
      .batch = 2, .seq = 8, .hidden = 16, .heads = 2, .layers = 2, .vocab = 30};
  const std::int64_t n = shape.tokens(), v = shape.vocab;
  const GptWeights weights = test::random_gpt_weights(shape, 1);
  const std::vector<std::int32_t> tokens = random_ids(n, v, 6), targets = random_ids(n, v, 7);
  CpuBackend cpu;
  SingleDeviceGpt gpt(cpu, shape, weights, Element::kF32);
  gpt.forward_backward(tokens, targets);
  const GptWeights g = gpt.gradients();
  const AdamWStep step{.lr = 0.05f,
                       .beta1 = 0.9f,
                       .beta2 = 0.95f,
                       .eps = 1e-8f,
                       .decay = 0.1f,
                       .bias1 = 0.1f,
                       .bias2 = 0.05f};
  gpt.update(step);
  const GptWeights after = gpt.parameters();

  // The expected update, tensor by tensor, with the reference loop.
  auto expect_updated = [&](const std::vector<float>& before, const std::vector<float>& grad,
                            const std::vector<float>& got, bool decay, const std::string& name) {
    std::vector<float> p = before, m(p.size(), 0.0f), v2(p.size(), 0.0f);
    AdamWStep s = step;
    if (!decay) s.decay = 0;
    test_support::adamw_reference(p, grad, m, v2, s);
    ASSERT_EQ(got.size(), p.size()) << name;
    EXPECT_LE(max_relative_error(got, p), 1e-6) << name;
    EXPECT_GT(max_abs_diff(got, before), 1e-3) << name << " did not move";
  };
  expect_updated(weights.wte, g.wte, after.wte, true, "wte");
  expect_updated(weights.wpe, g.wpe, after.wpe, true, "wpe");
  expect_updated(weights.lnf_w, g.lnf_w, after.lnf_w, false, "lnf.weight");
  expect_updated(weights.lnf_b, g.lnf_b, after.lnf_b, false, "lnf.bias");
  for (std::size_t l = 0; l < 2; ++l) {
    const auto before = test::fields(weights.blocks[l]), grad = test::fields(g.blocks[l]),
               got = test::fields(after.blocks[l]);
    for (const auto& [suffix, b] : before) {
      const bool decay = suffix.ends_with(".weight") && !suffix.starts_with("ln");
      expect_updated(b, grad.at(suffix), got.at(suffix), decay, suffix);
    }
  }
  // The next step's loss is the reference model's with the updated weights.
  CpuBackend fresh;
  SingleDeviceGpt updated(fresh, shape, after, Element::kF32);
  EXPECT_DOUBLE_EQ(gpt.forward_backward(tokens, targets),
                   updated.forward_backward(tokens, targets));
}

// clip_gradients: ‖g‖ over every gradient, and g · max_norm/‖g‖ when ‖g‖ > max_norm (train's
// rule); below the bound, or with max_norm 0, nothing changes.
TEST(SingleDeviceGpt, ClipGradientsScalesByTheGlobalNorm) {
  const layout::ModelShape shape{
      .batch = 2, .seq = 8, .hidden = 16, .heads = 2, .layers = 2, .vocab = 30};
  const std::int64_t n = shape.tokens(), v = shape.vocab;
  CpuBackend cpu;
  SingleDeviceGpt gpt(cpu, shape, test::random_gpt_weights(shape, 1), Element::kF32);
  gpt.forward_backward(random_ids(n, v, 6), random_ids(n, v, 7));
  const GptWeights g = gpt.gradients();
  double squares = 0;
  auto add = [&](const std::vector<float>& values) {
    for (const float x : values) squares += static_cast<double>(x) * x;
  };
  add(g.wte);
  add(g.wpe);
  add(g.lnf_w);
  add(g.lnf_b);
  for (const BlockWeights& b : g.blocks) {
    for (const std::vector<float>* values : fields(b)) add(*values);
  }
  const double norm = std::sqrt(squares);
  EXPECT_NEAR(gpt.clip_gradients(0), norm, 1e-12 * norm);         // 0: off
  EXPECT_NEAR(gpt.clip_gradients(2 * norm), norm, 1e-12 * norm);  // below the bound
  EXPECT_EQ(gpt.gradients().wte, g.wte);
  EXPECT_NEAR(gpt.clip_gradients(norm / 4), norm, 1e-12 * norm);
  const GptWeights clipped = gpt.gradients();
  for (std::size_t i = 0; i < g.wte.size(); ++i) {
    EXPECT_NEAR(clipped.wte[i], g.wte[i] / 4, 1e-6 * std::abs(g.wte[i]) + 1e-12) << i;
  }
  EXPECT_NEAR(gpt.clip_gradients(0), norm / 4, 1e-6 * norm);
}

TEST(SingleDeviceGpt, BadInputsNameTheValue) {
  const layout::ModelShape shape{
      .batch = 1, .seq = 4, .hidden = 8, .heads = 2, .layers = 1, .vocab = 5};
  CpuBackend cpu;
  GptWeights w{.wte = std::vector<float>(40, 0.1f),
               .wpe = std::vector<float>(32, 0.1f),
               .blocks = test::random_block_weights(1, 8, 1),
               .lnf_w = std::vector<float>(8, 1.0f),
               .lnf_b = std::vector<float>(8, 0.0f)};
  layout::ModelShape no_vocab = shape;
  no_vocab.vocab = 0;
  EXPECT_NE(test::error_message([&] {
              SingleDeviceGpt(cpu, no_vocab, w, Element::kF32);
            }).find("vocab=0 must be at least 1"),
            std::string::npos);
  GptWeights short_wpe = w;
  short_wpe.wpe.resize(31);
  EXPECT_NE(test::error_message([&] {
              SingleDeviceGpt(cpu, shape, short_wpe, Element::kF32);
            }).find("wpe has 31 values, expected 32"),
            std::string::npos);
  SingleDeviceGpt gpt(cpu, shape, w, Element::kF32);
  const std::vector<std::int32_t> three{1, 2, 3}, four{1, 2, 3, 4}, bad{1, 2, 5, 0};
  EXPECT_NE(test::error_message([&] {
              gpt.forward_backward(three, four);
            }).find("3 tokens and 4 targets, expected batch 1 x seq 4 = 4 each"),
            std::string::npos);
  EXPECT_NE(test::error_message([&] {
              gpt.forward_backward(bad, four);
            }).find("token 5 at position 2 is outside the vocabulary [0, 5)"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtp::device
