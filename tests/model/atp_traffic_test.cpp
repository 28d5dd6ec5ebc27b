// Counted equals planned for every strategy, a whole block stack at a time: a 2-layer stack
// runs one forward + backward with the comm layer's traffic counter on, and what the ranks
// sent — per collective kind and mesh dim: launches, message bytes, bytes sent — must equal,
// to the byte, the description the planner prices:
//   atp, megatron  layout::atp_block_traffic (plan/atp_cost.hpp), every mesh with both dims
//                  ≤ 4, chunks 1 and 2;
//   tp1d           plan::tp1d_pass of each linear's three GeMMs + plan::elementwise_calls,
//                  meshes (N, 1), N ≤ 4;
//   2D GeMM        every algorithm × stationary (output, input): each linear's three GeMMs as
//                  the planner shapes them (plan::fc_gemm) and layout::gemm2d_traffic prices
//                  them + plan::elementwise_calls, every mesh with both dims ≤ 4 (Cannon: an
//                  upper bound, see expect_counted_equals_planned).
// The per-GeMM test (tests/parallel/gemm2d_traffic_test.cpp) proves one GeMM sends its
// description; this one proves the blocks send nothing else and the planner sees every call.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "../parallel/mesh2d.hpp"
#include "comm/communicator.hpp"
#include "layout/atp_traffic.hpp"
#include "model/gemm2d_block.hpp"
#include "model/stack.hpp"
#include "plan/fc_layers.hpp"
#include "plan/planner.hpp"
#include "tensor/random.hpp"

