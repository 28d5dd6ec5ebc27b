// A 2-layer GPT block stack (one model::Stack for every strategy) equals the serial reference
// stack built from src/ops — output, input gradient and every parameter gradient, max relative
// error ≤ 1e-4 — on every mesh (d1, d2) of this world size:
//   ATP blocks: chunks 1/2/4, and sequence parallelism on (N, 1);
//   2D-GeMM blocks: every algorithm (Cannon on square meshes only), forward dataflows
//   auto / os / ls, S ∈ {1, 2}, and a plan mixing them per linear.
// The full cross product runs at every world size (about a second at 8 oversubscribed ranks).
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

using layout::Algorithm;
using layout::Stationary;

constexpr double kTol = 1e-4;

// batch 8: whole sequences on up to 8 mesh rows, and 4 chunks of 2.
StackConfig small_config() {
  return {.block = {.shape = {.batch = 8, .seq = 8, .hidden = 32, .heads = 8, .layers = 2}}};
}
StackConfig small_gemm2d_config() {
  return {.block = {.shape = small_config().block.shape,
                    .layout = {.strategy = layout::Strategy::kMeshSlice, .progress_splits = 2}}};
}

struct Reference {
  Tensor x, dy, y, dx;
  std::map<std::string, Tensor> weights, grads;
};

const Reference& reference() {
  static const Reference ref = [] {
    const StackConfig c = small_config();
    Reference r;
    const Shape shape{c.block.shape.batch, c.block.shape.seq, c.block.shape.hidden};
    r.x = uniform_tensor(shape, 101);
    r.dy = uniform_tensor(shape, 102);
    r.weights = random_weights(c.block.shape.layers, c.block.shape.hidden, 200);
    ReferenceStack serial(c, r.weights);
    r.y = serial.forward(r.x);
    r.dx = serial.backward(r.dy);
    r.grads = serial.grads();
    return r;
  }();
  return ref;
}

