// Expert parallelism equals serial: every (ep, etp) that tiles the world (and leaves an
// expert-data-parallel dimension edp = P/(ep·etp)), each rank holding its own block of the
// tokens, against the serial layer (tests/ops/serial_moe.hpp) on all the tokens at once.
// Rank w's coordinates: etp t = w % etp, ep p = (w / etp) % ep, edp d = w / (etp·ep).
#include "parallel/moe.hpp"

#include <gtest/gtest.h>

#include "../ops/grad_check.hpp"
#include "../ops/serial_moe.hpp"
#include "../inverted_device.hpp"
#include "comm/communicator.hpp"
#include "core/error.hpp"

namespace meshtp::parallel {
namespace {

using testing::SerialMoe;
using testing::test_tensor;

constexpr std::int64_t kTokensPerRank = 6, kHidden = 6, kExperts = 8, kFfn = 4, kTopK = 2;

struct Layout {
  int ep, etp;
};

struct Ranks {
  comm::Communicator world = comm::Communicator::world();
  int w = world.rank(), P = world.size();
};

MoeGroups groups_for(const Ranks& r, Layout l) {
  const int t = r.w % l.etp, p = (r.w / l.etp) % l.ep, d = r.w / (l.etp * l.ep);
  return {r.world.split(d * l.etp + t, p, "ep"), r.world.split(d * l.ep + p, t, "etp"),
          r.world};
}

// The serial layer on `tokens` rows of x starting at `first` (the same weights).
SerialMoe serial_on(const Tensor& x, std::int64_t first, std::int64_t tokens, double cf,
                    double alpha, const Tensor& wr, const Tensor& w1, const Tensor& w2) {
  SerialMoe m{.N = tokens, .h = kHidden, .E = kExperts, .F = kFfn, .k = kTopK, .cf = cf,
              .alpha = alpha};
  m.x = Tensor({tokens, kHidden});
  copy(x.matrix().block(first, 0, tokens, kHidden), m.x.matrix());
  m.wr = wr;
  m.w1 = w1;
  m.w2 = w2;
  return m;
}

// One layout: forward and backward on this rank's tokens against the serial layer on all of
// them (dropless: one serial call; with capacity: one serial call per rank's block, since
// drops are per rank, and no aux loss, whose counts would then differ).
void check_layout(const Ranks& r, Layout l, double cf, double alpha) {
  SCOPED_TRACE("ep " + std::to_string(l.ep) + " etp " + std::to_string(l.etp) + " cf " +
               std::to_string(cf));
  const std::int64_t N = kTokensPerRank * r.P;
  const Tensor x = test_tensor({N, kHidden}, 41);
  const Tensor dy = test_tensor({N, kHidden}, 42);
  const Tensor wr = test_tensor({kExperts, kHidden}, 43, 2.0f);
  const Tensor w1 = test_tensor({kExperts * kFfn, kHidden}, 44, 0.5f);
  const Tensor w2 = test_tensor({kExperts * kHidden, kFfn}, 45, 0.5f);

  // The serial oracle: outputs, dx, and the whole weights' gradients.
  Tensor y_ref({N, kHidden}), dx_ref({N, kHidden}), dwr_ref(wr.shape()), dw1_ref(w1.shape()),
      dw2_ref(w2.shape());
  double aux_ref = 0;
  const std::int64_t block = cf == 0.0 ? N : kTokensPerRank;
  for (std::int64_t first = 0; first < N; first += block) {
    SerialMoe m = serial_on(x, first, block, cf, alpha, wr, w1, w2);
    aux_ref += m.forward();
    Tensor dy_part({block, kHidden}), dx_part({block, kHidden});
    copy(dy.matrix().block(first, 0, block, kHidden), dy_part.matrix());
    m.backward(dy_part, dx_part, dwr_ref, dw1_ref, dw2_ref);
    copy(m.y.matrix(), y_ref.matrix().block(first, 0, block, kHidden));
    copy(dx_part.matrix(), dx_ref.matrix().block(first, 0, block, kHidden));
  }

  const MoeConfig config{.hidden = kHidden, .experts = kExperts, .top_k = kTopK, .ffn = kFfn,
                         .capacity_factor = cf, .aux_loss_coeff = alpha};
  MoeGroups groups = groups_for(r, l);
  const comm::Communicator edp =
      r.world.split(groups.ep.rank() * l.etp + groups.etp.rank(), r.w, "edp");
  ExpertParallelMoe layer(config, groups);
  layer.load(wr, w1, w2);
  const std::int64_t first = r.w * kTokensPerRank;
  Tensor x_mine({kTokensPerRank, kHidden}), dy_mine({kTokensPerRank, kHidden});
  copy(x.matrix().block(first, 0, kTokensPerRank, kHidden), x_mine.matrix());
  copy(dy.matrix().block(first, 0, kTokensPerRank, kHidden), dy_mine.matrix());
  Tensor y({kTokensPerRank, kHidden}), dx({kTokensPerRank, kHidden}, 7.0f);
  double aux = layer.forward(y.matrix(), x_mine.matrix());
  layer.backward(dx.matrix(), dy_mine.matrix(), x_mine.matrix(), 1.0);

  r.world.all_reduce(std::span<double>(&aux, 1));
  EXPECT_NEAR(aux, aux_ref, 1e-9 + 1e-6 * std::abs(aux_ref));
  Tensor y_want({kTokensPerRank, kHidden}), dx_want({kTokensPerRank, kHidden});
  copy(y_ref.matrix().block(first, 0, kTokensPerRank, kHidden), y_want.matrix());
  copy(dx_ref.matrix().block(first, 0, kTokensPerRank, kHidden), dx_want.matrix());
  EXPECT_LT(max_relative_error(y.values(), y_want.values()), 1e-5);
  EXPECT_LT(max_relative_error(dx.values(), dx_want.values()), 1e-5);

  // Router: every rank's part summed. Experts: each shard summed over edp, against its block
  // of the whole gradient.
  r.world.all_reduce(layer.router_grad.values());
  edp.all_reduce(layer.w1_grad.values());
  edp.all_reduce(layer.w2_grad.values());
  EXPECT_LT(max_relative_error(layer.router_grad.values(), dwr_ref.values()), 1e-5);
  ExpertParallelMoe want(config, groups);
  want.load(wr, dw1_ref, dw2_ref);  // the same sharding of the gradients
  EXPECT_LT(max_relative_error(layer.w1_grad.values(), want.w1.values()), 1e-5);
  EXPECT_LT(max_relative_error(layer.w2_grad.values(), want.w2.values()), 1e-5);
}

std::vector<Layout> layouts(int P) {
  std::vector<Layout> out;
  for (int ep = 1; ep <= P; ep *= 2)
    for (int etp = 1; ep * etp <= P; etp *= 2)
      if (P % (ep * etp) == 0 && kExperts % ep == 0 && kFfn % etp == 0) out.push_back({ep, etp});
  return out;
}

TEST(ExpertParallelMoe, DroplessEqualsSerialOnEveryLayout) {
  const Ranks r;
  for (const Layout l : layouts(r.P)) check_layout(r, l, 0.0, 0.1);
}

TEST(ExpertParallelMoe, CapacityDropsPerRankAsTheSerialLayerPerBlock) {
  const Ranks r;
  for (const Layout l : layouts(r.P)) check_layout(r, l, 1.0, 0.0);
}

TEST(ExpertParallelMoe, RefusesShapesThatDoNotSplitNamingThem) {
  const Ranks r;
  MoeGroups g{r.world, comm::Communicator::alone(0, 1), r.world};
  MoeConfig c{.hidden = 4, .experts = 3, .top_k = 1, .ffn = 4};
  if (r.P == 2 || r.P == 4 || r.P == 8) {
    EXPECT_EQ(testing::error_message([&] { ExpertParallelMoe bad(c, g); }),
              "moe: experts=3 is not divisible by the expert-parallel size ep=" +
                  std::to_string(r.P));
  }
  MoeGroups g2{comm::Communicator::alone(0, 1), comm::Communicator::alone(0, 4), r.world};
  c.experts = 4;
  c.ffn = 6;
  EXPECT_EQ(testing::error_message([&] { ExpertParallelMoe bad(c, g2); }),
            "moe: an expert's ffn=6 is not divisible by the expert tensor-parallel size etp=4");
  c.ffn = 4;
  c.top_k = 5;
  EXPECT_EQ(testing::error_message([&] { ExpertParallelMoe bad(c, g2); }),
            "moe: top_k=5 must be between 1 and experts=4");

  // Parameters of the wrong shape, loaded or bound, are refused naming the sizes.
  c.top_k = 2;
  MoeGroups alone{comm::Communicator::alone(0, 1), comm::Communicator::alone(0, 1), r.world};
  ExpertParallelMoe layer(c, alone);  // h 4, 4 experts of ffn 4
  const Tensor router({4, 4}), w1({16, 4}), w2({16, 4}), w1_short({12, 4});
  EXPECT_EQ(testing::error_message([&] { layer.load(router, w1_short, w2); }),
            "moe load: router [4, 4], W1 [12, 4], W2 [16, 4] for experts=4, hidden=4, ffn=4 "
            "(expected [E, h], [E·F, h], [E·h, F])");
  std::vector<float> v16(16), v64(64), v63(63);
  EXPECT_EQ(testing::error_message([&] {
              layer.bind({v16, v63, v64}, {v16, v64, v64});
            }),
            "moe bind: W1 has 63 values and 64 gradients, this rank's shard 64");
  layer.bind({v16, v64, v64}, {});  // no gradients: a forward only

  // load copies on the host: a layer whose backend's memory is not the host's refuses it.
  testing::InvertedBackend stand_in;
  ExpertParallelMoe on_device(c, alone, stand_in);
  EXPECT_EQ(testing::error_message([&] { on_device.load(router, w1, w2); }),
            "moe load: the parameters are copied on the host, and inverted (test stand-in)'s "
            "memory is not the host's (bind the stack's storage instead)");
}

}  // namespace
}  // namespace meshtp::parallel
