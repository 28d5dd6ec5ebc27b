// Counted equals planned: every 2D GeMM algorithm × dataflow (× slice count) on every mesh of
// this world size up to 4x4 runs once with the comm layer's traffic counter on, and what the
// ranks actually sent — per collective kind and mesh dim: launches, message bytes and bytes
// sent — must equal the layout traffic description the planner prices
// (layout::gemm2d_traffic via parallel::gemm2d_traffic): launches and message bytes exactly,
// the bytes sent per rank (Σ (P−1)·n/P, …) up to the rounding of the division by P.
//
// The description gives bytes per rank; every rank sends the same except in Cannon, whose
// skew leaves the ranks of row (column) 0 idle, so it describes the busiest rank: compare the
// maximum over ranks, and for the other algorithms the minimum as well.
#include <gtest/gtest.h>

#include <fmt/ostream.h>

#include <algorithm>

#include "comm/communicator.hpp"
#include "parallel/gemm2d/gemm2d.hpp"
#include "tensor/random.hpp"

namespace meshtp::parallel {
namespace {

using layout::CollectiveKind;
using layout::Direction;

// Every mesh of this world size with both dims ≤ 4.
std::vector<std::vector<int>> meshes_for(int world_size) {
  std::vector<std::vector<int>> out;
  for (int nr = 1; nr <= 4; ++nr) {
    if (world_size % nr == 0 && world_size / nr <= 4) out.push_back({nr, world_size / nr});
  }
  return out;
}

// (min, max) over the ranks of `world` of x.
std::pair<double, double> min_max(const comm::Communicator& world, double x) {
  std::vector<double> v{x, -x};
  world.all_reduce(std::span<double>(v), comm::ReduceOp::kMax);
  return {-v[1], v[0]};
}

TEST(Gemm2dTraffic, CountedEqualsPlannedForEveryAlgorithmDataflowAndMesh) {
  const auto world = comm::Communicator::world();
  comm::CommLedger& ledger = comm::comm_ledger();
  // Divisible by every mesh dim ≤ 4, by lcm(Nr, Nc)·S ≤ 24 and by S·(local extent) for S ≤ 2.
  const Gemm2dShape shape{.m = 24, .n = 48, .k = 72};
  int cases = 0;
  for (const auto& dims : meshes_for(world.size())) {
    const mesh::DeviceMesh mesh(world, dims);
    const int nr = dims[0], nc = dims[1];
    Gemm2dWorkspace ws;
    for (const Algorithm algo : layout::all<Algorithm>()) {
      if (algo == Algorithm::kCannon && nr != nc) continue;
      for (const Dataflow dataflow : layout::all<Dataflow>()) {
        for (const int slices : {1, 2}) {
          if (slices > 1 && algo != Algorithm::kMeshSlice && algo != Algorithm::kSumma) continue;
          const Gemm2dOptions o{.algo = algo, .dataflow = dataflow, .params = {.slices = slices}};
          const layout::Gemm2dTraffic planned = gemm2d_traffic(nr, nc, shape, o);
          const Shape a = global_a_shape(dataflow, shape), b = global_b_shape(dataflow, shape);
          const Tensor a_local = uniform_tensor({a[0] / nr, a[1] / nc}, 1);
          const Tensor b_local = uniform_tensor({b[0] / nr, b[1] / nc}, 2);
          Tensor c_local({shape.m / nr, shape.n / nc});

          ledger.reset_traffic();
          ledger.count_traffic = true;
          gemm2d(mesh, a_local.matrix(), b_local.matrix(), c_local.matrix(), o, ws);
          ledger.count_traffic = false;

          const std::string where = fmt::format("mesh {}x{}, {}", nr, nc, fmt::streamed(o));
          for (const Direction d : {Direction::kVertical, Direction::kHorizontal}) {
            const layout::DirectionTraffic& want =
                d == Direction::kVertical ? planned.vertical : planned.horizontal;
            for (const CollectiveKind kind : layout::all<CollectiveKind>()) {
              const comm::TrafficCount& got = ledger.traffic(kind, layout::mesh_dim(d));
              const bool planned_kind = kind == want.kind;
              const auto [launches_min, launches_max] =
                  min_max(world, static_cast<double>(got.launches));
              const auto [bytes_min, bytes_max] = min_max(world, got.sent_bytes);
              const auto [message_min, message_max] =
                  min_max(world, static_cast<double>(got.message_bytes));
              const std::string what = fmt::format("{}: {} {} ({} ranks)", where,
                                                   layout::name(d), kind, want.group_size);
              EXPECT_EQ(launches_max, planned_kind ? want.launches : 0) << what;
              EXPECT_EQ(message_max, planned_kind ? want.launches * want.message_bytes : 0)
                  << what;
              // Sums of (P−1)·n/P: equal up to the rounding of the division by P = 3.
              EXPECT_NEAR(bytes_max, planned_kind ? want.bytes_per_rank : 0,
                          1e-12 * want.bytes_per_rank)
                  << what;
              if (algo != Algorithm::kCannon) {
                EXPECT_EQ(launches_min, launches_max) << what;
                EXPECT_EQ(message_min, message_max) << what;
                EXPECT_NEAR(bytes_min, bytes_max, 1e-12 * bytes_max) << what;
              }
            }
          }
          // Nothing travels outside the two mesh dims.
          for (const CollectiveKind kind : layout::all<CollectiveKind>()) {
            EXPECT_EQ(ledger.traffic(kind, -1).launches, 0) << where << ": " << kind;
          }
          ++cases;
        }
      }
    }
  }
  EXPECT_GE(cases, 3 * 6);  // at least Collective, Wang, SUMMA ×2, MeshSlice ×2 per dataflow
}

// The counter is off by default (a caller that never asks pays one branch and counts
// nothing); on, it files each call under its group's label with layout::sent_bytes.
TEST(Gemm2dTraffic, CounterIsOffByDefaultAndCountsEachCall) {
  comm::CommLedger& ledger = comm::comm_ledger();
  ledger.reset_traffic();
  ASSERT_FALSE(ledger.count_traffic);
  const auto world = comm::Communicator::world();
  const int p = world.size();
  std::vector<float> x(12 * static_cast<std::size_t>(p), 1.0f);
  world.all_reduce(std::span<float>(x));
  EXPECT_EQ(ledger.traffic(CollectiveKind::kAllReduce, -1).launches, 0);

  ledger.count_traffic = true;
  world.all_reduce(std::span<float>(x));
  world.all_reduce(std::span<float>(x));
  std::vector<float> mine(12), all(x.size());
  world.all_gather(std::span<const float>(mine), std::span<float>(all));
  ledger.count_traffic = false;
  const double n = static_cast<double>(x.size() * sizeof(float));
  const comm::TrafficCount& ar = ledger.traffic(CollectiveKind::kAllReduce, -1);
  const comm::TrafficCount& ag = ledger.traffic(CollectiveKind::kAllGather, -1);
  EXPECT_EQ(ar.launches, p > 1 ? 2 : 0);  // a group of one sends nothing
  EXPECT_EQ(ar.sent_bytes, 2 * 2.0 * (p - 1) * n / p);
  EXPECT_EQ(ag.launches, p > 1 ? 1 : 0);
  EXPECT_EQ(ag.sent_bytes, (p - 1) * 12.0 * sizeof(float));
  EXPECT_EQ(ag.message_bytes, p > 1 ? p * 12 * 4 : 0);
  EXPECT_EQ(ledger.traffic(CollectiveKind::kAllReduce, 0).launches, 0);
}

}  // namespace
}  // namespace meshtp::parallel
