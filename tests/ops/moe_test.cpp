#include "ops/moe.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "grad_check.hpp"
#include "serial_moe.hpp"
#include "ops/gelu.hpp"
#include "tensor/gemm.hpp"

namespace meshtp {
namespace {

using testing::check_gradient;
using testing::dot;
using testing::error_message;
using testing::kFdTol;
using testing::SerialMoe;
using testing::test_tensor;

TEST(MoeRouter, ChoosesTheLargestLogitsAndSoftmaxesThem) {
  // Token 0: logits 0, 2, 1, 2 → experts 1 and 3 (tie at 2: lower index first), gates ½, ½.
  // Token 1: logits 3, 0, 0, 1 → experts 0 and 3, gates σ(2), σ(−2).
  const Tensor logits({2, 4}, std::vector<float>{0, 2, 1, 2, 3, 0, 0, 1});
  const MoeRouting r = moe_route(logits.matrix(), 2, 0.0);
  EXPECT_EQ(r.expert, (std::vector<std::int32_t>{1, 3, 0, 3}));
  EXPECT_FLOAT_EQ(r.gate[0], 0.5f);
  EXPECT_FLOAT_EQ(r.gate[1], 0.5f);
  EXPECT_NEAR(r.gate[2], 1.0 / (1.0 + std::exp(-2.0)), 1e-7);
  EXPECT_NEAR(r.gate[3], 1.0 / (1.0 + std::exp(2.0)), 1e-7);
  EXPECT_EQ(r.counts, (std::vector<std::int64_t>{1, 1, 0, 2}));
  EXPECT_EQ(r.kept, (std::vector<std::uint8_t>{1, 1, 1, 1}));
  const double e = std::exp(1.0), z = 1 + 2 * e * e + e;  // token 0's softmax over all four
  EXPECT_NEAR(r.probs[1], e * e / z, 1e-7);
}

TEST(MoeRouter, CapacityDropsLaterTokensOfAFullExpert) {
  // 4 tokens all preferring expert 0, top-1, 2 experts, cf 1: capacity ⌈1·4·1/2⌉ = 2.
  const Tensor logits({4, 2}, std::vector<float>{1, 0, 2, 0, 3, 0, 0, 1});
  const MoeRouting r = moe_route(logits.matrix(), 1, 1.0);
  EXPECT_EQ(moe_capacity(4, 2, 1, 1.0), 2);
  EXPECT_EQ(r.kept, (std::vector<std::uint8_t>{1, 1, 0, 1}));
  EXPECT_EQ(r.counts, (std::vector<std::int64_t>{3, 1}));  // before the cut: the aux loss's c
  const MoeDispatch d = moe_dispatch(r);
  EXPECT_EQ(d.offsets, (std::vector<std::int64_t>{0, 2, 3}));
  EXPECT_EQ(d.token_of, (std::vector<std::int64_t>{0, 1, 3}));
  EXPECT_EQ(d.row_of, (std::vector<std::int64_t>{0, 1, -1, 2}));
  // The dropped token's output is 0.
  const Tensor yp({3, 2}, std::vector<float>{1, 1, 2, 2, 3, 3});
  Tensor y({4, 2}, 9.0f);
  moe_combine(y.matrix(), yp.matrix(), r, d);
  EXPECT_EQ(y.at({2, 0}), 0.0f);
  EXPECT_EQ(y.at({3, 1}), 3.0f);  // top-1: the gate is 1
}

TEST(MoeRouter, UniformRoutingGivesAnAuxLossOfAlpha) {
  const Tensor logits({4, 2}, std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0});
  const MoeRouting r = moe_route(logits.matrix(), 1, 0.0);  // ties → expert 0 for everyone
  EXPECT_EQ(r.counts, (std::vector<std::int64_t>{4, 0}));
  // p = ½ everywhere: aux = α·2/(16·1)·(4·2 + 0) = α.
  EXPECT_NEAR(moe_aux_loss(r, r.counts, 4, 0.01), 0.01, 1e-12);
  const std::vector<std::int64_t> balanced{2, 2};
  EXPECT_NEAR(moe_aux_loss(r, balanced, 4, 0.01), 0.01, 1e-12);
}

// Forced balance: token n takes experts (n·k + j) mod E whatever its logits, gated by the
// softmax over those experts' logits; every expert gets N·k/E assignments.
TEST(MoeRouter, ForcedBalanceIsCyclicAndGatesTheChosenLogits) {
  // Token 0: experts 0, 1 (logits 0, 2: gates σ(−2), σ(2)); token 1: experts 2, 3; token 2:
  // experts 0, 1 again; token 3: 2, 3 — although every token prefers expert 3.
  const Tensor logits({4, 4}, std::vector<float>{0, 2, 1, 5, 3, 0, 0, 9, 1, 1, 0, 7, 0, 0, 0, 8});
  const MoeRouting r = moe_route(logits.matrix(), 2, 0.0, true);
  EXPECT_EQ(r.expert, (std::vector<std::int32_t>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(r.counts, (std::vector<std::int64_t>{2, 2, 2, 2}));
  EXPECT_NEAR(r.gate[0], 1.0 / (1.0 + std::exp(2.0)), 1e-7);
  EXPECT_NEAR(r.gate[1], 1.0 / (1.0 + std::exp(-2.0)), 1e-7);
  EXPECT_NEAR(r.gate[4], 0.5, 1e-7);
  const MoeRouting top = moe_route(logits.matrix(), 2, 0.0);
  EXPECT_EQ(top.counts[3], 4);  // unforced, every token takes expert 3
  // 3 tokens × top-2 over 4 experts: counts within one of each other.
  const Tensor three({3, 4}, 0.0f);
  EXPECT_EQ(moe_route(three.matrix(), 2, 0.0, true).counts,
            (std::vector<std::int64_t>{2, 2, 1, 1}));
}

TEST(MoeRouter, RefusesBadInputNamingTheValues) {
  const Tensor logits({2, 4}, 0.0f);
  EXPECT_EQ(error_message([&] { (void)moe_route(logits.matrix(), 5, 0.0); }),
            "moe router: top_k=5 must be between 1 and the number of experts 4");
  EXPECT_EQ(error_message([&] { (void)moe_route(logits.matrix(), 0, 0.0); }),
            "moe router: top_k=0 must be between 1 and the number of experts 4");
  EXPECT_EQ(error_message([&] { (void)moe_route(logits.matrix(), 2, -1.0); }),
            "moe router: capacity_factor=-1 must be ≥ 0 (0: dropless)");
  const MoeRouting r = moe_route(logits.matrix(), 2, 0.0);
  const std::vector<std::int64_t> three{1, 1, 1};
  EXPECT_EQ(error_message([&] { (void)moe_aux_loss(r, three, 2, 0.01); }),
            "moe aux loss: 3 global counts for 4 experts");
}

// The k-th and (k+1)-th largest logits of row n apart by at least `gap`.
bool separated(const SerialMoe& m, const Tensor& logits, std::int64_t n, float gap) {
  std::vector<float> l(logits.data() + n * m.E, logits.data() + (n + 1) * m.E);
  std::sort(l.begin(), l.end(), std::greater<>());
  return l[m.k - 1] - l[m.k] >= gap;
}

// Tokens whose top-k set no finite-difference step can change: a step of 2h = 2⁻⁴ in one
// element of x or W_r (|values| ≤ 2) moves a logit by at most 2⁻³, so rows of x are redrawn
// until the k-th and (k+1)-th logits are 0.5 apart.
SerialMoe make_moe(double cf, double alpha) {
  SerialMoe m{.N = 12, .h = 6, .E = 4, .F = 5, .k = 2, .cf = cf, .alpha = alpha};
  m.x = test_tensor({m.N, m.h}, 31);
  m.wr = test_tensor({m.E, m.h}, 32, 2.0f);
  m.w1 = test_tensor({m.E * m.F, m.h}, 33, 0.5f);
  m.w2 = test_tensor({m.E * m.h, m.F}, 34, 0.5f);
  std::uint64_t seed = 100;
  for (std::int64_t n = 0; n < m.N; ++n) {
    for (;;) {
      Tensor logits({m.N, m.E});
      gemm(m.x.matrix(), Trans::kNo, m.wr.matrix(), Trans::kYes, logits.matrix());
      if (separated(m, logits, n, 0.5f)) break;
      const Tensor row = test_tensor({1, m.h}, seed++);
      std::copy_n(row.data(), m.h, m.x.data() + n * m.h);
    }
  }
  return m;
}

// Each token's chosen experts as a set (their order within the top k moves nothing).
std::vector<std::int32_t> chosen_sets(const MoeRouting& r) {
  std::vector<std::int32_t> e = r.expert;
  for (std::int64_t n = 0; n < r.tokens; ++n)
    std::sort(e.begin() + n * r.top_k, e.begin() + (n + 1) * r.top_k);
  return e;
}

float gelu_scalar(float v) {
  Tensor in({1, 1}, std::vector<float>{v}), out({1, 1});
  gelu_forward(out.matrix(), in.matrix());
  return out[0];
}

TEST(MoeLayer, EqualsAPerTokenReference) {
  for (const double cf : {0.0, 1.0}) {
    SerialMoe m = make_moe(cf, 0.0);
    m.forward();
    // Per token, per chosen kept expert e: y += g · W2_e·gelu(W1_e·x), in double.
    for (std::int64_t n = 0; n < m.N; ++n) {
      std::vector<double> ref(static_cast<std::size_t>(m.h), 0.0);
      for (std::int64_t j = 0; j < m.k; ++j) {
        if (!m.routing.kept[n * m.k + j]) continue;
        const std::int64_t e = m.routing.expert[n * m.k + j];
        for (std::int64_t c = 0; c < m.h; ++c) {
          double out = 0;
          for (std::int64_t f = 0; f < m.F; ++f) {
            double pre = 0;
            for (std::int64_t i = 0; i < m.h; ++i)
              pre += static_cast<double>(m.w1.at({e * m.F + f, i})) * m.x.at({n, i});
            out += m.w2.at({e * m.h + c, f}) * gelu_scalar(static_cast<float>(pre));
          }
          ref[c] += m.routing.gate[n * m.k + j] * out;
        }
      }
      for (std::int64_t c = 0; c < m.h; ++c)
        EXPECT_NEAR(m.y.at({n, c}), ref[c], 1e-5) << "token " << n << " cf " << cf;
    }
    if (cf > 0) {  // 12 tokens × 2 over 4 experts at cf 1: capacity 6, and something dropped
      const auto dropped = std::count(m.routing.kept.begin(), m.routing.kept.end(), 0);
      EXPECT_GT(dropped, 0);
    }
  }
}

TEST(MoeLayer, GradientsMatchFiniteDifferences) {
  for (const double cf : {0.0, 1.0}) {
    SerialMoe m = make_moe(cf, 0.1);
    const Tensor dy = test_tensor({m.N, m.h}, 35);
    m.forward();
    const std::vector<std::int32_t> chosen = chosen_sets(m.routing);
    const std::vector<std::uint8_t> kept = m.routing.kept;
    Tensor dx({m.N, m.h}), dwr({m.E, m.h}), dw1({m.E * m.F, m.h}), dw2({m.E * m.h, m.F});
    m.backward(dy, dx, dwr, dw1, dw2);
    int flips = 0;
    const auto loss = [&] {
      const double aux = m.forward();
      flips += chosen_sets(m.routing) != chosen || m.routing.kept != kept;
      return dot(dy.values(), m.y.values()) + aux;
    };
    const struct {
      const char* name;
      Tensor* theta;
      const Tensor* grad;
    } params[] = {{"x", &m.x, &dx}, {"router", &m.wr, &dwr}, {"w1", &m.w1, &dw1},
                  {"w2", &m.w2, &dw2}};
    for (const auto& p : params) {
      const auto r = check_gradient(p.theta->values(), p.grad->values(), loss);
      EXPECT_LT(r.error, kFdTol) << p.name << " cf " << cf << ": " << r;
    }
    EXPECT_EQ(flips, 0) << "a finite-difference step changed the routing: pick wider logits";
  }
}

// Forced balance keeps the gates' and the aux loss's gradients: the router still learns.
TEST(MoeLayer, ForcedBalanceGradientsMatchFiniteDifferences) {
  SerialMoe m = make_moe(0.0, 0.1);
  m.force_balance = true;
  const Tensor dy = test_tensor({m.N, m.h}, 36);
  m.forward();
  Tensor dx({m.N, m.h}), dwr({m.E, m.h}), dw1({m.E * m.F, m.h}), dw2({m.E * m.h, m.F});
  m.backward(dy, dx, dwr, dw1, dw2);
  const auto loss = [&] {
    const double aux = m.forward();
    return dot(dy.values(), m.y.values()) + aux;
  };
  for (const auto& [name, theta, grad] :
       {std::tuple{"x", &m.x, &dx}, std::tuple{"router", &m.wr, &dwr}}) {
    const auto r = check_gradient(theta->values(), grad->values(), loss);
    EXPECT_LT(r.error, kFdTol) << name << ": " << r;
  }
  EXPECT_GT(*std::max_element(dwr.values().begin(), dwr.values().end()), 0.0f);
}

}  // namespace
}  // namespace meshtp
