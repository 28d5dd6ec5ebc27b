// Context parallelism equals serial: the ring (zigzag) and Ulysses attention cores on every cp
// that divides the world (the world split into P/cp groups, each its own sequences), with
// multi-head and grouped-query attention (Ulysses also with fewer key/value heads than cp),
// against ops/flash_attention over whole sequences on one rank: outputs, dq, dk, dv.
// Finite differences of the ring's and Ulysses' backward on 2 ranks close the loop.
#include "parallel/context_parallel.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../ops/grad_check.hpp"
#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "ops/flash_attention.hpp"

namespace meshtp::parallel {
namespace {

using testing::test_tensor;

struct Case {
  layout::CpComm kind;
  std::int64_t heads, kv_heads;
};

std::string describe(const Case& c, int cp) {
  return std::string(layout::name(c.kind)) + " cp " +
         std::to_string(cp) + " heads " + std::to_string(c.heads) + " kv " +
         std::to_string(c.kv_heads);
}

// This rank's rows (zigzag, chunk-major) of a global [B·s, w] tensor.
Tensor local_rows(const Tensor& global, const ContextParallelShape& s, int cp, int rank) {
  const std::int64_t rows = cp_local_rows(s, cp), w = global.dim(1);
  Tensor out({rows, w});
  for (std::int64_t r = 0; r < rows; ++r) {
    std::copy_n(&global.matrix()(cp_global_row(s, cp, rank, r), 0), w, &out.matrix()(r, 0));
  }
  return out;
}

double max_rel(const Tensor& got, const Tensor& want) {
  double worst = 0, scale = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::abs(want[i])));
  }
  return worst / scale;
}

void check(const comm::Communicator& world, int cp, const Case& c) {
  SCOPED_TRACE(describe(c, cp));
  const comm::Communicator group = world.split(world.rank() / cp, world.rank() % cp, "cp");
  const int me = group.rank();
  const ContextParallelShape s{.batch = 2, .seq = 8 * cp, .heads = c.heads,
                               .kv_heads = c.kv_heads, .head_dim = 4};
  const std::int64_t all = s.batch * s.seq, qw = s.heads * s.head_dim,
                     kw = s.kv_heads * s.head_dim;
  const auto seed = static_cast<std::uint64_t>(world.rank() / cp);  // each group its sequences
  const Tensor q = test_tensor({all, qw}, 11 + seed), k = test_tensor({all, kw}, 12 + seed),
               v = test_tensor({all, kw}, 13 + seed), dout = test_tensor({all, qw}, 14 + seed);

  // The serial oracle: causal attention over the whole sequences.
  const FlashAttention a{.batch = s.batch, .heads = s.heads, .kv_heads = s.kv_heads,
                         .block_q = 8, .block_k = 8};
  std::vector<float> scratch(
      static_cast<std::size_t>(flash_attention_scratch_size(a, s.seq, s.seq, s.head_dim)));
  Tensor out_ref({all, qw}), dq_ref({all, qw}), dk_ref({all, kw}), dv_ref({all, kw});
  std::vector<float> lse_ref(static_cast<std::size_t>(flash_attention_lse_size(a, all)));
  flash_attention_forward(out_ref.matrix(), lse_ref, scratch, q.matrix(), k.matrix(), v.matrix(),
                          a);
  dq_ref.fill(0.0f);
  dk_ref.fill(0.0f);
  dv_ref.fill(0.0f);
  flash_attention_backward(dq_ref.matrix(), dk_ref.matrix(), dv_ref.matrix(), scratch,
                           dout.matrix(), q.matrix(), k.matrix(), v.matrix(), out_ref.matrix(),
                           lse_ref, a);

  ContextParallelAttention layer(s, c.kind, group);
  const Tensor ql = local_rows(q, s, cp, me), kl = local_rows(k, s, cp, me),
               vl = local_rows(v, s, cp, me), dl = local_rows(dout, s, cp, me);
  Tensor out({layer.local_rows(), qw}), dq({layer.local_rows(), qw}), dk({layer.local_rows(), kw}),
      dv({layer.local_rows(), kw});
  std::vector<float> lse(static_cast<std::size_t>(layer.lse_size()));
  layer.forward(out.matrix(), lse, ql.matrix(), kl.matrix(), vl.matrix());
  dq.fill(0.0f);
  dk.fill(0.0f);
  dv.fill(0.0f);
  layer.backward(dq.matrix(), dk.matrix(), dv.matrix(), dl.matrix(), ql.matrix(), kl.matrix(),
                 vl.matrix(), out.matrix(), lse);
  EXPECT_LE(max_rel(out, local_rows(out_ref, s, cp, me)), 1e-5);
  EXPECT_LE(max_rel(dq, local_rows(dq_ref, s, cp, me)), 1e-5);
  EXPECT_LE(max_rel(dk, local_rows(dk_ref, s, cp, me)), 1e-5);
  EXPECT_LE(max_rel(dv, local_rows(dv_ref, s, cp, me)), 1e-5);
}

