// The GPT model under every ATP mesh of this world size (and chunks, and sequence
// parallelism on (N,1)) computes the serial model's loss and every parameter gradient.
//
// The serial reference (model/serial_gpt.hpp) is independent of model/gpt.cpp.
#include "model/gpt.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <gtest/gtest.h>

#include "array_copy.hpp"
#include "core/error.hpp"
#include "error_of.hpp"
#include "model/serial_gpt.hpp"
#include "tensor/random.hpp"

namespace meshtp::model {
namespace {

constexpr std::int64_t kVocab = 256;

std::vector<std::int32_t> random_ids(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    ids[i] = static_cast<std::int32_t>((uniform_at(seed, i) + 1.0f) * 128.0f) % kVocab;
  }
  return ids;
}

std::vector<std::vector<int>> meshes_2d(int n) {
  std::vector<std::vector<int>> out;
  for (int d1 = 1; d1 <= n; ++d1) {
    if (n % d1 == 0) out.push_back({d1, n / d1});
  }
  return out;
}

// The global weights every layout starts from (a 1x1 model's init on this rank's own
// one-rank communicator, gathered), a batch, and the serial model's loss and gradients on it.
struct Reference {
  std::map<std::string, Tensor> weights;
  std::vector<std::int32_t> tokens, targets;
  SerialResult serial;
};

Reference make_reference(const comm::Communicator& world, const GptConfig& c,
                         std::uint64_t init_seed, std::uint64_t data_seed) {
  Reference r;
  r.tokens = random_ids(c.shape.tokens(), data_seed);
  r.targets = random_ids(c.shape.tokens(), data_seed + 1);
  const mesh::DeviceMesh solo(world.split(world.rank(), 0), {1, 1});
  Gpt one(solo, c);
  one.init(init_seed);
  for (int p = 0; p < one.num_params(); ++p) r.weights[one.name(p)] = one.gather_value(p);
  r.serial = serial_gpt(c, r.weights, r.tokens, r.targets);
  return r;
}

TEST(Gpt, EveryMeshMatchesTheSerialModel) {
  const auto world = comm::Communicator::world();
  GptConfig base{
      .shape = {.batch = 4, .seq = 8, .hidden = 32, .heads = 8, .layers = 2, .vocab = kVocab}};
  const Reference r = make_reference(world, base, 1234, 1);
  const auto& [weights, tokens, targets, ref] = r;

  struct Variant {
    int chunks;
    bool sp;
  };
  for (const auto& shape : meshes_2d(world.size())) {
    for (const Variant v : {Variant{1, false}, Variant{2, false}, Variant{4, false},
                            Variant{1, true}, Variant{2, true}}) {
      if (v.sp && shape[1] != 1) continue;
      const mesh::DeviceMesh mesh(world, shape);
      GptConfig c = base;
      c.layout = {.mesh = {shape[0], shape[1]}, .chunks = v.chunks, .sequence_parallel = v.sp};
      Gpt gpt(mesh, c);
      gpt.load(weights, "test weights");
      gpt.zero_grads();
      const double loss = gpt.forward(tokens, targets);
      gpt.backward();
      const std::string where = fmt::format("rank {} mesh {}x{} chunks {}{}", world.rank(),
                                            shape[0], shape[1], v.chunks, v.sp ? " sp" : "");
      EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss) << where;
      for (int p = 0; p < gpt.num_params(); ++p) {
        const Tensor g = gpt.gather(p, device::floats(gpt.grad(p)));
        EXPECT_LT(max_relative_error(g.values(), ref.grads.at(gpt.name(p)).values()), 1e-4)
            << where << " gradient of " << gpt.name(p);
      }
    }
  }
}

// The Llama family (RMSNorm, SwiGLU of width ffn_hidden, RoPE, grouped-query attention, an
// untied head) on every ATP mesh of this world size, with chunks, sequence parallelism,
// the fused and the unfused core and recomputation, against the serial model. The weights are
// the init moved by noise, so a norm weight's misplaced shard (all ones at init) shows.
GptConfig llama_config(std::int64_t kv_heads) {
  return {.shape = {.batch = 4,
                    .seq = 8,
                    .hidden = 64,
                    .heads = 16,
                    .layers = 2,
                    .vocab = kVocab,
                    .kv_heads = kv_heads,
                    .ffn_hidden = 96,
                    .activation = layout::Activation::kSwiglu,
                    .norm = layout::Norm::kRmsNorm,
                    .position = layout::Position::kRope,
                    .tie_embeddings = false}};
}

