// Context parallelism through the whole model (model/gpt.hpp, model/block.hpp): the world's n
// ranks are one cp group (each a 1×1 tensor-parallel mesh), each running its zigzag share of
// every sequence. The loss is the mean of the ranks' losses (each the mean of as many tokens)
// and the gradient the sum of their gradients taken with dloss = 1/n (as the trainer does over
// dp·cp):
//   * both equal the one-rank model's on the same weights and batch, for GPT's layers (learned
//     positions, LayerNorm, biases) and the Llama family's (RoPE, RMSNorm, SwiGLU, GQA), with
//     the ring, the all-to-all and (4 ranks) both;
//   * finite differences of that global loss match the gradient in the paths context
//     parallelism adds at the model level: the position table added and its gradient taken
//     row by row at each zigzag row's position, RoPE per zigzag chunk (its backward through
//     the QKV weight), the context-parallel core (tests/ops/grad_check.hpp's stencil and
//     tolerance).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "../ops/grad_check.hpp"
#include "array_copy.hpp"
#include "comm/communicator.hpp"
#include "model/gpt.hpp"
#include "tensor/random.hpp"

namespace meshtp::model {
namespace {

constexpr std::int64_t kVocab = 32;
// The whole model's fp32 loss (embedding, a block, the head's cross-entropy) is a noisier and
// more curved function than one op's: tests/ops/grad_check.hpp's stencil on it errs by up to
// 2.2e-4 here — the one-rank model on the same weights as much (both printed) — so the
// model's tolerance is 10× the op's. A wrong gradient errs by far more: the position table's
// gradient taken at the rows' local instead of global positions by 0.85.
constexpr double kModelFdTol = 10 * testing::kFdTol;

std::vector<std::int32_t> random_ids(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    ids[static_cast<std::size_t>(i)] =
        static_cast<std::int32_t>((uniform_at(seed, i) + 1.0f) * 16.0f) % kVocab;
  }
  return ids;
}

GptConfig gpt_config() {
  return {.shape = {.batch = 2, .seq = 16, .hidden = 16, .heads = 4, .layers = 1,
                    .vocab = kVocab}};
}

GptConfig llama_config() {
  return {.shape = {.batch = 2,
                    .seq = 16,
                    .hidden = 16,
                    .heads = 4,
                    .layers = 1,
                    .vocab = kVocab,
                    .kv_heads = 2,
                    .ffn_hidden = 24,
                    .activation = layout::Activation::kSwiglu,
                    .norm = layout::Norm::kRmsNorm,
                    .position = layout::Position::kRope,
                    .tie_embeddings = false}};
}

// The global loss (mean over the cp ranks) and, with backward, every parameter's global
// gradient (summed over them) in `grads`.
double global_loss(Gpt& gpt, const comm::Communicator& cp, const std::vector<std::int32_t>& tokens,
                   const std::vector<std::int32_t>& targets, std::vector<Tensor>* grads) {
  double loss = gpt.forward(tokens, targets);
  cp.all_reduce(std::span<double>(&loss, 1));
  loss /= cp.size();
  if (grads == nullptr) return loss;
  gpt.zero_grads();
  gpt.backward(1.0f / static_cast<float>(cp.size()));
  grads->clear();
  for (int p = 0; p < gpt.num_params(); ++p) {
    Tensor g = testing::copy_of(gpt.grad(p));
    cp.all_reduce(g.values());
    grads->push_back(std::move(g));
  }
  return loss;
}

struct Case {
  const char* name;
  GptConfig config;
  layout::CpComm comm;
};

std::vector<Case> cases(int n) {
  std::vector<Case> out{{"gpt ring", gpt_config(), layout::CpComm::kRing},
                        {"gpt a2a", gpt_config(), layout::CpComm::kA2a},
                        {"llama ring", llama_config(), layout::CpComm::kRing},
                        {"llama a2a", llama_config(), layout::CpComm::kA2a}};
  if (n == 4) out.push_back({"llama a2a+ring", llama_config(), layout::CpComm::kA2aRing});
  return out;
}

TEST(ContextParallelModel, LossAndGradientsEqualTheOneRankModel) {
  const auto world = comm::Communicator::world();
  const int n = world.size();
  if (n < 2) GTEST_SKIP() << "context parallelism needs 2 ranks or more";
  const mesh::DeviceMesh solo(world.split(world.rank(), 0), {1, 1});
  for (const Case& k : cases(n)) {
    const std::vector<std::int32_t> tokens = random_ids(k.config.shape.tokens(), 7);
    const std::vector<std::int32_t> targets = random_ids(k.config.shape.tokens(), 8);
    Gpt one(solo, k.config);
    one.init(3);
    const double want = one.forward(tokens, targets);
    one.zero_grads();
    one.backward();
    GptConfig c = k.config;
    c.layout.attention = layout::Attention::kFused;
    c.layout.cp = n;
    c.layout.cp_comm = k.comm;
    c.cp_group = &world;
    Gpt gpt(solo, c);
    gpt.init(3);
    std::vector<Tensor> grads;
    const double got = global_loss(gpt, world, tokens, targets, &grads);
    EXPECT_NEAR(got, want, 1e-6 * std::abs(want)) << k.name;
    ASSERT_EQ(gpt.num_params(), one.num_params());
    for (int p = 0; p < gpt.num_params(); ++p) {
      const auto a = grads[static_cast<std::size_t>(p)].values();
      const auto b = device::floats(one.grad(p));
      double scale = 0, diff = 0;
      for (std::size_t i = 0; i < a.size(); ++i) {
        scale = std::max(scale, static_cast<double>(std::abs(b[i])));
        diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
      }
      EXPECT_LE(diff, 1e-5 * scale + 1e-9) << k.name << " " << gpt.name(p);
    }
  }
}

// A mixture of experts under context parallelism (Megatron-Core's MoE parallel folding): the
// experts fold over the cp ranks (here the whole fold group: 1×1 meshes), ep = n each expert
// whole or ep 1 × etp n each split; each rank dispatches its own zigzag tokens, the
// load-balancing loss counts all of them (the one-rank model's set), weighted dloss·cp. The
// dense parameters' gradients are summed over cp as above; the experts' are shards of one
// gradient, gathered whole. Both equal the one-rank model's (whose MoE backward
// model_moe_grad_test checks by finite differences).
TEST(ContextParallelModel, MixtureOfExpertsEqualsTheOneRankModel) {
  const auto world = comm::Communicator::world();
  const int n = world.size();
  if (n < 2) GTEST_SKIP() << "context parallelism needs 2 ranks or more";
  const mesh::DeviceMesh solo(world.split(world.rank(), 0), {1, 1});
  GptConfig base = gpt_config();
  base.shape.num_experts = 4;
  base.shape.top_k = 2;
  base.shape.moe_ffn_hidden = 16;
  base.shape.router_aux_loss = 0.01;
  base.layout.strategy = layout::Strategy::kMegatron;
  base.layout.attention = layout::Attention::kFused;
  const std::vector<std::int32_t> tokens = random_ids(base.shape.tokens(), 11);
  const std::vector<std::int32_t> targets = random_ids(base.shape.tokens(), 12);
  Gpt one(solo, base);
  one.init(4);
  const double want = one.forward(tokens, targets);
  one.zero_grads();
  one.backward();
  for (const int etp : {0, n}) {
    GptConfig c = base;
    c.layout.cp = n;
    c.layout.etp = etp;
    c.cp_group = &world;
    c.fold_group = &world;
    Gpt gpt(solo, c);
    gpt.init(4);
    double got = gpt.forward(tokens, targets);
    world.all_reduce(std::span<double>(&got, 1));
    got /= n;
    gpt.zero_grads();
    gpt.backward(1.0f / static_cast<float>(n));
    EXPECT_NEAR(got, want, 1e-6 * std::abs(want)) << "etp " << etp;
    int experts = 0;
    for (int p = 0; p < gpt.num_params(); ++p) {
      Tensor g = testing::copy_of(gpt.grad(p));
      if (gpt.on_expert_mesh(p)) {
        g = gpt.gather(p, g.values());
        ++experts;
      } else {
        world.all_reduce(g.values());
      }
      const auto a = g.values();
      const auto b = device::floats(one.grad(p));
      ASSERT_EQ(a.size(), b.size()) << gpt.name(p);
      double scale = 0, diff = 0;
      for (std::size_t i = 0; i < a.size(); ++i) {
        scale = std::max(scale, static_cast<double>(std::abs(b[i])));
        diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
      }
      EXPECT_LE(diff, 1e-5 * scale + 1e-9) << "etp " << etp << " " << gpt.name(p);
    }
    EXPECT_EQ(experts, 2) << "etp " << etp;  // fc1 and fc2 of the one layer
  }
}

TEST(ContextParallelModel, FiniteDifferencesMatchBackward) {
  const auto world = comm::Communicator::world();
  const int n = world.size();
  if (n < 2) GTEST_SKIP() << "context parallelism needs 2 ranks or more";
  const mesh::DeviceMesh solo(world.split(world.rank(), 0), {1, 1});
  for (const Case& k : cases(n)) {
   for (const bool context : {true, false}) {  // the cp model, then the one-rank model
    GptConfig c = k.config;
    c.layout.attention = layout::Attention::kFused;
    if (context) {
      c.layout.cp = n;
      c.layout.cp_comm = k.comm;
      c.cp_group = &world;
    }
    const comm::Communicator& group = context ? world : solo.comm();
    Gpt gpt(solo, c);
    gpt.init(5);
    // Weights of a test's scale (multiples of 2⁻¹²: the perturbed values are exact), norm
    // weights near 1, so the attention's scores are far from uniform.
    for (int p = 0; p < gpt.num_params(); ++p) {
      const bool norm = gpt.name(p).find("ln") != std::string::npos;
      const Tensor w = testing::test_tensor(gpt.local_shape(p), 100 + static_cast<std::uint64_t>(p),
                                            norm ? 0.25f : 0.5f, norm ? 1.0f : 0.0f);
      std::copy(w.values().begin(), w.values().end(), device::floats(gpt.value(p)).begin());
    }
    const std::vector<std::int32_t> tokens = random_ids(c.shape.tokens(), 9);
    const std::vector<std::int32_t> targets = random_ids(c.shape.tokens(), 10);
    std::vector<Tensor> grads;
    global_loss(gpt, group, tokens, targets, &grads);
    const auto loss = [&] { return global_loss(gpt, group, tokens, targets, nullptr); };
    int checked = 0;
    for (int p = 0; p < gpt.num_params(); ++p) {
      const std::string& name = gpt.name(p);
      // The position table, and the first layer's QKV weight (RoPE's and the core's backward).
      if (name != "wpe" && name.find("qkv.weight") == std::string::npos) continue;
      const testing::FdResult r = testing::check_gradient(
          device::floats(gpt.value(p)), grads[static_cast<std::size_t>(p)].values(), loss);
      EXPECT_LT(r.error, kModelFdTol) << k.name << (context ? "" : " (one rank)") << " " << name
                                      << ": " << r;
      if (world.rank() == 0) {
        std::printf("[ fd       ] %-16s %-9s %-24s %.2e\n", k.name, context ? "cp" : "one rank",
                    name.c_str(), r.error);
      }
      ++checked;
    }
    EXPECT_EQ(checked, c.shape.position == layout::Position::kLearned ? 2 : 1) << k.name;
   }
  }
}

}  // namespace
}  // namespace meshtp::model
