// 2D GeMM: every algorithm × dataflow on every mesh of this world size equals the serial
// product (max relative error ≤ 1e-5), for rectangular shapes and S ∈ {1, 2, 4}; plus the
// validation messages and the cost table.
//
// The global A and B are the same on every rank (counter-based RNG), distributed
// [Shard(0), Shard(1)]; the distributed C is gathered back and compared with
// gemm_reference (naive, double accumulation) of the global operands.
#include "parallel/gemm2d/gemm2d.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "core/error.hpp"
#include "mesh/dtensor.hpp"
#include "gemm2d_cases.hpp"
#include "tensor/gemm.hpp"
#include "tensor/random.hpp"

namespace meshtp::parallel {
namespace {

const mesh::ShardingSpec kBlock2d{mesh::Shard{0}, mesh::Shard{1}};

// The meshes, filtered to this world size.
std::vector<std::vector<int>> meshes_for(int world_size) {
  const std::vector<std::vector<int>> wanted{{1, 1}, {1, 2}, {2, 1}, {2, 2},
                                             {1, 4}, {4, 1}, {2, 4}, {4, 2}};
  std::vector<std::vector<int>> out;
  for (const auto& s : wanted) {
    if (s[0] * s[1] == world_size) out.push_back(s);
  }
  return out;
}

// Runs one case and returns the max relative error of the gathered C (same on every rank).
double run_case(const mesh::DeviceMesh& mesh, const Gemm2dShape& shape,
                const Gemm2dOptions& options, Gemm2dWorkspace& ws) {
  const Tensor a = uniform_tensor(global_a_shape(options.dataflow, shape), 11);
  const Tensor b = uniform_tensor(global_b_shape(options.dataflow, shape), 12);
  const auto da = mesh::DTensor::distribute(a, mesh, kBlock2d);
  const auto db = mesh::DTensor::distribute(b, mesh, kBlock2d);
  Tensor c_local({shape.m / mesh.size(0), shape.n / mesh.size(1)}, std::nanf(""));
  gemm2d(mesh, da.local().matrix(), db.local().matrix(), c_local.matrix(), options, ws);
  const Tensor c = mesh::DTensor(mesh, kBlock2d, {shape.m, shape.n}, c_local).full();
  const Tensor want = serial_product(options.dataflow, a, b, shape);
  return max_relative_error(c.values(), want.values());
}

// Rectangular shapes that divide by every mesh dim up to 4 and by S·blk for S ≤ 4 (the
// 2x4 / 4x2 meshes then slice with several runs per slice: blocked, not contiguous).
const Gemm2dShape kShapes[] = {{.m = 32, .n = 48, .k = 16}, {.m = 16, .n = 32, .k = 64}};

TEST(Gemm2d, EveryAlgorithmDataflowMeshAndSliceCountEqualsSerial) {
  const auto world = comm::Communicator::world();
  int cases = 0;
  for (const auto& shape : meshes_for(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    Gemm2dWorkspace ws;  // shared across cases: reuse must not leak stale data
    for (const Gemm2dShape& s : kShapes) {
      for (const Algorithm algo : layout::all<layout::Algorithm>()) {
        if (algo == Algorithm::kCannon && shape[0] != shape[1]) continue;
        std::vector<int> slice_counts{1};
        if (algo == Algorithm::kMeshSlice) slice_counts = {1, 2, 4};
        if (algo == Algorithm::kSumma) slice_counts = {1, 2};
        for (const Dataflow dataflow : layout::all<layout::Dataflow>()) {
          for (const int slices : slice_counts) {
            const Gemm2dOptions o{.algo = algo, .dataflow = dataflow, .params = {.slices = slices}};
            const double err = run_case(mesh, s, o, ws);
            EXPECT_LE(err, 1e-5) << describe(mesh, s, o);
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 0);
}

TEST(Gemm2d, MeshSliceExplicitBlockAndProgressChunks) {
  const auto world = comm::Communicator::world();
  for (const auto& shape : meshes_for(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    Gemm2dWorkspace ws;
    const Gemm2dShape s{.m = 32, .n = 32, .k = 32};
    for (const Dataflow dataflow : layout::all<layout::Dataflow>()) {
      // block = 1: every slice is scattered single rows / columns (the paper's Alg. 1).
      for (const std::int64_t block : {1, 2}) {
        for (const int chunks : {1, 3}) {
          const Gemm2dOptions o{.algo = Algorithm::kMeshSlice,
                                .dataflow = dataflow,
                                .params = {.slices = 2},
                                .block = block,
                                .progress_splits = chunks};
          EXPECT_LE(run_case(mesh, s, o, ws), 1e-5) << describe(mesh, s, o);
        }
      }
    }
  }
}

TEST(Gemm2d, RejectsLocalBlocksThatDoNotChain) {
  const auto world = comm::Communicator::world();
  const mesh::DeviceMesh mesh(world, {1, world.size()});
  Gemm2dWorkspace ws;
  Tensor a({4, 3}), b({5, 4}), c({4, 4});
  try {
    gemm2d(mesh, a.matrix(), b.matrix(), c.matrix(), {.dataflow = Dataflow::kOS}, ws);
    ADD_FAILURE() << "mismatched blocks were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("do not form"), std::string::npos) << e.what();
  }
  const mesh::DeviceMesh line(world, {world.size()});
  EXPECT_THROW(gemm2d(line, a.matrix(), b.matrix(), c.matrix(), {}, ws), Error);
}

// ---- validation (pure: no communication) -------------------------------------------------

std::string validation_error(int nr, int nc, Gemm2dShape s, Gemm2dOptions o) {
  try {
    validate(nr, nc, s, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gemm2dValidate, NamesTheDimAndTheMeshDim) {
  EXPECT_EQ(validation_error(2, 3, {.m = 8, .n = 9, .k = 100}, {.algo = Algorithm::kCollective}),
            "k=100 is not divisible by mesh dim 1 (size 3)");
  EXPECT_EQ(validation_error(4, 1, {.m = 6, .n = 4, .k = 8}, {.algo = Algorithm::kWang}),
            "m=6 is not divisible by mesh dim 0 (size 4)");
  EXPECT_EQ(
      validation_error(2, 2, {.m = 8, .n = 8, .k = 8}, {.algo = Algorithm::kSumma, .dataflow = Dataflow::kLS}),
      "");
  // LS: B is n × k, so n is also split by mesh dim 0.
  EXPECT_EQ(validation_error(4, 2, {.m = 8, .n = 6, .k = 8}, {.dataflow = Dataflow::kLS}),
            "n=6 is not divisible by mesh dim 0 (size 4)");
  // RS: A is k × m, so m is also split by mesh dim 1.
  EXPECT_EQ(validation_error(2, 4, {.m = 6, .n = 8, .k = 8}, {.dataflow = Dataflow::kRS}),
            "m=6 is not divisible by mesh dim 1 (size 4)");
}

TEST(Gemm2dValidate, CannonNeedsASquareMesh) {
  const std::string e = validation_error(2, 4, {.m = 8, .n = 8, .k = 8}, {.algo = Algorithm::kCannon});
  EXPECT_NE(e.find("square mesh, got 2x4"), std::string::npos) << e;
  EXPECT_EQ(validation_error(2, 2, {.m = 8, .n = 8, .k = 8}, {.algo = Algorithm::kCannon}), "");
}

TEST(Gemm2dValidate, SliceCountMustDivideBothLocalExtents) {
  // k = 24 on 2x4: k/Nr = 12, k/Nc = 6; S = 4 divides 12 but not 6.
  const std::string e =
      validation_error(2, 4, {.m = 8, .n = 8, .k = 24}, {.params = {.slices = 4}});
  EXPECT_NE(e.find("slices=4 does not divide the local k extents k/Nr=12 and k/Nc=6"),
            std::string::npos)
      << e;
  EXPECT_EQ(validation_error(2, 4, {.m = 8, .n = 8, .k = 24}, {.params = {.slices = 3}}), "");
  const std::string b =
      validation_error(2, 4, {.m = 8, .n = 8, .k = 24}, {.params = {.slices = 3}, .block = 4});
  EXPECT_NE(b.find("slices·block = 3·4 = 12"), std::string::npos) << b;
  const std::string p = validation_error(2, 4, {.m = 8, .n = 8, .k = 24},
                                         {.algo = Algorithm::kSumma, .params = {.slices = 4}});
  EXPECT_NE(p.find("SUMMA slices=4 cuts k=24 into Kp = lcm(Nr, Nc)·S = 4·4 = 16 panels"),
            std::string::npos)
      << p;
  EXPECT_NE(
      validation_error(1, 1, {.m = 8, .n = 8, .k = 8}, {.params = {.slices = 0}}).find("slices=0"),
      std::string::npos);
  // The runtime's Wang decomposes the row (horizontal) direction only.
  EXPECT_EQ(validation_error(2, 2, {.m = 8, .n = 8, .k = 8},
                             {.algo = Algorithm::kWang,
                              .params = {.wang_decomposed = layout::Direction::kVertical}}),
            "the runtime's Wang decomposes the horizontal direction, not vertical");
}

}  // namespace
}  // namespace meshtp::parallel
