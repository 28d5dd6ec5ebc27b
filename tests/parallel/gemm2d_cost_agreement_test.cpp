// The runtime's cost table (parallel::gemm2d_cost, from the algorithm files' headers) and
// the planner's (plan::gemm2d_traffic) must agree on bytes per rank in each direction, and
// on which configurations are valid: a cost formula that exists twice is checked here to
// agree. Pure: no MPI calls.
#include <gtest/gtest.h>

#include <numeric>

#include "core/error.hpp"
#include "parallel/gemm2d/gemm2d.hpp"
#include "plan/gemm2d_cost.hpp"

namespace meshtp {
namespace {

using layout::Algorithm;
using layout::Dataflow;

TEST(Gemm2dCostAgreement, BytesPerRankAndValidityMatchThePlanner) {
  const std::vector<std::pair<int, int>> meshes{{1, 1}, {1, 2}, {2, 1}, {2, 2}, {1, 4},
                                                {4, 1}, {2, 4}, {4, 2}, {3, 3}, {4, 4}};
  const std::vector<parallel::Gemm2dShape> shapes{
      {1024, 2048, 512}, {4096, 4096, 1024}, {96, 48, 144}, {64, 64, 24}};
  int compared = 0;
  for (const auto& [nr, nc] : meshes) {
    for (const auto& s : shapes) {
      for (const Dataflow d : layout::all<layout::Dataflow>()) {
        for (const Algorithm a : layout::all<layout::Algorithm>()) {
          for (const int slices : {1, 2, 4, 8}) {
            const parallel::Gemm2dOptions o{.algo = a, .dataflow = d, .slices = slices};
            const plan::Gemm2dShape ps{
                .dataflow = d, .m = s.m, .n = s.n, .k = s.k, .nr = nr, .nc = nc};
            plan::Gemm2dParams params;
            params.slices = slices;
            params.panels = std::lcm(nr, nc) * slices;
            std::string ours;
            try {
              parallel::validate(nr, nc, s, o);
            } catch (const Error& e) {
              ours = e.what();
            }
            auto theirs = ps.invalid_reason();
            if (!theirs) theirs = plan::gemm2d_invalid_reason(a, ps, params);
            const std::string where =
                fmt::format("{}x{} m={} n={} k={} {} {} S={}", nr, nc, s.m, s.n, s.k, a, d, slices);
            EXPECT_EQ(ours.empty(), !theirs.has_value())
                << where << ": runtime says '" << ours << "', planner says '" << theirs.value_or("")
                << "'";
            if (!ours.empty() || theirs) continue;
            const parallel::Gemm2dCost cost = parallel::gemm2d_cost(nr, nc, s, o);
            const plan::Gemm2dTraffic t = plan::gemm2d_traffic(a, ps, params);
            EXPECT_DOUBLE_EQ(cost.bytes_row, t.horizontal.bytes_per_rank) << where;
            EXPECT_DOUBLE_EQ(cost.bytes_col, t.vertical.bytes_per_rank) << where;
            EXPECT_DOUBLE_EQ(cost.flops, t.flops_per_rank) << where;
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
}

}  // namespace
}  // namespace meshtp
