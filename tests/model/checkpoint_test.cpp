// Weights are global tensors: the init does not depend on the mesh, and a stack saved on one
// mesh loads on another bit for bit (and computes the same thing).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "../parallel/mesh2d.hpp"
#include "core/error.hpp"
#include "model/stack.hpp"
#include "tensor/random.hpp"

namespace meshtp::model {
namespace {

StackConfig config() {
  return {.block = {.shape = {.batch = 2, .seq = 8, .hidden = 32, .heads = 8, .layers = 2},
                    .layout = {.chunks = 2}}};
}

// The Llama family: its QKV of 8 (or 2: copied over 4 and 8 ranks) KV heads for 16 query heads,
// SwiGLU's fc1 [gate | up] and the norms without biases move between meshes as the GPT's tensors
// do.
StackConfig llama_config(std::int64_t kv_heads = 8) {
  return {.block = {.shape = {.batch = 2,
                              .seq = 8,
                              .hidden = 64,
                              .heads = 16,
                              .layers = 2,
                              .kv_heads = kv_heads,
                              .ffn_hidden = 48,
                              .activation = layout::Activation::kSwiglu,
                              .norm = layout::Norm::kRmsNorm,
                              .position = layout::Position::kRope,
                              .tie_embeddings = false},
                    .layout = {.chunks = 2}}};
}

// One path for every rank: rank 0's pid, broadcast.
std::string shared_path(const comm::Communicator& world, const char* what) {
  int pid = static_cast<int>(getpid());
  world.broadcast(std::span<int>(&pid, 1), 0);
  return fmt::format("/tmp/meshtp_{}_{}_np{}.safetensors", what, pid, world.size());
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::equal(a.values().begin(), a.values().end(), b.values().begin());
}

TEST(Checkpoint, InitIsTheSameOnEveryMesh) {
  const auto world = comm::Communicator::world();
  const auto meshes = parallel::meshes2d(world.size());
  std::map<std::string, Tensor> first, llama;
  for (const auto& shape : meshes) {
    const mesh::DeviceMesh mesh(world, shape);
    Stack l(mesh, llama_config());
    l.init(1234);
    const auto lv = l.gather_values();
    if (llama.empty()) llama = lv;
    for (const auto& [name, t] : lv) {
      EXPECT_TRUE(bitwise_equal(t, llama.at(name))) << name << " differs on " << mesh.to_string();
    }
    Stack stack(mesh, config());
    stack.init(1234);
    const auto values = stack.gather_values();
    if (first.empty()) {
      first = values;
      continue;
    }
    for (const auto& [name, t] : values) {
      EXPECT_TRUE(bitwise_equal(t, first.at(name))) << name << " differs on " << mesh.to_string();
    }
  }
  // GPT-2 init: LayerNorm weights 1, biases 0, weights ~ N(0, 0.02²).
  EXPECT_EQ(first.at("layers.1.ln2.weight")[5], 1.0f);
  EXPECT_EQ(first.at("layers.0.mlp.fc1.bias")[7], 0.0f);
  EXPECT_NE(first.at("layers.0.attn.qkv.weight")[3], 0.0f);
  EXPECT_EQ(llama.size(), 12u);  // per layer ln1, qkv, proj, ln2, fc1, fc2 weights
  EXPECT_EQ(llama.at("layers.1.attn.qkv.weight").shape(), (Shape{64 + 2 * 8 * 4, 64}));
  EXPECT_EQ(llama.at("layers.1.mlp.fc1.weight").shape(), (Shape{96, 64}));
}

TEST(Checkpoint, SaveOnOneMeshLoadOnAnother) {
  for (const StackConfig& c : {config(), llama_config(), llama_config(2)}) {
    const auto world = comm::Communicator::world();
    const auto meshes = parallel::meshes2d(world.size());
    const mesh::DeviceMesh mesh_a(world, meshes.size() > 1 ? meshes[meshes.size() / 2] : meshes[0]);
    const mesh::DeviceMesh mesh_b(world, meshes.front());  // (N, 1)
    const std::string path = shared_path(world, "ckpt");
    const Tensor x = uniform_tensor({2, 8, c.block.shape.hidden}, 5);

    Stack a(mesh_a, c);
    a.init(99);
    // Perturb every parameter so biases and LayerNorm are not at their trivial init.
    for (int p = 0; p < a.num_params(); ++p) {
      for (auto& v : device::floats(a.value(p))) v += 0.01f;
    }
    a.save(path);
    a.set_input(x);
    a.forward();
    const Tensor ya = a.gather_output();

    Stack b(mesh_b, c);
    const SafetensorsFile file = load_safetensors(path);
    EXPECT_EQ(file.metadata.at("heads"), std::to_string(c.block.shape.heads));
    EXPECT_EQ(file.metadata.at("layers"), "2");
    b.load(file);
    const auto va = a.gather_values();
    const auto vb = b.gather_values();
    ASSERT_EQ(va.size(), vb.size());
    for (const auto& [name, t] : va) {
      EXPECT_TRUE(bitwise_equal(t, vb.at(name)))
          << name << ": " << mesh_a.to_string() << " → " << mesh_b.to_string();
    }
    b.set_input(x);
    b.forward();
    EXPECT_LE(max_relative_error(b.gather_output().values(), ya.values()), 1e-5);
    world.barrier();
    if (world.rank() == 0) std::remove(path.c_str());
  }
}

TEST(Checkpoint, ReplicasAndDecayForTheOptimizer) {
  const auto world = comm::Communicator::world();
  for (const auto& shape : parallel::meshes2d(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    for (const StackConfig& c : {config(), llama_config(), llama_config(2)}) {
      const Stack stack(mesh, c);
      for (int p = 0; p < stack.num_params(); ++p) {
        const ParamEntry& e = stack.param_table()[static_cast<std::size_t>(p)];
        // Σ over ranks of local elements = global elements × replicas; where some elements
        // are copied (KV heads below the head blocks) each counts its norm weight, 1/copies.
        if (const Tensor* w = stack.norm_weight(p)) {
          double share = 0.0;
          for (const float x : w->values()) share += x;
          world.all_reduce(std::span<double>(&share, 1));
          EXPECT_NEAR(share, static_cast<double>(numel(e.shape)), 1e-6 * numel(e.shape))
              << e.name << " on " << mesh.to_string();
          EXPECT_EQ(c.block.shape.kv_heads, 2);
          EXPECT_LT(c.block.shape.kv_heads, mesh.size());
        } else {
          std::int64_t n = stack.value(p).count();
          world.all_reduce(std::span<std::int64_t>(&n, 1));
          EXPECT_EQ(n, numel(e.shape) * stack.replicas(p)) << e.name << " on " << mesh.to_string();
        }
        EXPECT_EQ(stack.decays(p), e.name.find("weight") != std::string::npos &&
                                       e.name.find("ln") == std::string::npos)
            << e.name;
      }
    }
  }
}

TEST(Checkpoint, MissingTensorIsNamed) {
  const auto world = comm::Communicator::world();
  const mesh::DeviceMesh mesh(world, {world.size(), 1});
  Stack stack(mesh, config());
  SafetensorsFile file{"w.safetensors", stack.gather_values(), {}};
  file.tensors.erase("layers.1.mlp.fc2.bias");
  try {
    stack.load(file);
    FAIL() << "loaded a file without layers.1.mlp.fc2.bias";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor 'layers.1.mlp.fc2.bias'"),
              std::string::npos)
        << e.what();
  }
  file = SafetensorsFile{"w.safetensors", stack.gather_values(), {}};
  file.tensors["layers.0.attn.qkv.weight"] = Tensor({32, 96});
  EXPECT_THROW(stack.load(file), Error);
}

}  // namespace
}  // namespace meshtp::model