TEST(Gpt, LlamaEveryMeshMatchesTheSerialModel) {
  const auto world = comm::Communicator::world();
  // Grouped-query (kv 2: KV heads copied on 4 and 8 ranks; kv 8: split), multi-head.
  for (const std::int64_t kv : {2, 8, 16}) {
    const GptConfig base = llama_config(kv);
    Reference r = make_reference(world, base, 77, 3);
    std::uint64_t seed = 500;
    for (auto& [name, t] : r.weights) {
      const Tensor noise = uniform_tensor(t.shape(), ++seed, 0.1f);
      for (std::int64_t i = 0; i < t.numel(); ++i) t[i] += noise[i];
    }
    r.serial = serial_gpt(base, r.weights, r.tokens, r.targets);
    const auto& [weights, tokens, targets, ref] = r;
    EXPECT_FALSE(weights.contains("wpe") || weights.contains("lnf.bias") ||
                 weights.contains("layers.0.attn.qkv.bias"));
    EXPECT_EQ(weights.at("layers.0.attn.qkv.weight").shape(), (Shape{64 + 2 * kv * 4, 64}));
    EXPECT_EQ(weights.at("layers.0.mlp.fc1.weight").shape(), (Shape{192, 64}));
    struct Variant {
      int chunks;
      bool sp;
      layout::Attention attention;
      layout::Recompute recompute;
    };
    using A = layout::Attention;
    using R = layout::Recompute;
    for (const auto& shape : meshes_2d(world.size())) {
      for (const Variant v :
           {Variant{1, false, A::kUnfused, R::kNone}, Variant{2, false, A::kFused, R::kNone},
            Variant{4, false, A::kUnfused, R::kSelective}, Variant{1, true, A::kUnfused, R::kNone},
            Variant{2, true, A::kFused, R::kFull}}) {
        if (v.sp && shape[1] != 1) continue;
        const mesh::DeviceMesh mesh(world, shape);
        GptConfig c = base;
        c.layout = {.recompute = v.recompute,
                    .mesh = {shape[0], shape[1]},
                    .chunks = v.chunks,
                    .sequence_parallel = v.sp,
                    .attention = v.attention};
        Gpt gpt(mesh, c);
        gpt.load(weights, "test weights");
        gpt.zero_grads();
        const double loss = gpt.forward(tokens, targets);
        gpt.backward();
        const std::string where = fmt::format(
            "rank {} kv {} mesh {}x{} chunks {}{} {} {}", world.rank(), kv, shape[0], shape[1],
            v.chunks, v.sp ? " sp" : "", layout::name(v.attention), layout::name(v.recompute));
        EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss) << where;
        EXPECT_EQ(gpt.num_params(), static_cast<int>(ref.grads.size())) << where;
        for (int p = 0; p < gpt.num_params(); ++p) {
          const Tensor g = gpt.gather(p, device::floats(gpt.grad(p)));
          EXPECT_LT(max_relative_error(g.values(), ref.grads.at(gpt.name(p)).values()), 1e-4)
              << where << " gradient of " << gpt.name(p);
        }
      }
    }
  }
}

// What the Llama layers do not run is refused naming the values, before any collective.
void expect_refused(GptConfig c, std::array<int, 2> mesh, const std::string& text) {
  c.layout.mesh = mesh;
  const std::string error = test_support::error_of([&] { validate(c, {mesh[0], mesh[1]}); });
  EXPECT_NE(error.find(text), std::string::npos) << "got: " << error;
}

TEST(Gpt, LlamaRefusesWhatItDoesNotRun) {
  GptConfig c = llama_config(6);
  c.shape.heads = 24;
  c.shape.hidden = 96;
  expect_refused(c, {4, 1},
                 "kv_heads=6 (heads=24) and d1·d2=4 (mesh 4x1): one must divide the other");
  c = llama_config(3);  // 16 heads
  expect_refused(c, {1, 1}, "heads=16 is not divisible by kv_heads=3");
  c = llama_config(8);
  c.layout.strategy = layout::Strategy::kSumma;
  expect_refused(c, {2, 1},
                 "kv_heads=8 (heads=16): the 2D-GeMM blocks (summa) run GPT layers only");
  c = llama_config(8);
  c.shape.ffn_hidden = 100;
  expect_refused(c, {8, 1}, "ffn_hidden=100 is not divisible by d1=8 (mesh 8x1)");
  c = llama_config(8);
  c.shape.activation = layout::Activation::kGelu;
  expect_refused(c, {1, 1}, "kv_heads=8 < heads=16 with activation=gelu");
  c = llama_config(2);  // KV heads copied over 4 head blocks: runs
  c.layout.mesh = {4, 1};
  EXPECT_EQ(test_support::error_of([&] { validate(c, {4, 1}); }), "");
}