namespace meshtp::model {
namespace {

using layout::CollectiveKind;
using Planned = std::map<std::pair<CollectiveKind, int>, comm::TrafficCount>;

constexpr int kLayers = 2;
constexpr std::int64_t kBatch = 4, kSeq = 8, kHidden = 32, kHeads = 16;

void add(Planned& planned, CollectiveKind kind, int dim, double launches, double message_bytes,
         double sent_bytes_per_call) {
  comm::TrafficCount& p = planned[{kind, dim}];
  p.launches += static_cast<std::int64_t>(launches);
  p.message_bytes += static_cast<std::int64_t>(launches * message_bytes);
  p.sent_bytes += launches * sent_bytes_per_call;
}

constexpr layout::ModelShape kShape{
    .batch = kBatch, .seq = kSeq, .hidden = kHidden, .heads = kHeads, .layers = kLayers};

plan::ModelSpec model_spec() {
  plan::ModelSpec m;
  static_cast<layout::ModelShape&>(m) = kShape;
  m.precision = plan::Precision::kFp32;
  return m;
}

// The planner's calls outside the linears (tp1d, 2D GeMM).
void add_elementwise(Planned& planned, layout::Strategy strategy, const std::vector<int>& dims) {
  for (const plan::ElementwiseCall& x :
       plan::elementwise_calls(model_spec(), strategy, dims[0], dims[1])) {
    add(planned, x.call.kind, x.call.mesh_dim, x.count, x.call.message_bytes,
        x.call.bytes_per_rank() / x.call.launches);
  }
}

// One forward + backward of `stack`, counted, against `planned`: every rank must send exactly
// the planned traffic. With `bound`, no rank may send more: Cannon's description is each
// GeMM's busiest rank (its skew leaves a row or column idle), and which rank that is changes
// from GeMM to GeMM, so the sum over a block bounds every rank without equalling any.
void expect_counted_equals_planned(Stack& stack, Planned planned, const std::string& where,
                                   bool bound = false) {
  comm::CommLedger& ledger = comm::comm_ledger();
  stack.init(3);
  const Shape x{kBatch, kSeq, kHidden};
  stack.set_input(uniform_tensor(x, 5));
  stack.set_grad_output(uniform_tensor(x, 6));
  ledger.reset_traffic();
  ledger.count_traffic = true;
  stack.forward();
  stack.backward();
  ledger.count_traffic = false;
  for (const CollectiveKind kind : layout::all<CollectiveKind>()) {
    for (const int dim : {-1, 0, 1}) {
      const comm::TrafficCount& got = ledger.traffic(kind, dim);
      const comm::TrafficCount want = planned[{kind, dim}];
      const std::string what = fmt::format("{}: {} on dim {}", where, kind, dim);
      if (bound) {
        EXPECT_LE(got.launches, want.launches) << what;
        EXPECT_LE(got.message_bytes, want.message_bytes) << what;
        EXPECT_LE(got.sent_bytes, want.sent_bytes) << what;
        continue;
      }
      EXPECT_EQ(got.launches, want.launches) << what;
      EXPECT_EQ(got.message_bytes, want.message_bytes) << what;
      EXPECT_NEAR(got.sent_bytes, want.sent_bytes, 1e-9 * want.sent_bytes) << what;
    }
  }
}

std::vector<std::vector<int>> meshes_up_to_4x4() {
  std::vector<std::vector<int>> out;
  for (const auto& dims : parallel::meshes2d(comm::Communicator::world().size())) {
    if (dims[0] <= 4 && dims[1] <= 4) out.push_back(dims);
  }
  return out;
}

TEST(BlockTraffic, AtpCountedEqualsPlannedOnEveryMeshAndChunking) {
  const auto world = comm::Communicator::world();
  int cases = 0;
  for (const auto& dims : meshes_up_to_4x4()) {
    const mesh::DeviceMesh mesh(world, dims);
    for (const int chunks : {1, 2}) {
      Stack stack(mesh, StackConfig{.block = {.shape = kShape, .layout = {.chunks = chunks}}});
      Planned planned;
      for (const layout::AtpCall& call : layout::atp_block_traffic(
               {.d1 = dims[0], .d2 = dims[1], .tokens = kBatch * kSeq, .hidden = kHidden,
                .chunks = chunks})) {
        add(planned, call.kind, call.mesh_dim, kLayers * call.launches, call.message_bytes,
            call.bytes_per_rank() / call.launches);
      }
      expect_counted_equals_planned(
          stack, planned, fmt::format("atp mesh {}x{}, chunks {}", dims[0], dims[1], chunks));
      ++cases;
    }
  }
  EXPECT_GE(cases, 2);
}

TEST(BlockTraffic, Tp1dCountedEqualsPlanned) {
  const auto world = comm::Communicator::world();
  const int n = world.size();
  if (n > 4) GTEST_SKIP() << "tp1d runs on (N, 1); this test stops at N = 4";
  const mesh::DeviceMesh mesh(world, {n, 1});
  Stack stack(mesh, StackConfig{.block = {.shape = kShape,
                                          .layout = {.mesh = {n, 1},
                                                     .strategy = layout::Strategy::kTp1d,
                                                     .sequence_parallel = true}}});
  Planned planned;
  for (const plan::FcShape& fc : plan::fc_layers(model_spec())) {
    for (const plan::Pass pass : plan::kPasses) {
      const plan::Tp1dPass t = plan::tp1d_pass(fc, pass, n, 4);
      if (t.kind != CollectiveKind::kNone) {
        add(planned, t.kind, 0, kLayers, t.shard_bytes * n, t.bytes_per_rank);
      }
    }
  }
  add_elementwise(planned, layout::Strategy::kTp1d, {n, 1});
  expect_counted_equals_planned(stack, planned, fmt::format("tp1d mesh {}x1", n));
}

TEST(BlockTraffic, Gemm2dBlockCountedEqualsPlannedForEveryAlgorithmAndStationary) {
  const auto world = comm::Communicator::world();
  int cases = 0;
  for (const auto& dims : meshes_up_to_4x4()) {
    const mesh::DeviceMesh mesh(world, dims);
    const int nr = dims[0], nc = dims[1];
    for (const layout::Algorithm algo : layout::all<layout::Algorithm>()) {
      if (algo == layout::Algorithm::kCannon && nr != nc) continue;
      for (const layout::Stationary stationary :
           {layout::Stationary::kOutput, layout::Stationary::kInput}) {
        BlockConfig block{.shape = kShape, .layout = {.strategy = layout::strategy_of(algo)}};
        for (layout::LinearPlan& l : block.layout.linears) l.stationary = stationary;
        const std::string where =
            fmt::format("{} {} mesh {}x{}", algo, stationary, nr, nc);
        const Gemm2dBlockPlans plans = plan_gemm2d_block(block, dims);
        const parallel::Gemm2dLinearPlan* linear[] = {&plans.qkv, &plans.proj, &plans.mlp1,
                                                      &plans.mlp2};
        Planned planned;
        for (const plan::FcShape& fc : plan::fc_layers(model_spec())) {
          const parallel::Gemm2dLinearPlan& run = *linear[static_cast<int>(fc.layer)];
          const parallel::Gemm2dOptions* runs[] = {&run.forward, &run.backward_data,
                                                   &run.backward_weight};
          for (const plan::Pass pass : plan::kPasses) {
            const layout::Gemm2dShape g = plan::fc_gemm(fc, run.stationary, pass, nr, nc, 4);
            const parallel::Gemm2dOptions& o = *runs[static_cast<int>(pass)];
            ASSERT_EQ(g.dataflow, o.dataflow) << where << " " << fc.layer << " " << name(pass);
            const layout::Gemm2dTraffic t = parallel::gemm2d_traffic(nr, nc, g, o);
            for (const layout::DirectionTraffic& d : {t.vertical, t.horizontal}) {
              if (d.launches == 0) continue;
              add(planned, d.kind, layout::mesh_dim(d.direction), kLayers * d.launches,
                  d.message_bytes, d.bytes_per_rank / d.launches);
            }
          }
        }
        add_elementwise(planned, layout::strategy_of(algo), dims);
        Stack stack(mesh, StackConfig{.block = block});
        expect_counted_equals_planned(stack, planned, where,
                                      algo == layout::Algorithm::kCannon);
        ++cases;
      }
    }
  }
  EXPECT_GE(cases, 6);
}

}  // namespace
}  // namespace meshtp::model
