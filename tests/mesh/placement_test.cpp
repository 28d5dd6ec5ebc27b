// Placements, specs and the redistribute planner: pure, no MPI.
#include "mesh/placement.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "mesh/redistribute.hpp"

namespace meshtp::mesh {
namespace {

using comm::ReduceOp;

TEST(Placement, PrintAndParseRoundTrip) {
  const ShardingSpec spec{Replicate{}, Shard{1}, Partial{ReduceOp::kSum}, Partial{ReduceOp::kMax}};
  EXPECT_EQ(to_string(spec), "[R, S(1), P(sum), P(max)]");
  EXPECT_EQ(parse_spec("[R, S(1), P(sum), P(max)]"), spec);
  EXPECT_EQ(parse_spec("S(0),R"), (ShardingSpec{Shard{0}, Replicate{}}));
  for (const char* bad : {"", "[]", "S", "S()", "S(x)", "Q", "R,", "P(min)", "S(1"}) {
    EXPECT_THROW(parse_spec(bad), Error) << bad;
  }
}

TEST(Placement, LocalShapeAndOffsetOuterMeshDimSplitsFirst) {
  // Mesh (2,2), both dims shard tensor dim 0 of an [8, 3] tensor: rank (c0, c1) holds block
  // 2·c0 + c1 of four, rows [2·(2·c0 + c1), … + 2).
  const ShardingSpec spec{Shard{0}, Shard{0}};
  EXPECT_EQ(local_shape({8, 3}, spec, {2, 2}), (Shape{2, 3}));
  EXPECT_EQ(local_offset({8, 3}, spec, {2, 2}, {0, 1}), (std::vector<std::int64_t>{2, 0}));
  EXPECT_EQ(local_offset({8, 3}, spec, {2, 2}, {1, 0}), (std::vector<std::int64_t>{4, 0}));
  const ShardingSpec mixed{Shard{1}, Shard{0}};
  EXPECT_EQ(local_shape({4, 6}, mixed, {2, 3}), (Shape{1, 3}));
  EXPECT_EQ(local_offset({6, 4}, mixed, {2, 3}, {1, 2}), (std::vector<std::int64_t>{4, 2}));
}

TEST(Placement, ValidateNamesTheProblem) {
  try {
    validate_spec({Shard{1}, Replicate{}}, 2, {2, 3}, {4, 5});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "tensor dim 1 of size 5 (shape [4, 5]) is not divisible by the 2 shards of "
                 "spec [S(1), R] on mesh 2x3");
  }
  EXPECT_THROW(validate_spec({Shard{2}, Replicate{}}, 2, {2, 3}, {4, 6}), Error);
  EXPECT_THROW(validate_spec({Replicate{}}, 2, {2, 3}, {4, 6}), Error);
  EXPECT_NO_THROW(validate_spec({Shard{0}, Shard{0}}, 2, {2, 3}, {6, 5}));
  EXPECT_THROW(validate_spec({Shard{0}, Shard{0}}, 2, {2, 3}, {4, 5}), Error);
}

std::vector<RedistributeStep> plan(const char* from, const char* to) {
  return plan_redistribute(parse_spec(from), parse_spec(to));
}

TEST(RedistributePlan, EachSingleTransitionUsesItsCollective) {
  using K = layout::CollectiveKind;
  EXPECT_EQ(plan("[S(0)]", "[R]"),
            (std::vector<RedistributeStep>{{.kind = K::kAllGather, .mesh_dim = 0, .tensor_dim = 0}}));
  EXPECT_EQ(plan("[P(sum)]", "[R]"),
            (std::vector<RedistributeStep>{{.kind = K::kAllReduce, .mesh_dim = 0}}));
  EXPECT_EQ(plan("[P(max)]", "[S(1)]"),
            (std::vector<RedistributeStep>{{.kind = K::kReduceScatter, .mesh_dim = 0,
                                            .tensor_dim = 1, .op = ReduceOp::kMax}}));
  EXPECT_EQ(
      plan("[R]", "[S(1)]"),
      (std::vector<RedistributeStep>{{.kind = LocalStep::kSlice, .mesh_dim = 0, .tensor_dim = 1}}));
  EXPECT_EQ(plan("[S(0)]", "[S(1)]"),
            (std::vector<RedistributeStep>{
                {.kind = K::kAllToAll, .mesh_dim = 0, .tensor_dim = 0, .to_tensor_dim = 1}}));
  EXPECT_EQ(plan("[R]", "[P(sum)]"),
            (std::vector<RedistributeStep>{{.kind = LocalStep::kMakePartial, .mesh_dim = 0}}));
  EXPECT_TRUE(plan("[S(0), P(sum)]", "[S(0), P(sum)]").empty());
}

TEST(RedistributePlan, ComposesPerMeshDim) {
  // ATP row-first output: [P, S(1)] → [R, S(1)] is one all_reduce over mesh dim 0.
  const auto steps = plan("[P(sum), S(1)]", "[R, S(1)]");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(to_string(steps[0]), "all_reduce(mesh dim 0, sum)");
  // Moving a shard of dim 0 from the outer to the inner mesh dim cannot be an all_to_all:
  // the outer shard is gathered first, then the inner one sliced.
  const auto moved = plan("[S(0), R]", "[R, S(0)]");
  ASSERT_EQ(moved.size(), 2u);
  EXPECT_EQ(to_string(moved[0]), "all_gather(mesh dim 0, tensor dim 0)");
  EXPECT_EQ(to_string(moved[1]), "slice(mesh dim 1, tensor dim 0)");
  // Nested shards are removed inner-most first.
  const auto unnest = plan("[S(0), S(0)]", "[R, R]");
  ASSERT_EQ(unnest.size(), 2u);
  EXPECT_EQ(unnest[0].mesh_dim, 1);
  EXPECT_EQ(unnest[1].mesh_dim, 0);
  // Adding a nested shard to an outer mesh dim needs the inner one off first.
  const auto renest = plan("[R, S(0)]", "[S(0), S(0)]");
  ASSERT_EQ(renest.size(), 3u);
  EXPECT_EQ(to_string(renest[0]), "all_gather(mesh dim 1, tensor dim 0)");
  EXPECT_EQ(to_string(renest[1]), "slice(mesh dim 0, tensor dim 0)");
  EXPECT_EQ(to_string(renest[2]), "slice(mesh dim 1, tensor dim 0)");
  // Partial into a shard: a reduce_scatter.
  const auto rs = plan("[S(1), P(sum)]", "[S(1), S(0)]");
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(to_string(rs[0]), "reduce_scatter(mesh dim 1, tensor dim 0, sum)");
}

}  // namespace
}  // namespace meshtp::mesh