TEST(Gpt, Gemm2dStrategiesMatchTheSerialModel) {
  const auto world = comm::Communicator::world();
  GptConfig base{
      .shape = {.batch = 8, .seq = 8, .hidden = 32, .heads = 8, .layers = 2, .vocab = kVocab}};
  const Reference r = make_reference(world, base, 99, 5);
  const auto& [weights, tokens, targets, ref] = r;
  int checked = 0;
  for (const auto& shape : meshes_2d(world.size())) {
    for (const layout::Algorithm algo : layout::all<layout::Algorithm>()) {
      for (const int slices : {1, 2}) {
        GptConfig c = base;
        c.layout = {.mesh = {shape[0], shape[1]}, .strategy = layout::strategy_of(algo)};
        for (layout::LinearPlan& l : c.layout.linears) l.gemm2d.slices = slices;
        try {
          validate(c, shape);  // e.g. Cannon off-square, batch % Nr: not a case to run
        } catch (const Error&) {
          continue;
        }
        const mesh::DeviceMesh mesh(world, shape);
        Gpt gpt(mesh, c);
        gpt.load(weights, "test weights");
        gpt.zero_grads();
        const double loss = gpt.forward(tokens, targets);
        gpt.backward();
        const std::string where = fmt::format("rank {} mesh {}x{} {} S={}", world.rank(), shape[0],
                                              shape[1], layout::name(algo), slices);
        EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss) << where;
        for (int p = 0; p < gpt.num_params(); ++p) {
          const Tensor g = gpt.gather(p, device::floats(gpt.grad(p)));
          EXPECT_LT(max_relative_error(g.values(), ref.grads.at(gpt.name(p)).values()), 1e-4)
              << where << " gradient of " << gpt.name(p);
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(Gpt, ReplicasCountEveryGlobalElementOnce) {
  const auto world = comm::Communicator::world();
  for (const auto& shape : meshes_2d(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    Gpt gpt(
        mesh,
        {.shape = {.batch = 2, .seq = 8, .hidden = 32, .heads = 8, .layers = 1, .vocab = kVocab},
         .layout = {.mesh = {shape[0], shape[1]}}});
    for (int p = 0; p < gpt.num_params(); ++p) {
      // Σ over ranks of local elements / replicas = global elements.
      double share = static_cast<double>(gpt.value(p).count()) / gpt.replicas(p);
      world.all_reduce(std::span<double>(&share, 1));
      if (gpt.name(p) == "wte") {
        // Padded rows (none for 256 on these sizes) would be counted here too.
        EXPECT_EQ(share, static_cast<double>(numel(gpt.global_shape(p))));
      } else {
        EXPECT_EQ(share, static_cast<double>(numel(gpt.global_shape(p)))) << gpt.name(p);
      }
    }
  }
}

// Activation recomputation reruns the same code on the same inputs, so selective and full
// give the SAME bits as none: loss and every local gradient compared with ==, on every mesh,
// for ATP blocks (chunks, sequence parallelism) and a 2D GeMM stack. progress_splits = 1:
// with polling, a GeMM is cut into panels only while a collective is still in flight (timing),
// which changes BLAS's summation blocking and so the last bits from run to run.
TEST(Gpt, RecomputationGivesBitIdenticalGradients) {
  const auto world = comm::Communicator::world();
  const GptConfig base{
      .shape = {.batch = 4, .seq = 8, .hidden = 32, .heads = 8, .layers = 3, .vocab = kVocab}};
  const std::vector<std::int32_t> tokens = random_ids(base.shape.tokens(), 7);
  const std::vector<std::int32_t> targets = random_ids(base.shape.tokens(), 8);
  int checked = 0;
  for (const auto& shape : meshes_2d(world.size())) {
    std::vector<layout::Plan> plans{
        {.mesh = {shape[0], shape[1]}, .chunks = 2, .progress_splits = 1},
        {.mesh = {shape[0], shape[1]},
         .strategy = layout::Strategy::kMeshSlice,
         .progress_splits = 1}};
    if (shape[1] == 1) {
      plans.push_back({.mesh = {shape[0], 1}, .sequence_parallel = true, .progress_splits = 1});
    }
    for (const layout::Plan& plan : plans) {
      GptConfig c = base;
      c.layout = plan;
      try {
        validate(c, shape);
      } catch (const Error&) {
        continue;
      }
      const mesh::DeviceMesh mesh(world, shape);
      double reference_loss = 0.0;
      std::vector<Tensor> reference_grads;
      for (const layout::Recompute rc : layout::all<layout::Recompute>()) {
        c.layout.recompute = rc;
        Gpt gpt(mesh, c);
        gpt.init(3);
        gpt.zero_grads();
        const double loss = gpt.forward(tokens, targets);
        gpt.backward();
        const std::string where = fmt::format("rank {} {} recompute {}", world.rank(),
                                              fmt::streamed(c.layout), layout::name(rc));
        if (rc == layout::Recompute::kNone) {
          reference_loss = loss;
          for (int p = 0; p < gpt.num_params(); ++p)
            reference_grads.push_back(testing::copy_of(gpt.grad(p)));
          continue;
        }
        EXPECT_EQ(loss, reference_loss) << where;
        for (int p = 0; p < gpt.num_params(); ++p) {
          const auto g = device::floats(gpt.grad(p));
          const auto r = reference_grads[static_cast<std::size_t>(p)].values();
          EXPECT_TRUE(std::equal(g.begin(), g.end(), r.begin(), r.end()))
              << where << " gradient of " << gpt.name(p);
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace meshtp::model