TEST(ContextParallel, ZigzagRowsCoverEverySequenceOnce) {
  const ContextParallelShape s{.batch = 2, .seq = 16};
  for (const int cp : {1, 2, 4, 8}) {
    std::vector<int> seen(static_cast<std::size_t>(s.batch * s.seq), 0);
    for (int r = 0; r < cp; ++r) {
      for (std::int64_t i = 0; i < cp_local_rows(s, cp); ++i) ++seen[cp_global_row(s, cp, r, i)];
    }
    for (const int n : seen) EXPECT_EQ(n, 1) << "cp " << cp;
  }
  // cp 2, c = 4: rank 0 holds chunks 0 and 3 — positions 0–3 and 12–15 of each sequence.
  EXPECT_EQ(cp_global_row(s, 2, 0, 3), 3);
  EXPECT_EQ(cp_global_row(s, 2, 0, 4), 16);      // chunk 0 of sequence 1
  EXPECT_EQ(cp_global_row(s, 2, 0, 8), 12);      // chunk 3 of sequence 0
  EXPECT_EQ(cp_global_row(s, 2, 1, 0), 4);       // rank 1: chunk 1
  EXPECT_EQ(cp_global_row(s, 2, 1, 8), 8);       // and chunk 2
}

TEST(ContextParallel, EqualsSerialOnEveryCp) {
  const comm::Communicator world = comm::Communicator::world();
  for (int cp = 1; cp <= world.size(); cp *= 2) {
    if (world.size() % cp != 0) continue;
    for (const Case& c : {Case{layout::CpComm::kRing, 4, 4}, Case{layout::CpComm::kRing, 4, 2},
                          Case{layout::CpComm::kRing, 2, 1}}) {
      check(world, cp, c);
    }
    // Ulysses: heads split over cp; key/value heads split, or replicated where fewer than cp.
    if (8 % cp == 0) {
      check(world, cp, {layout::CpComm::kA2a, 8, 8});
      check(world, cp, {layout::CpComm::kA2a, 8, std::max(1, cp / 2)});
      check(world, cp, {layout::CpComm::kA2a, 8, 1});
    }
    // a2a+ring: u = 2 (cp 4) or 4 (cp 8) consecutive ranks' all-to-all, then a ring of 2.
    if (cp >= 4) {
      check(world, cp, {layout::CpComm::kA2aRing, 8, 8});
      check(world, cp, {layout::CpComm::kA2aRing, 8, 2});
      check(world, cp, {layout::CpComm::kA2aRing, 8, 1});
    }
  }
}

