// The parameter sharding table: scatter then gather gives back the global tensor exactly on
// every mesh, and the QKV rows follow the worked example of param_shard.hpp.
#include <gtest/gtest.h>

#include <tuple>

#include "core/error.hpp"
#include "mesh2d.hpp"
#include "parallel/param_shard.hpp"

namespace meshtp::parallel {
namespace {

Tensor iota(Shape shape) {
  Tensor t(std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(i);
  return t;
}

TEST(ParamShard, ScatterGatherRoundTripOnEveryMesh) {
  const auto world = comm::Communicator::world();
  const std::int64_t h = 32;
  const std::vector<std::pair<ParamShard, Shape>> cases{
      {ParamShard::kHidden, {h}},
      {ParamShard::kColumnFirstWeight, {4 * h, h}},
      {ParamShard::kColumnFirstBias, {4 * h}},
      {ParamShard::kRowFirstWeight, {h, 4 * h}},
      {ParamShard::kRowFirstBias, {h}},
      {ParamShard::kQkvWeight, {3 * h, h}},
      {ParamShard::kQkvBias, {3 * h}},
      {ParamShard::kGemm2dWeightT, {4 * h, h}},
      {ParamShard::kGemm2dQkvWeight, {3 * h, h}},
      {ParamShard::kGemm2dQkvWeightT, {3 * h, h}},
      {ParamShard::kGemm2dBias, {4 * h}},
      {ParamShard::kGemm2dQkvBias, {3 * h}}};
  for (const auto& shape : meshes2d(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    for (const auto& [kind, global_shape] : cases) {
      const Tensor global = iota(global_shape);
      std::vector<float> local(static_cast<std::size_t>(
          numel(local_shape(kind, global_shape, mesh.shape()))));
      scatter_param(kind, global, mesh, local);
      const Tensor back = gather_param(kind, local, global_shape, mesh);
      EXPECT_TRUE(std::equal(back.values().begin(), back.values().end(),
                             global.values().begin()))
          << name(kind) << " on " << mesh.to_string();
    }
  }
}

// The experts' weights on the experts' mesh (ep, etp): rank (e, t) holds, for each of its
// El = E/ep experts l, the rows (fc1 [E, F, h]) or columns (fc2 [E, h, F]) [t·Fl, (t+1)·Fl)
// of expert e·El + l — parallel/moe.hpp's w1 [El·Fl, h] and w2 [El·h, Fl] — on every (ep, etp)
// tiling of the world, and scatter then gather gives back the global tensor.
TEST(ParamShard, ExpertWeightsFollowTheLayersShards) {
  const auto world = comm::Communicator::world();
  const std::int64_t E = 8, F = 8, h = 3;
  for (const auto& shape : meshes2d(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    const int ep = shape[0], etp = shape[1], e = mesh.coord(0), t = mesh.coord(1);
    const std::int64_t El = E / ep, Fl = F / etp;
    const Tensor w1 = iota({E, F, h}), w2 = iota({E, h, F});
    ASSERT_EQ(local_shape(ParamShard::kExpertFc1, w1.shape(), mesh.shape()), (Shape{El, Fl, h}));
    ASSERT_EQ(local_shape(ParamShard::kExpertFc2, w2.shape(), mesh.shape()), (Shape{El, h, Fl}));
    std::vector<float> l1(static_cast<std::size_t>(El * Fl * h)), l2(l1.size());
    scatter_param(ParamShard::kExpertFc1, w1, mesh, l1);
    scatter_param(ParamShard::kExpertFc2, w2, mesh, l2);
    for (std::int64_t l = 0; l < El; ++l) {
      const std::int64_t expert = e * El + l;
      for (std::int64_t f = 0; f < Fl; ++f) {
        for (std::int64_t k = 0; k < h; ++k) {
          // w1 local row l·Fl + f = W1_expert row t·Fl + f;  w2 local row l·h + k, column f.
          EXPECT_EQ(l1[static_cast<std::size_t>((l * Fl + f) * h + k)],
                    w1[(expert * F + t * Fl + f) * h + k]) << mesh.to_string();
          EXPECT_EQ(l2[static_cast<std::size_t>((l * h + k) * Fl + f)],
                    w2[(expert * h + k) * F + t * Fl + f]) << mesh.to_string();
        }
      }
    }
    for (const auto& [kind, local, global] :
         {std::tuple{ParamShard::kExpertFc1, &l1, &w1}, std::tuple{ParamShard::kExpertFc2, &l2, &w2}}) {
      const Tensor back = gather_param(kind, *local, global->shape(), mesh);
      EXPECT_TRUE(std::equal(back.values().begin(), back.values().end(),
                             global->values().begin()))
          << name(kind) << " on " << mesh.to_string();
    }
  }
  // A 2-D tensor is not an expert weight: refused naming the kind.
  const mesh::DeviceMesh mesh(world, {world.size(), 1});
  EXPECT_THROW(
      {
        try {
          (void)local_shape(ParamShard::kExpertFc1, {E * F, h}, mesh.shape());
        } catch (const Error& err) {
          EXPECT_NE(std::string(err.what()).find("experts' fc1 parameter must be 3-D"),
                    std::string::npos) << err.what();
          throw;
        }
      },
      Error);
}

// 2D GeMM: the transposed weight's local (i, j) is W[c1·M/Nc + j, c0·K/Nr + i], and the QKV
// out index follows π (param_shard.hpp): h = 4, Nc = 2 gives 0 1 4 5 8 9 | 2 3 6 7 10 11.
TEST(ParamShard, Gemm2dTransposedAndQkvColumns) {
  const auto world = comm::Communicator::world();
  for (const auto& shape : meshes2d(world.size())) {
    const mesh::DeviceMesh mesh(world, shape);
    const int nr = shape[0], nc = shape[1], c0 = mesh.coord(0), c1 = mesh.coord(1);
    const std::int64_t m = 16, k = 8;
    const Tensor w = iota({m, k});
    const Shape ls = local_shape(ParamShard::kGemm2dWeightT, w.shape(), mesh.shape());
    ASSERT_EQ(ls, (Shape{k / nr, m / nc})) << mesh.to_string();
    std::vector<float> local(static_cast<std::size_t>(numel(ls)));
    scatter_param(ParamShard::kGemm2dWeightT, w, mesh, local);
    for (std::int64_t i = 0; i < ls[0]; ++i) {
      for (std::int64_t j = 0; j < ls[1]; ++j) {
        EXPECT_EQ(local[static_cast<std::size_t>(i * ls[1] + j)],
                  w[(c1 * ls[1] + j) * k + c0 * ls[0] + i])
            << mesh.to_string() << " rank " << mesh.rank();
      }
    }
    if (nc != 2) continue;
    const std::int64_t h = 4;
    const Tensor b = iota({3 * h});
    std::vector<float> lb(6);
    scatter_param(ParamShard::kGemm2dQkvBias, b, mesh, lb);
    const std::vector<float> want = c1 == 0 ? std::vector<float>{0, 1, 4, 5, 8, 9}
                                            : std::vector<float>{2, 3, 6, 7, 10, 11};
    EXPECT_EQ(lb, want) << mesh.to_string() << " rank " << mesh.rank();
  }
}

TEST(ParamShard, QkvRowsAreWholeHeadsOfQKV) {
  const auto world = comm::Communicator::world();
  if (world.size() != 4) GTEST_SKIP() << "the (2,2) worked example needs 4 ranks";
  const mesh::DeviceMesh mesh(world, {2, 2});
  const std::int64_t h = 4;  // a = 4 heads of width 1: w = h/(d1·d2) = 1
  const Tensor global = iota({3 * h, h});
  std::vector<float> local(6 * 2);  // [3h/d1, h/d2]
  scatter_param(ParamShard::kQkvWeight, global, mesh, local);
  const std::vector<int> rows = mesh.coord(0) == 0 ? std::vector<int>{0, 4, 8, 1, 5, 9}
                                                   : std::vector<int>{2, 6, 10, 3, 7, 11};
  for (int r = 0; r < 6; ++r) {
    for (int c = 0; c < 2; ++c) {
      EXPECT_EQ(local[static_cast<std::size_t>(r * 2 + c)],
                global[rows[static_cast<std::size_t>(r)] * h + mesh.coord(1) * 2 + c])
          << "rank " << mesh.rank() << " local (" << r << ", " << c << ")";
    }
  }
  EXPECT_EQ(replicated_dims(ParamShard::kQkvBias), std::vector<int>{1});
  EXPECT_EQ(replicated_dims(ParamShard::kHidden), std::vector<int>{0});
  EXPECT_TRUE(replicated_dims(ParamShard::kQkvWeight).empty());
}

TEST(ParamShard, IndivisibleShapesAreNamed) {
  try {
    local_shape(ParamShard::kColumnFirstWeight, {8, 10}, {2, 4});
    FAIL() << "10 columns split 4 ways accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor dim 1 of size 10 (shape [8, 10]) is not divisible by the 4 shards"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(local_shape(ParamShard::kQkvWeight, {3 * 6, 6}, {2, 2}), Error);
}

}  // namespace
}  // namespace meshtp::parallel
