// Counted equals planned for ATP and Megatron: a 2-layer ATP block stack on every mesh
// (d1, d2) of this world size with both dims ≤ 4 (Megatron's (N, 1) and (1, N) among them),
// chunks 1 and 2, runs one forward + backward with the comm layer's traffic counter on, and
// what the ranks sent — per collective kind and mesh dim: launches, message bytes, bytes
// sent — must equal layout::atp_block_traffic, the description the planner prices
// (plan/atp_cost.hpp), to the byte.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "../parallel/mesh2d.hpp"
#include "comm/communicator.hpp"
#include "layout/atp_traffic.hpp"
#include "model/stack.hpp"
#include "tensor/random.hpp"

namespace meshtp::model {
namespace {

using layout::CollectiveKind;

TEST(AtpTraffic, CountedEqualsPlannedOnEveryMeshAndChunking) {
  const auto world = comm::Communicator::world();
  comm::CommLedger& ledger = comm::comm_ledger();
  int cases = 0;
  for (const auto& dims : parallel::meshes2d(world.size())) {
    if (dims[0] > 4 || dims[1] > 4) continue;
    const mesh::DeviceMesh mesh(world, dims);
    for (const int chunks : {1, 2}) {
      const StackConfig c{.block = {.batch = 4, .seq = 8, .hidden = 32, .heads = 16,
                                    .chunks = chunks},
                          .layers = 2};
      Stack stack(mesh, c);
      stack.init(3);
      stack.set_input(uniform_tensor({4, 8, 32}, 5));
      stack.set_grad_output(uniform_tensor({4, 8, 32}, 6));
      ledger.reset_traffic();
      ledger.count_traffic = true;
      stack.forward();
      stack.backward();
      ledger.count_traffic = false;

      // Planned, summed per (kind, mesh dim) over the L layers.
      std::map<std::pair<CollectiveKind, int>, comm::TrafficCount> planned;
      for (const layout::AtpCall& call : layout::atp_block_traffic(
               {.d1 = dims[0], .d2 = dims[1], .tokens = 32, .hidden = 32, .chunks = chunks})) {
        comm::TrafficCount& p = planned[{call.kind, call.mesh_dim}];
        p.launches += c.layers * call.launches;
        p.message_bytes +=
            static_cast<std::int64_t>(c.layers * call.launches * call.message_bytes);
        p.sent_bytes += c.layers * call.bytes_per_rank();
      }
      const std::string where = fmt::format("mesh {}x{}, chunks {}", dims[0], dims[1], chunks);
      for (const CollectiveKind kind : layout::all<CollectiveKind>()) {
        for (const int dim : {-1, 0, 1}) {
          const comm::TrafficCount& got = ledger.traffic(kind, dim);
          const comm::TrafficCount want = planned[{kind, dim}];
          const std::string what = fmt::format("{}: {} on dim {}", where, kind, dim);
          EXPECT_EQ(got.launches, want.launches) << what;
          EXPECT_EQ(got.message_bytes, want.message_bytes) << what;
          EXPECT_DOUBLE_EQ(got.sent_bytes, want.sent_bytes) << what;
        }
      }
      ++cases;
    }
  }
  EXPECT_GE(cases, 2);
}

}  // namespace
}  // namespace meshtp::model