// One forward + backward of `stack` against the reference, then a second step: gradients
// accumulate (double).
void check_stack(Stack& stack, const std::string& what) {
  const Reference& ref = reference();
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

void check_layout(const mesh::DeviceMesh& mesh, int chunks, bool sp) {
  StackConfig c = small_config();
  c.block.layout.chunks = chunks;
  c.block.layout.sequence_parallel = sp;
  c.block.layout.progress_splits = 2;
  Stack stack(mesh, c);
  check_stack(stack, fmt::format("{} chunks={}{} (rank {})", mesh.to_string(), chunks,
                                 sp ? " sequence-parallel" : "", mesh.rank()));
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

// A block's parameters are final after its backward, except the LayerNorm partials that
// sequence parallelism all-reduces once at the end.
TEST(Stack, GradLayerSaysWhenAGradientIsFinal) {
  const auto world = comm::Communicator::world();
  const mesh::DeviceMesh mesh(world, {world.size(), 1});
  for (const bool sp : {false, true}) {
    StackConfig c = small_config();
    c.block.layout.sequence_parallel = sp;
    const Stack stack(mesh, c);
    for (int p = 0; p < stack.num_params(); ++p) {
      const std::string& name = stack.param_table()[static_cast<std::size_t>(p)].name;
      const bool ln = name.find(".ln") != std::string::npos;
      const int layer = std::stoi(name.substr(name.find('.') + 1));  // layers.{i}.…
      EXPECT_EQ(stack.grad_layer(p), sp && ln ? -1 : layer) << name << " sp " << sp;
    }
  }
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
  c.block.shape.heads = 12;
  c.block.shape.hidden = 48;
  expect_error(c, {4, 2}, "heads=12 is not divisible by d1·d2=8 (mesh 4x2)");
  c = small_config();
  c.block.layout.chunks = 3;
  expect_error(c, {1, 1}, "batch=8 is not divisible by chunks=3");
  c = small_config();
  c.block.shape.hidden = 34;
  c.block.shape.heads = 2;
  expect_error(c, {4, 1}, "hidden=34 is not divisible by d1=4 (mesh 4x1)");
  c = small_config();
  c.block.layout.sequence_parallel = true;
  expect_error(c, {2, 2}, "sequence parallelism runs on a mesh (N, 1), got mesh 2x2");
  c = small_config();
  c.block.shape.hidden = 30;
  expect_error(c, {1, 1}, "hidden=30 is not divisible by heads=8");
}

// One algorithm for every linear, or per-linear settings (a plan may mix them).
struct Case {
  Algorithm algo;
  std::array<layout::LinearPlan, 4> linears;
  int slices() const { return linears[0].gemm2d.slices; }
};

std::string describe(const mesh::DeviceMesh& mesh, const Case& c) {
  std::string linears;
  for (const layout::LinearPlan& l : c.linears) {
    linears += fmt::format(" {}/{}/S{}", l.algorithm.value_or(c.algo),
                           l.stationary ? layout::name(*l.stationary) : "auto", l.gemm2d.slices);
  }
  return fmt::format("mesh {}{} (rank {})", mesh.to_string(), linears, mesh.rank());
}

void check_case(const mesh::DeviceMesh& mesh, const Case& k) {
  StackConfig c = small_gemm2d_config();
  c.block.layout.strategy = layout::strategy_of(k.algo);
  c.block.layout.linears = k.linears;
  Stack stack(mesh, c);
  check_stack(stack, describe(mesh, k));
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const Algorithm algo : layout::all<layout::Algorithm>()) {
    for (const int s : {1, 2}) {
      for (const auto stationary : {std::optional<Stationary>{}, std::optional{Stationary::kOutput},
                                    std::optional{Stationary::kInput}}) {
        Case c{.algo = algo, .linears = {}};
        c.linears.fill({.stationary = stationary, .gemm2d = {.slices = s}});
        out.push_back(c);
      }
    }
  }
  // Each linear its own algorithm, stationary operand and slices.
  out.push_back({.algo = Algorithm::kCannon,
                 .linears = {{{.algorithm = Algorithm::kMeshSlice,
                               .stationary = Stationary::kOutput,
                               .gemm2d = {.slices = 2}},
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
      BlockConfig b = small_gemm2d_config().block;
      b.layout.strategy = layout::strategy_of(k.algo);
      b.layout.linears = k.linears;
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
    const StackConfig g = small_gemm2d_config();
    Stack stack(mesh, g);
    Stack atp(mesh, StackConfig{.block = {.shape = g.block.shape}});
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
  auto expect_error = [](BlockConfig c, std::vector<int> mesh, const std::string& text) {
    try {
      plan_gemm2d_block(c, mesh);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  BlockConfig c = small_gemm2d_config().block;
  c.shape.heads = 4;
  expect_error(c, {1, 8}, "heads=4 is not divisible by Nc=8 (mesh 1x8)");
  c = small_gemm2d_config().block;
  c.shape.batch = 6;
  expect_error(c, {4, 1}, "batch=6 is not divisible by Nr=4 (mesh 4x1)");
  c = small_gemm2d_config().block;
  c.layout.strategy = layout::Strategy::kCannon;
  expect_error(c, {2, 4}, "qkv linear (mesh 2x4)");
  c = small_gemm2d_config().block;
  c.layout.strategy = layout::Strategy::kAtp;
  expect_error(c, {2, 2}, "the 2D-GeMM block runs the 2D GeMM strategies, not atp");
  c = small_gemm2d_config().block;
  c.layout.linears[0].gemm2d.slices = 3;
  expect_error(c, {2, 2}, "qkv linear (mesh 2x2)");
  c = small_gemm2d_config().block;
  c.layout.linears[3].stationary = Stationary::kWeight;
  expect_error(c, {2, 2}, "mlp2 linear (mesh 2x2): stationary weight is not supported");
}

}  // namespace
}  // namespace meshtp::model
