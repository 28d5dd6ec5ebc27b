// Every redistribute transition on every mesh of this world size: distribute a global tensor
// with spec A, redistribute to B, and check (1) the local block equals distribute(global, B)
// exactly when B has no partials, and (2) full() gives back the global tensor exactly.
// Values are small integers (element index), so sums of partials are exact in fp32.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "mesh/dtensor.hpp"
#include "mesh_shapes.hpp"

namespace meshtp::mesh {
namespace {

using comm::ReduceOp;

Tensor iota(Shape shape) {
  Tensor t(std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(i);
  return t;
}

// All specs over `ndim` mesh dims built from the given placement alphabet.
std::vector<ShardingSpec> all_specs(int ndim, const std::vector<Placement>& alphabet) {
  std::vector<ShardingSpec> specs{{}};
  for (int i = 0; i < ndim; ++i) {
    std::vector<ShardingSpec> next;
    for (const auto& s : specs) {
      for (const auto& p : alphabet) {
        auto t = s;
        t.push_back(p);
        next.push_back(t);
      }
    }
    specs = std::move(next);
  }
  return specs;
}

bool has_partial(const ShardingSpec& spec) {
  return std::any_of(spec.begin(), spec.end(), [](const Placement& p) { return is_partial(p); });
}

TEST(Redistribute, FigureFourWorkedExample) {
  const auto world = comm::Communicator::world();
  if (world.size() != 4) GTEST_SKIP() << "the (2,2) example needs 4 ranks";
  const DeviceMesh mesh(world, {2, 2});
  const Tensor x({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  const DTensor d = DTensor::distribute(x, mesh, {Replicate{}, Shard{0}});
  const std::vector<float> row0{1, 2, 3, 4};
  const std::vector<float> row1{5, 6, 7, 8};
  const auto& expect = world.rank() % 2 == 0 ? row0 : row1;  // ranks 0, 2 vs 1, 3
  EXPECT_EQ(std::vector<float>(d.local().values().begin(), d.local().values().end()), expect);
}

TEST(Redistribute, EveryTransitionOnEveryMesh) {
  const auto world = comm::Communicator::world();
  const Shape global_shape{8, 8, 4};
  const Tensor global = iota(global_shape);
  for (const auto& shape : meshes_for(world.size())) {
    const DeviceMesh mesh(world, shape);
    // 3-D meshes: all pairs over a smaller alphabet keep the run short; 1-D and 2-D: all six.
    std::vector<Placement> alphabet{Replicate{}, Shard{0}, Shard{1}, Partial{ReduceOp::kSum}};
    if (mesh.ndim() < 3) {
      alphabet.push_back(Shard{2});
      alphabet.push_back(Partial{ReduceOp::kMax});
    }
    std::vector<ShardingSpec> specs;
    for (auto& s : all_specs(mesh.ndim(), alphabet)) {
      try {
        validate_spec(s, mesh.ndim(), shape, global_shape);
        specs.push_back(std::move(s));
      } catch (const Error&) {  // e.g. dim 2 (size 4) split 8 ways: not a case to test
      }
    }
    int checked = 0;
    for (const auto& from : specs) {
      const DTensor a = DTensor::distribute(global, mesh, from);
      for (const auto& to : specs) {
        const DTensor b = a.redistribute(to);
        ASSERT_EQ(b.spec(), to);
        if (!has_partial(to)) {
          const DTensor direct = DTensor::distribute(global, mesh, to);
          ASSERT_EQ(max_abs_diff(b.local().values(), direct.local().values()), 0.0)
              << "rank " << world.rank() << " " << mesh << " " << to_string(from) << " → "
              << to_string(to);
        }
        const Tensor back = b.full();
        ASSERT_EQ(max_abs_diff(back.values(), global.values()), 0.0)
            << "rank " << world.rank() << " " << mesh << " round trip " << to_string(from)
            << " → " << to_string(to);
        ++checked;
      }
    }
    EXPECT_GT(checked, 0);
  }
}

TEST(Redistribute, PartialMaxReducesWithMax) {
  const auto world = comm::Communicator::world();
  const DeviceMesh mesh(world, {world.size()});
  // Each rank holds a candidate: rank r's value at element i is (i + r) mod P; the max is P−1
  // everywhere (for P > 1), which no single rank holds for all elements.
  Tensor local({world.size(), 3});
  for (std::int64_t i = 0; i < local.numel(); ++i) {
    local[i] = static_cast<float>((i + world.rank()) % world.size());
  }
  const DTensor partial(mesh, {Partial{ReduceOp::kMax}}, {world.size(), 3}, local);
  const Tensor full = partial.full();
  for (const float v : full.values()) EXPECT_EQ(v, static_cast<float>(world.size() - 1));
  const DTensor sharded = partial.redistribute({Shard{0}});
  ASSERT_EQ(sharded.local().shape(), (Shape{1, 3}));
  for (const float v : sharded.local().values()) EXPECT_EQ(v, static_cast<float>(world.size() - 1));
}

TEST(Redistribute, UnevenShardIsRejectedOnEveryRank) {
  const auto world = comm::Communicator::world();
  const DeviceMesh mesh(world, {world.size()});
  if (world.size() == 1) GTEST_SKIP() << "everything divides by 1";
  const Tensor x({world.size() + 1, 2});
  try {
    DTensor::distribute(x, mesh, {Shard{0}});
    FAIL() << "uneven shard accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("tensor dim 0 of size {}", world.size() + 1)),
              std::string::npos)
        << e.what();
  }
  const DTensor ok = DTensor::distribute(x, mesh, {Replicate{}});
  EXPECT_THROW(ok.redistribute({Shard{0}}), Error);
  EXPECT_THROW(ok.redistribute({Shard{0}, Replicate{}}), Error);  // wrong spec length
}

}  // namespace
}  // namespace meshtp::mesh