// L = Σ dout ⊙ out through the distributed layer, its gradient by the layer's backward against
// finite differences of q, k and v (every rank perturbs its own rows; L summed over cp).
TEST(ContextParallel, BackwardMatchesFiniteDifferences) {
  const comm::Communicator world = comm::Communicator::world();
  if (world.size() < 2) GTEST_SKIP() << "needs a cp group of 2";
  const comm::Communicator group = world.split(world.rank() / 2, world.rank() % 2, "cp");
  for (const layout::CpComm kind : {layout::CpComm::kRing, layout::CpComm::kA2a}) {
    SCOPED_TRACE(kind == layout::CpComm::kRing ? "ring" : "a2a");
    const ContextParallelShape s{.batch = 1, .seq = 8, .heads = 2, .kv_heads = 1, .head_dim = 2};
    ContextParallelAttention layer(s, kind, group);
    const std::int64_t rows = layer.local_rows();
    const auto seed = static_cast<std::uint64_t>(20 + group.rank());
    Tensor q = test_tensor({rows, 4}, seed), k = test_tensor({rows, 2}, seed + 10),
           v = test_tensor({rows, 2}, seed + 20);
    const Tensor dout = test_tensor({rows, 4}, seed + 30);
    Tensor out({rows, 4});
    std::vector<float> lse(static_cast<std::size_t>(layer.lse_size()));
    const auto loss = [&] {
      layer.forward(out.matrix(), lse, q.matrix(), k.matrix(), v.matrix());
      double l = testing::dot(out.values(), dout.values());
      group.all_reduce(std::span<double>(&l, 1));
      return l;
    };
    (void)loss();
    Tensor dq({rows, 4}), dk({rows, 2}), dv({rows, 2});
    dq.fill(0.0f);
    dk.fill(0.0f);
    dv.fill(0.0f);
    layer.backward(dq.matrix(), dk.matrix(), dv.matrix(), dout.matrix(), q.matrix(), k.matrix(),
                   v.matrix(), out.matrix(), lse);
    // One rank perturbs at a time; the other evaluates the same losses with it.
    for (int owner = 0; owner < 2; ++owner) {
      for (auto [theta, grad] : {std::pair{&q, &dq}, std::pair{&k, &dk}, std::pair{&v, &dv}}) {
        const bool mine = group.rank() == owner;
        // Both ranks run the same forwards (collectives): the other perturbs a copy it ignores.
        Tensor unused = *theta;
        const testing::FdResult r = testing::check_gradient(
            mine ? theta->values() : unused.values(), grad->values(), loss);
        if (mine) {
          EXPECT_LE(r.error, testing::kFdTol) << r;
        }
      }
    }
  }
}

TEST(ContextParallel, RefusesBadShapesNamingTheValues) {
  const comm::Communicator world = comm::Communicator::world();
  const comm::Communicator group = world.split(world.rank(), 0, "cp");  // cp = 1
  const auto message = [&](const ContextParallelShape& s, layout::CpComm kind) {
    try {
      ContextParallelAttention layer(s, kind, group);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({.seq = 7}, layout::CpComm::kRing),
            "context parallelism: seq=7 is not divisible by 2·cp=2 (the zigzag's chunks)");
  EXPECT_EQ(message({.seq = 8, .heads = 3, .kv_heads = 2}, layout::CpComm::kRing),
            "heads=3 is not divisible by kv_heads=2");
  EXPECT_EQ(message({.seq = 8}, layout::CpComm::kA2aRing),
            "cp_comm=a2a+ring with cp=1: no a2a degree 1 < u < 1 divides both cp and heads=1");
  if (world.size() >= 2) {
    const comm::Communicator two = world.split(world.rank() / 2, world.rank() % 2, "cp");
    try {
      ContextParallelAttention layer({.seq = 8, .heads = 3, .kv_heads = 3}, layout::CpComm::kA2a,
                                     two);
      ADD_FAILURE() << "heads 3 over cp 2 accepted";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "cp_comm=a2a: heads=3 are not divisible by cp=2");
    }
    try {
      ContextParallelAttention layer({.seq = 8, .heads = 6, .kv_heads = 3}, layout::CpComm::kA2a,
                                     two);
      ADD_FAILURE() << "kv_heads 3 over an all-to-all of 2 accepted";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(),
                   "cp_comm=a2a: kv_heads=3 and the all-to-all's 2 ranks: one must divide the "
                   "other (key/value heads split over them, or replicated u/kv_heads times)");
    }
  }
}

}  // namespace
}  // namespace meshtp::parallel
