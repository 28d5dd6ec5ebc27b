// The gemm2d linear layer: for every stationary mode, algorithm and mesh of this world size,
// forward y = x·Wᵀ and backward dx += dy·W, dW += dyᵀ·x equal the serial products
// (gemm_reference, max relative error ≤ 1e-5), with the weight and activations stored as the
// mode prescribes (transposed where the table says so) and the gradients accumulated.
#include "parallel/gemm2d/gemm2d_linear.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "core/error.hpp"
#include "mesh/dtensor.hpp"
#include "tensor/gemm.hpp"
#include "tensor/random.hpp"

namespace meshtp::parallel {
namespace {

const mesh::ShardingSpec kBlock2d{mesh::Shard{0}, mesh::Shard{1}};

Tensor transposed(const Tensor& t) {
  Tensor out({t.dim(1), t.dim(0)});
  for (std::int64_t i = 0; i < t.dim(0); ++i) {
    for (std::int64_t j = 0; j < t.dim(1); ++j) out[j * t.dim(0) + i] = t[i * t.dim(1) + j];
  }
  return out;
}

Tensor product(const Tensor& a, Trans ta, const Tensor& b, Trans tb) {
  const std::int64_t rows = ta == Trans::kNo ? a.dim(0) : a.dim(1);
  const std::int64_t cols = tb == Trans::kNo ? b.dim(1) : b.dim(0);
  Tensor c({rows, cols});
  gemm_reference(a.matrix(), ta, b.matrix(), tb, c.matrix());
  return c;
}

Tensor plus(const Tensor& a, float v) {
  Tensor out = a;
  for (auto& x : out.values()) x += v;
  return out;
}

std::vector<std::vector<int>> meshes_for(int world_size) {
  const std::vector<std::vector<int>> wanted{{1, 1}, {1, 2}, {2, 1}, {2, 2},
                                             {1, 4}, {4, 1}, {2, 4}, {4, 2}};
  std::vector<std::vector<int>> out;
  for (const auto& s : wanted) {
    if (s[0] * s[1] == world_size) out.push_back(s);
  }
  return out;
}

TEST(Gemm2dLinear, EveryModeAndAlgorithmEqualsSerial) {
  const auto world = comm::Communicator::world();
  const std::int64_t n = 16, k = 32, m = 48;
  const Tensor x = uniform_tensor({n, k}, 31);
  const Tensor w = uniform_tensor({m, k}, 32);  // [out, in]
  const Tensor dy = uniform_tensor({n, m}, 33);
  const Tensor y_ref = product(x, Trans::kNo, w, Trans::kYes);
  const Tensor dx_ref = plus(product(dy, Trans::kNo, w, Trans::kNo), 1.0f);   // dx starts at 1
  const Tensor dw_ref = plus(product(dy, Trans::kYes, x, Trans::kNo), 1.0f);  // dW starts at 1
  for (const auto& shape : meshes_for(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    Gemm2dWorkspace ws;
    // The four modes: each stationary operand, and the weight taking its input transposed.
    for (const auto& [mode, input_t] : {std::pair{Stationary::kInput, false},
                                        {Stationary::kOutput, false},
                                        {Stationary::kWeight, false},
                                        {Stationary::kWeight, true}}) {
      for (const Algorithm algo : layout::all<layout::Algorithm>()) {
        if (algo == Algorithm::kCannon && shape[0] != shape[1]) continue;
        const int slices = algo == Algorithm::kMeshSlice ? 2 : 1;
        const Gemm2dLinearPlan plan = plan_gemm2d_linear(shape[0], shape[1], n, k, m,
                                                         {.stationary = mode,
                                                          .transposed_input = input_t,
                                                          .algo = algo,
                                                          .params = {.slices = slices}});
        // Stored forms: W or Wᵀ, x or xᵀ, y / dy or their transposes.
        const bool weight_t = mode == Stationary::kOutput || input_t;
        const bool in_t = input_t;
        const bool out_t = mode == Stationary::kWeight && !input_t;
        const auto stored = [](const Tensor& t, bool tr) { return tr ? transposed(t) : t; };
        const auto dw_ = mesh::DTensor::distribute(stored(w, weight_t), mesh, kBlock2d);
        const auto dx_in = mesh::DTensor::distribute(stored(x, in_t), mesh, kBlock2d);
        const auto ddy = mesh::DTensor::distribute(stored(dy, out_t), mesh, kBlock2d);
        auto dout = mesh::DTensor::distribute(Tensor(plan.output_shape()), mesh, kBlock2d);
        auto din = mesh::DTensor::distribute(Tensor(plan.input_shape(), 1.0f), mesh, kBlock2d);
        auto dweight = mesh::DTensor::distribute(Tensor(plan.weight_shape(), 1.0f), mesh, kBlock2d);

        gemm2d_linear_forward(mesh, plan, dout.local().matrix(), dx_in.local().matrix(),
                              dw_.local().matrix(), ws);
        gemm2d_linear_backward(mesh, plan, din.local().matrix(), dweight.local().matrix(),
                               ddy.local().matrix(), dx_in.local().matrix(), dw_.local().matrix(),
                               ws);

        std::ostringstream what;
        what << "rank " << world.rank() << ", " << mesh.to_string() << ", " << plan;
        const Tensor y = stored(dout.full(), out_t);
        const Tensor dx = stored(din.full(), in_t);
        const Tensor dw = stored(dweight.full(), weight_t);
        EXPECT_LE(max_relative_error(y.values(), y_ref.values()), 1e-5) << "y: " << what.str();
        EXPECT_LE(max_relative_error(dx.values(), dx_ref.values()), 1e-5) << "dx: " << what.str();
        EXPECT_LE(max_relative_error(dw.values(), dw_ref.values()), 1e-5) << "dW: " << what.str();
      }
    }
  }
}

TEST(Gemm2dLinear, AutoKeepsTheLargestMatrixStationary) {
  // x 4096×1024 is the largest (n=4096 tokens, k=1024 in, m=256 out): input-stationary.
  EXPECT_EQ(layout::choose_stationary(4096, 1024, 256, true), Stationary::kInput);
  // y largest: output-stationary.
  EXPECT_EQ(layout::choose_stationary(4096, 256, 1024, true), Stationary::kOutput);
  // W largest (few tokens): weight-stationary, if the caller takes yᵀ.
  EXPECT_EQ(layout::choose_stationary(64, 4096, 4096, true), Stationary::kWeight);
  EXPECT_EQ(layout::choose_stationary(64, 4096, 2048, false), Stationary::kInput);
  const Gemm2dLinearPlan plan = plan_gemm2d_linear(
      2, 2, 64, 4096, 4096, {.stationary = std::nullopt, .allow_weight_stationary = true});
  EXPECT_EQ(plan.stationary, Stationary::kWeight);
  EXPECT_EQ(plan.forward.dataflow, Dataflow::kLS);
  EXPECT_EQ(plan.backward_data.dataflow, Dataflow::kRS);
  EXPECT_EQ(plan.backward_weight.dataflow, Dataflow::kOS);
  EXPECT_EQ(plan.output_shape(), (Shape{4096, 64}));
}

TEST(Gemm2dLinear, PlanErrorsNameTheProduct) {
  // Input-stationary slices m (the output features) in all three products; m = 24 on a
  // 2x4 mesh has local extents 12 and 6, which S = 4 does not divide.
  try {
    plan_gemm2d_linear(2, 4, 8, 16, 24,
                       {.stationary = Stationary::kInput, .params = {.slices = 4}});
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("gemm2d_linear forward (ls, m=8 n=24 k=16, stationary=input): MeshSlice "
                       "slices=4 does not divide"),
              std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace meshtp::parallel
