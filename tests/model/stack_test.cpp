// A 2-layer GPT block stack on every mesh (d1, d2) of this world size, chunks 1/2/4, and
// sequence parallelism on (N, 1): output, input gradient and every parameter gradient equal
// the serial reference stack built from src/ops (max relative error ≤ 1e-4).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "../parallel/mesh2d.hpp"
#include "core/error.hpp"
#include "model/reference.hpp"
#include "model/stack.hpp"
#include "test_weights.hpp"
#include "tensor/random.hpp"

namespace meshtp::model {
namespace {

constexpr double kTol = 1e-4;

StackConfig small_config() {
  return {.block = {.batch = 4, .seq = 8, .hidden = 32, .heads = 8}, .layers = 2};
}

struct Reference {
  Tensor x, dy, y, dx;
  std::map<std::string, Tensor> weights, grads;
};

const Reference& reference() {
  static const Reference ref = [] {
    const StackConfig c = small_config();
    Reference r;
    const Shape shape{c.block.batch, c.block.seq, c.block.hidden};
    r.x = uniform_tensor(shape, 101);
    r.dy = uniform_tensor(shape, 102);
    r.weights = random_weights(c.layers, c.block.hidden, 200);
    ReferenceStack serial(c, r.weights);
    r.y = serial.forward(r.x);
    r.dx = serial.backward(r.dy);
    r.grads = serial.grads();
    return r;
  }();
  return ref;
}

void check_layout(const mesh::DeviceMesh& mesh, int chunks, bool sp) {
  const Reference& ref = reference();
  StackConfig c = small_config();
  c.block.chunks = chunks;
  c.block.sequence_parallel = sp;
  c.block.progress_splits = 2;
  const std::string what = fmt::format("{} chunks={}{} (rank {})", mesh.to_string(), chunks,
                                       sp ? " sequence-parallel" : "", mesh.rank());
  Stack stack(mesh, c);
  stack.load(SafetensorsFile{"random weights", ref.weights, {}});
  stack.set_input(ref.x);
  stack.forward();
  stack.set_grad_output(ref.dy);
  stack.zero_grads();
  stack.backward();
  const Tensor y = stack.gather_output();
  const Tensor dx = stack.gather_grad_input();
  EXPECT_EQ(y.shape(), ref.y.shape()) << what;
  EXPECT_LE(max_relative_error(y.values(), ref.y.values()), kTol) << "y on " << what;
  EXPECT_LE(max_relative_error(dx.values(), ref.dx.values()), kTol) << "dx on " << what;
  for (const auto& [name, g] : stack.gather_grads()) {
    const Tensor& want = ref.grads.at(name);
    EXPECT_LE(max_relative_error(g.values(), want.values()), kTol)
        << "grad of " << name << " on " << what << ": max |diff| "
        << max_abs_diff(g.values(), want.values());
  }
  // A second step accumulates: gradients double.
  stack.set_grad_output(ref.dy);
  stack.forward();
  stack.backward();
  const auto twice = stack.gather_grads();
  const Tensor& w = ref.grads.at("layers.0.ln1.weight");
  std::vector<float> doubled(w.values().begin(), w.values().end());
  for (auto& v : doubled) v *= 2.0f;
  EXPECT_LE(max_relative_error(twice.at("layers.0.ln1.weight").values(), doubled), kTol)
      << "accumulated ln1 gradient on " << what;
}

TEST(Stack, EqualsSerialReferenceOnEveryMesh) {
  const auto world = comm::Communicator::world();
  for (const auto& shape : parallel::meshes2d(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    for (const int chunks : {1, 2, 4}) check_layout(mesh, chunks, false);
  }
}

TEST(Stack, SequenceParallelEqualsSerialReference) {
  const auto world = comm::Communicator::world();
  const mesh::DeviceMesh mesh(world, {world.size(), 1});
  // b·s/c tokens per chunk must split over N: 32/c over N ≤ 8 holds for c ∈ {1, 2, 4}.
  for (const int chunks : {1, 2, 4}) check_layout(mesh, chunks, true);
}

TEST(Stack, ValidationNamesTheValues) {
  auto expect_error = [](StackConfig c, std::vector<int> mesh, const std::string& text) {
    try {
      validate(c, mesh);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  StackConfig c = small_config();
  c.block.heads = 12;
  c.block.hidden = 48;
  expect_error(c, {4, 2}, "heads=12 is not divisible by d1·d2=8 (mesh 4x2)");
  c = small_config();
  c.block.chunks = 3;
  expect_error(c, {1, 1}, "batch=4 is not divisible by chunks=3");
  c = small_config();
  c.block.hidden = 34;
  c.block.heads = 2;
  expect_error(c, {4, 1}, "hidden=34 is not divisible by d1=4 (mesh 4x1)");
  c = small_config();
  c.block.sequence_parallel = true;
  expect_error(c, {2, 2}, "sequence parallelism runs on a mesh (N, 1), got mesh 2x2");
  c = small_config();
  c.block.hidden = 30;
  expect_error(c, {1, 1}, "hidden=30 is not divisible by heads=8");
}

}  // namespace
}  // namespace meshtp::model
