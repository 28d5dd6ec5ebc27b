// A 2-layer GPT block stack under 2D-GeMM tensor parallelism on every mesh Nr×Nc of this
// world size for which the shapes divide, every algorithm (Cannon on square meshes only),
// forward dataflows auto / os / ls and S ∈ {1, 2}: output, input gradient and every parameter
// gradient equal the serial reference stack (max relative error ≤ 1e-4).
// The full cross product runs at every world size (about a second at 8 oversubscribed ranks).
#include "model/gemm2d_stack.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "../parallel/mesh2d.hpp"
#include "core/error.hpp"
#include "model/reference.hpp"
#include "model/stack.hpp"
#include "tensor/random.hpp"
#include "test_weights.hpp"

namespace meshtp::model {
namespace {

using layout::Algorithm;
using layout::Stationary;

constexpr double kTol = 1e-4;

Gemm2dStackConfig small_config() {
  return {.block = {.batch = 8, .seq = 8, .hidden = 32, .heads = 8, .progress_chunks = 2},
          .layers = 2};
}

struct Reference {
  Tensor x, dy, y, dx;
  std::map<std::string, Tensor> weights, grads;
};

const Reference& reference() {
  static const Reference ref = [] {
    const Gemm2dStackConfig g = small_config();
    const StackConfig c{.block = {.batch = g.block.batch,
                                  .seq = g.block.seq,
                                  .hidden = g.block.hidden,
                                  .heads = g.block.heads},
                        .layers = g.layers};
    Reference r;
    const Shape shape{c.block.batch, c.block.seq, c.block.hidden};
    r.x = uniform_tensor(shape, 301);
    r.dy = uniform_tensor(shape, 302);
    r.weights = random_weights(c.layers, c.block.hidden, 400);
    ReferenceStack serial(c, r.weights);
    r.y = serial.forward(r.x);
    r.dx = serial.backward(r.dy);
    r.grads = serial.grads();
    return r;
  }();
  return ref;
}

// One algorithm for every linear, or per-linear settings (a plan may mix them).
struct Case {
  Algorithm algo;
  std::array<layout::LinearPlan, 4> linears;
  int slices() const { return linears[0].slices; }
};

std::string describe(const mesh::DeviceMesh& mesh, const Case& c) {
  std::string linears;
  for (const layout::LinearPlan& l : c.linears) {
    linears += fmt::format(" {}/{}/S{}", l.algorithm.value_or(c.algo),
                           l.stationary ? layout::name(*l.stationary) : "auto", l.slices);
  }
  return fmt::format("mesh {}{} (rank {})", mesh.to_string(), linears, mesh.rank());
}

void check_case(const mesh::DeviceMesh& mesh, const Case& k) {
  const Reference& ref = reference();
  Gemm2dStackConfig c = small_config();
  c.block.algo = k.algo;
  c.block.linears = k.linears;
  const std::string what = describe(mesh, k);
  Gemm2dStack stack(mesh, c);
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
  const auto grads = stack.gather_grads();
  EXPECT_EQ(grads.size(), ref.grads.size()) << what;
  for (const auto& [name, g] : grads) {
    const Tensor& want = ref.grads.at(name);
    EXPECT_LE(max_relative_error(g.values(), want.values()), kTol)
        << "grad of " << name << " on " << what << ": max |diff| "
        << max_abs_diff(g.values(), want.values());
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const Algorithm algo : layout::all<layout::Algorithm>()) {
    for (const int s : {1, 2}) {
      for (const auto stationary : {std::optional<Stationary>{}, std::optional{Stationary::kOutput},
                                    std::optional{Stationary::kInput}}) {
        Case c{.algo = algo, .linears = {}};
        c.linears.fill({.stationary = stationary, .slices = s});
        out.push_back(c);
      }
    }
  }
  // Each linear its own algorithm, stationary operand and slices.
  out.push_back(
      {.algo = Algorithm::kCannon,
       .linears = {
           {{.algorithm = Algorithm::kMeshSlice, .stationary = Stationary::kOutput, .slices = 2},
            {.algorithm = Algorithm::kSumma, .stationary = Stationary::kInput},
            {.algorithm = Algorithm::kCollective},
            {.algorithm = Algorithm::kWang, .stationary = Stationary::kInput}}}});
  return out;
}

TEST(Gemm2dStack, EqualsSerialReferenceOnEveryMesh) {
  const auto world = comm::Communicator::world();
  int ran = 0;
  for (const auto& shape : parallel::meshes2d(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    for (const Case& k : cases()) {
      if (k.algo == Algorithm::kCannon && !k.linears[0].algorithm && shape[0] != shape[1]) {
        continue;
      }
      Gemm2dBlockConfig b = small_config().block;
      b.algo = k.algo;
      b.linears = k.linears;
      try {
        plan_gemm2d_block(b, shape);
      } catch (const Error& e) {
        // Only the slice count may not divide a small mesh's local extents.
        EXPECT_GT(k.slices(), 1) << describe(mesh, k) << " rejected: " << e.what();
        continue;
      }
      check_case(mesh, k);
      ++ran;
    }
  }
  EXPECT_GT(ran, 0);
  if (world.rank() == 0) RecordProperty("cases", ran);
}

// init() draws the same global weights as the ATP stack's (one table, one init rule), and
// replicas() counts the mesh rows holding each bias / LayerNorm copy.
TEST(Gemm2dStack, InitMatchesTheAtpStackAndReplicas) {
  const auto world = comm::Communicator::world();
  for (const auto& shape : parallel::meshes2d(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    const Gemm2dStackConfig g = small_config();
    Gemm2dStack stack(mesh, g);
    Stack atp(mesh, {.block = {.batch = g.block.batch,
                               .seq = g.block.seq,
                               .hidden = g.block.hidden,
                               .heads = g.block.heads},
                     .layers = g.layers});
    stack.init(7);
    atp.init(7);
    const auto got = stack.gather_values();
    for (const auto& [name, want] : atp.gather_values()) {
      EXPECT_EQ(max_abs_diff(got.at(name).values(), want.values()), 0.0)
          << name << " on " << mesh.to_string();
    }
    for (int p = 0; p < stack.num_params(); ++p) {
      const bool matrix = stack.param_table()[static_cast<std::size_t>(p)].shape.size() == 2;
      EXPECT_EQ(stack.replicas(p), matrix ? 1 : shape[0])
          << stack.param_table()[static_cast<std::size_t>(p)].name << " on " << mesh.to_string();
      EXPECT_EQ(stack.decays(p), matrix);
    }
  }
}

TEST(Gemm2dStack, ValidationNamesTheValues) {
  auto expect_error = [](Gemm2dBlockConfig c, std::vector<int> mesh, const std::string& text) {
    try {
      plan_gemm2d_block(c, mesh);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  Gemm2dBlockConfig c = small_config().block;
  c.heads = 4;
  expect_error(c, {1, 8}, "heads=4 is not divisible by Nc=8 (mesh 1x8)");
  c = small_config().block;
  c.batch = 6;
  expect_error(c, {4, 1}, "batch=6 is not divisible by Nr=4 (mesh 4x1)");
  c = small_config().block;
  c.algo = Algorithm::kCannon;
  expect_error(c, {2, 4}, "qkv linear (mesh 2x4)");
  c = small_config().block;
  c.linears[0].slices = 3;
  expect_error(c, {2, 2}, "qkv linear (mesh 2x2)");
  c = small_config().block;
  c.linears[3].stationary = Stationary::kWeight;
  expect_error(c, {2, 2}, "mlp2 linear (mesh 2x2): stationary weight is not supported");
}

}  // namespace
}  // namespace meshtp::model
