// The Llama-family elementwise ops: RMSNorm (ops/rmsnorm.hpp, and its phase split over
// feature shards), SwiGLU (ops/swiglu.hpp) and rotary position embedding (ops/rope.hpp),
// against plain loops in double and finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "core/simulation.hpp"
#include "grad_check.hpp"
#include "ops/rmsnorm.hpp"
#include "ops/rope.hpp"
#include "ops/swiglu.hpp"

namespace meshtp {
namespace {

using testing::check_gradient;
using testing::dot;
using testing::error_message;
using testing::kFdTol;
using testing::plus;
using testing::test_tensor;

bool mentions(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

// ---- RMSNorm -----------------------------------------------------------------------------

TEST(RmsNorm, ForwardMatchesPlainLoopsAndSavesR) {
  const std::int64_t N = 5, C = 24;
  const Tensor x = test_tensor({N, C}, 1, 2.0f, 0.5f), g = test_tensor({C}, 2, 1.0f, 1.0f);
  Tensor y({N, C}, 9.0f), r({N});
  for (const float eps : {kRmsNormEps, 1e-6f, 0.5f}) {
    rmsnorm_forward(y.matrix(), r.values(), x.matrix(), g.values(), eps);
    for (std::int64_t n = 0; n < N; ++n) {
      double sq = 0;
      for (std::int64_t c = 0; c < C; ++c) sq += double(x.at({n, c})) * x.at({n, c});
      const double rn = 1.0 / std::sqrt(sq / C + eps);
      EXPECT_NEAR(r[n], rn, 1e-6 * rn);
      for (std::int64_t c = 0; c < C; ++c) {
        EXPECT_NEAR(y.at({n, c}), x.at({n, c}) * rn * g[c], 2e-6) << "eps " << eps;
      }
    }
  }
}

TEST(RmsNorm, GradientMatchesFiniteDifferences) {
  const std::int64_t N = 4, C = 7;
  Tensor x = test_tensor({N, C}, 3, 1.5f, 0.25f), g = test_tensor({C}, 4, 1.0f, 1.0f);
  const Tensor dy = test_tensor({N, C}, 5);
  Tensor y({N, C}), r({N});
  const auto loss = [&] {
    rmsnorm_forward(y.matrix(), r.values(), x.matrix(), g.values());
    return dot(dy.values(), y.values());
  };
  loss();
  Tensor dx({N, C}), dg({C});
  rmsnorm_backward(dx.matrix(), dg.values(), dy.matrix(), x.matrix(), g.values(), r.values());
  const auto rx = check_gradient(x.values(), dx.values(), loss);
  EXPECT_LT(rx.error, kFdTol) << "dx: " << rx;
  const auto rg = check_gradient(g.values(), dg.values(), loss);
  EXPECT_LT(rg.error, kFdTol) << "dg: " << rg;
  // The backward adds.
  const Tensor prior_x = test_tensor({N, C}, 6), prior_g = test_tensor({C}, 7);
  Tensor ax = prior_x, ag = prior_g;
  rmsnorm_backward(ax.matrix(), ag.values(), dy.matrix(), x.matrix(), g.values(), r.values());
  EXPECT_LT(max_relative_error(ax.values(), plus(prior_x, dx).values()), 1e-6);
  EXPECT_LT(max_relative_error(ag.values(), plus(prior_g, dg).values()), 1e-6);
}

// The phases over 1, 2 and 4 feature shards, the sums added by hand between them (what the
// sharded layer's all-reduce does), equal the whole op.
TEST(RmsNorm, PhasesOverFeatureShardsEqualTheWholeOp) {
  const std::int64_t N = 3, C = 16;
  const Tensor x = test_tensor({N, C}, 8, 2.0f), g = test_tensor({C}, 9, 1.0f, 1.0f);
  const Tensor dy = test_tensor({N, C}, 10);
  Tensor y({N, C}), r({N}), dx({N, C}), dg({C});
  rmsnorm_forward(y.matrix(), r.values(), x.matrix(), g.values());
  rmsnorm_backward(dx.matrix(), dg.values(), dy.matrix(), x.matrix(), g.values(), r.values());
  for (const int shards : {1, 2, 4}) {
    const std::int64_t c = C / shards;
    Tensor ys({N, C}), rs({N}), dxs({N, C}), dgs({C});
    std::vector<double> total(N, 0.0), part(N);
    const auto cols = [&](int s) { return std::pair{s * c, c}; };
    for (int s = 0; s < shards; ++s) {
      rmsnorm_shard_forward_sums(x.matrix().block(0, cols(s).first, N, c), part);
      for (std::int64_t n = 0; n < N; ++n) total[n] += part[n];
    }
    for (int s = 0; s < shards; ++s) {
      rmsnorm_shard_forward_apply(ys.matrix().block(0, s * c, N, c), rs.values(),
                                  x.matrix().block(0, s * c, N, c), g.values().subspan(s * c, c),
                                  total, C);
    }
    std::fill(total.begin(), total.end(), 0.0);
    for (int s = 0; s < shards; ++s) {
      rmsnorm_shard_backward_sums(
          part, dgs.values().subspan(s * c, c), dy.matrix().block(0, s * c, N, c),
          x.matrix().block(0, s * c, N, c), g.values().subspan(s * c, c), rs.values());
      for (std::int64_t n = 0; n < N; ++n) total[n] += part[n];
    }
    for (int s = 0; s < shards; ++s) {
      rmsnorm_shard_backward_apply(
          dxs.matrix().block(0, s * c, N, c), dy.matrix().block(0, s * c, N, c),
          x.matrix().block(0, s * c, N, c), g.values().subspan(s * c, c), rs.values(), total, C);
    }
    EXPECT_LT(max_relative_error(ys.values(), y.values()), 1e-6) << shards;
    EXPECT_LT(max_relative_error(rs.values(), r.values()), 1e-6) << shards;
    EXPECT_LT(max_relative_error(dxs.values(), dx.values()), 1e-6) << shards;
    EXPECT_LT(max_relative_error(dgs.values(), dg.values()), 1e-6) << shards;
  }
}

TEST(RmsNorm, RejectsBadShapesNamingTheValues) {
  const Tensor x({4, 6}), g5({5}), g({6});
  Tensor y({4, 6}), r({4}), r3({3}), y2({4, 5}), dg({6});
  EXPECT_TRUE(mentions(
      error_message([&] { rmsnorm_forward(y.matrix(), r.values(), x.matrix(), g5.values()); }),
      "weight g has 5 values, expected C=6"));
  EXPECT_TRUE(mentions(
      error_message([&] { rmsnorm_forward(y.matrix(), r3.values(), x.matrix(), g.values()); }),
      "r has 3 values, expected N=4"));
  EXPECT_TRUE(mentions(
      error_message([&] { rmsnorm_forward(y2.matrix(), r.values(), x.matrix(), g.values()); }),
      "output is 4x5, x is 4x6"));
  EXPECT_TRUE(mentions(
      error_message([&] { rmsnorm_forward(y.matrix(), r.values(), x.matrix(), g.values(), 0.0f); }),
      "eps=0 must be positive"));
  std::vector<double> sums(3);
  EXPECT_TRUE(mentions(error_message([&] { rmsnorm_shard_forward_sums(x.matrix(), sums); }),
                       "3 sums for 4 rows"));
  std::vector<double> sums4(4);
  EXPECT_TRUE(mentions(error_message([&] {
                         rmsnorm_shard_forward_apply(y.matrix(), r.values(), x.matrix(), g.values(),
                                                     sums4, 5);
                       }),
                       "c_global=5 is less than the local features 6"));
}

// ---- SwiGLU ------------------------------------------------------------------------------

TEST(SwiGlu, ForwardMatchesPlainLoops) {
  const std::int64_t N = 6, F = 11;
  const Tensor x = test_tensor({N, 2 * F}, 11, 6.0f);  // σ over a wide range, both signs
  Tensor y({N, F}, 9.0f);
  swiglu_forward(y.matrix(), x.matrix());
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t f = 0; f < F; ++f) {
      const double a = x.at({n, f}), b = x.at({n, F + f});
      const double expected = a / (1.0 + std::exp(-a)) * b;
      EXPECT_NEAR(y.at({n, f}), expected, 1e-6 * (1.0 + std::abs(expected)));
    }
  }
}

TEST(SwiGlu, GradientMatchesFiniteDifferencesAndAdds) {
  const std::int64_t N = 3, F = 5;
  Tensor x = test_tensor({N, 2 * F}, 12, 3.0f);
  const Tensor dy = test_tensor({N, F}, 13);
  Tensor y({N, F});
  const auto loss = [&] {
    swiglu_forward(y.matrix(), x.matrix());
    return dot(dy.values(), y.values());
  };
  loss();
  Tensor dx({N, 2 * F});
  swiglu_backward(dx.matrix(), x.matrix(), dy.matrix());
  const auto rx = check_gradient(x.values(), dx.values(), loss);
  EXPECT_LT(rx.error, kFdTol) << "dx: " << rx;
  const Tensor prior = test_tensor({N, 2 * F}, 14);
  Tensor acc = prior;
  swiglu_backward(acc.matrix(), x.matrix(), dy.matrix());
  EXPECT_LT(max_relative_error(acc.values(), plus(prior, dx).values()), 1e-6);
}

TEST(SwiGlu, RejectsBadShapesNamingTheValues) {
  const Tensor x({4, 7}), x8({4, 8});
  Tensor y({4, 3}), y4({4, 4}), dx({4, 6});
  EXPECT_TRUE(mentions(error_message([&] { swiglu_forward(y.matrix(), x.matrix()); }),
                       "x is 4x7: its width is not 2·F"));
  EXPECT_TRUE(mentions(error_message([&] { swiglu_forward(y.matrix(), x8.matrix()); }),
                       "output is 4x3, expected 4x4"));
  EXPECT_TRUE(
      mentions(error_message([&] { swiglu_backward(dx.matrix(), x8.matrix(), y4.matrix()); }),
               "dx is 4x6, x is 4x8"));
}

// ---- RoPE --------------------------------------------------------------------------------

// The rotation from the definition, in double: pairs (i, i + HD/2) by angle p·theta^(−2i/HD).
std::vector<double> rope_naive(const Tensor& x, std::int64_t B, std::int64_t heads,
                               std::int64_t pos0, double theta) {
  const std::int64_t rows = x.dim(0), C = x.dim(1), T = rows / B, HD = C / heads, half = HD / 2;
  std::vector<double> y(static_cast<std::size_t>(rows * C));
  for (std::int64_t r = 0; r < rows; ++r) {
    const double p = static_cast<double>(pos0 + r % T);
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t i = 0; i < half; ++i) {
        const double angle = p * std::pow(theta, -2.0 * i / HD);
        const double u = x.at({r, h * HD + i}), v = x.at({r, h * HD + half + i});
        y[r * C + h * HD + i] = u * std::cos(angle) - v * std::sin(angle);
        y[r * C + h * HD + half + i] = v * std::cos(angle) + u * std::sin(angle);
      }
    }
  }
  return y;
}

TEST(Rope, ForwardMatchesPlainLoopsForBothThetas) {
  const std::int64_t B = 2, T = 9, heads = 3, HD = 8;
  for (const double theta : {kRopeTheta, kRopeThetaLlama3}) {
    for (const std::int64_t pos0 : {0, 1000}) {
      const Tensor x = test_tensor({B * T, heads * HD}, 21);
      Tensor y = x;
      const RopeTable table = rope_table(HD, pos0, T, theta);
      rope_forward(y.matrix(), table, B, heads);
      const std::vector<double> ref = rope_naive(x, B, heads, pos0, theta);
      for (std::int64_t i = 0; i < y.numel(); ++i) {
        EXPECT_NEAR(y[i], ref[i], 2e-6) << "theta " << theta << " pos0 " << pos0 << " at " << i;
      }
    }
  }
}

// Backward = rotation by −angle: the exact gradient of a rotation (its transpose), checked by
// finite differences; and backward after forward gives x back.
TEST(Rope, BackwardIsTheInverseRotationAndTheGradient) {
  const std::int64_t B = 2, T = 5, heads = 2, HD = 6;
  const RopeTable table = rope_table(HD, 3, T);
  Tensor x = test_tensor({B * T, heads * HD}, 22);
  const Tensor dy = test_tensor({B * T, heads * HD}, 23);
  Tensor y({B * T, heads * HD});
  const auto loss = [&] {
    y = x;
    rope_forward(y.matrix(), table, B, heads);
    return dot(dy.values(), y.values());
  };
  Tensor dx = dy;
  rope_backward(dx.matrix(), table, B, heads);
  const auto r = check_gradient(x.values(), dx.values(), loss);
  EXPECT_LT(r.error, kFdTol) << r;
  Tensor back = x;
  rope_forward(back.matrix(), table, B, heads);
  rope_backward(back.matrix(), table, B, heads);
  EXPECT_LT(max_relative_error(back.values(), x.values()), 1e-6);
}

// A context-parallel chunk of tokens [t0, t1) rotated with pos0 = t0 equals those rows of the
// whole sequence's rotation; and on the q columns of packed qkv (a strided view) it leaves
// the other columns alone.
TEST(Rope, ChunkAtAnOffsetEqualsThoseRowsOfTheWholeSequence) {
  const std::int64_t T = 12, heads = 2, HD = 4, C = heads * HD;
  const Tensor qkv = test_tensor({T, 3 * C}, 24);
  Tensor whole = qkv;
  rope_forward(whole.matrix().block(0, 0, T, C), rope_table(HD, 0, T), 1, heads);
  EXPECT_EQ(max_abs_diff(std::span<const float>(whole.values()).subspan(C, 2 * C),
                         std::span<const float>(qkv.values()).subspan(C, 2 * C)),
            0.0);  // row 0's k and v untouched
  const std::int64_t t0 = 5, t1 = 9;
  Tensor chunk({t1 - t0, 3 * C});
  copy(qkv.matrix().block(t0, 0, t1 - t0, 3 * C), chunk.matrix());
  rope_forward(chunk.matrix().block(0, 0, t1 - t0, C), rope_table(HD, t0, t1 - t0), 1, heads);
  for (std::int64_t t = t0; t < t1; ++t) {
    for (std::int64_t c = 0; c < 3 * C; ++c) {
      EXPECT_EQ(chunk.at({t - t0, c}), whole.at({t, c})) << "t=" << t << " c=" << c;
    }
  }
}

// The property RoPE exists for: q_m·k_n after rotation depends on m − n only.
TEST(Rope, RotatedDotProductDependsOnTheDistanceOnly) {
  const std::int64_t HD = 16;
  const Tensor q = test_tensor({1, HD}, 25), k = test_tensor({1, HD}, 26);
  const RopeTable table = rope_table(HD, 0, 64, kRopeThetaLlama3);
  const auto rotated_dot = [&](std::int64_t m, std::int64_t n) {
    Tensor qm({m + 1, HD}), kn({n + 1, HD});
    copy(q.matrix(), qm.matrix().block(m, 0, 1, HD));
    copy(k.matrix(), kn.matrix().block(n, 0, 1, HD));
    rope_forward(qm.matrix(), table, 1, 1);
    rope_forward(kn.matrix(), table, 1, 1);
    double s = 0;
    for (std::int64_t d = 0; d < HD; ++d) s += double(qm.at({m, d})) * kn.at({n, d});
    return s;
  };
  EXPECT_NEAR(rotated_dot(10, 3), rotated_dot(7, 0), 1e-5);
  EXPECT_NEAR(rotated_dot(40, 33), rotated_dot(7, 0), 1e-5);
  EXPECT_GT(std::abs(rotated_dot(10, 3) - rotated_dot(10, 4)), 1e-4);
}

TEST(Rope, RejectsBadShapesNamingTheValues) {
  EXPECT_TRUE(
      mentions(error_message([] { (void)rope_table(7, 0, 4); }), "head_dim=7 must be even"));
  EXPECT_TRUE(
      mentions(error_message([] { (void)rope_table(8, 0, 4, 1.0); }), "theta=1 must be above 1"));
  const RopeTable table = rope_table(4, 0, 3);
  Tensor x({8, 12});
  EXPECT_TRUE(mentions(error_message([&] { rope_forward(x.matrix(), table, 2, 2); }),
                       "x is 8x12, expected width heads·HD = 2·4 = 8"));
  EXPECT_TRUE(mentions(error_message([&] { rope_forward(x.matrix(), table, 2, 3); }),
                       "4 tokens per sequence, but the table covers 3 positions"));
  EXPECT_TRUE(mentions(error_message([&] { rope_backward(x.matrix(), table, 3, 3); }),
                       "x has 8 rows, not B·T for batch B=3"));
}

// ---- the simulated build ------------------------------------------------------------------

void no_clock_advance_llama(double /*seconds*/) {}

// Charged mode (core/simulation.hpp): each op charges its bytes once and computes nothing —
// RMSNorm LayerNorm's 3 and 6 touches per element (its sharded phase 1 the same, phase 2
// nothing), SwiGLU 3 and 7 per output element, RoPE 3 per rotated element.
TEST(LlamaOps, ChargedModeChargesTheBytesAndComputesNothing) {
  constexpr double kBytesPerS = 1e8;
  const std::int64_t N = 4, C = 8;
  const Tensor x = test_tensor({N, C}, 31), g = test_tensor({C}, 32), dy = test_tensor({N, C}, 33);
  Tensor y({N, C}, 5.0f), r({N}), dx({N, C}, 5.0f), dg({C}), sw({N, C / 2}, 5.0f);
  Tensor rot = x;
  const RopeTable table = rope_table(4, 0, N);
  const simhooks::Hooks saved = simhooks::hooks();
  simhooks::Hooks& h = simhooks::hooks();
  h.mode = simhooks::Mode::kCharged;
  h.advance = &no_clock_advance_llama;
  h.gemm = GemmModel(1e9);
  h.elementwise_bytes_per_s = kBytesPerS;
  std::vector<double> charged;
  const auto charge_of = [&](const std::function<void()>& f) {
    h.charged_s = 0;
    f();
    charged.push_back(h.charged_s);
  };
  std::vector<double> sums(N);
  charge_of([&] { rmsnorm_forward(y.matrix(), r.values(), x.matrix(), g.values()); });
  charge_of([&] {
    rmsnorm_backward(dx.matrix(), dg.values(), dy.matrix(), x.matrix(), g.values(), r.values());
  });
  charge_of([&] { rmsnorm_shard_forward_sums(x.matrix(), sums); });
  charge_of([&] {
    rmsnorm_shard_forward_apply(y.matrix(), r.values(), x.matrix(), g.values(), sums, C);
  });
  charge_of([&] { swiglu_forward(sw.matrix(), x.matrix()); });
  charge_of([&] { swiglu_backward(dx.matrix(), x.matrix(), dy.matrix().block(0, 0, N, C / 2)); });
  charge_of([&] { rope_forward(rot.matrix(), table, 1, 2); });
  simhooks::hooks() = saved;
  const double e = 4.0 * N * C / kBytesPerS;  // one touch of every element of x
  const std::vector<double> want{3 * e, 6 * e, 3 * e, 0, 3 * e / 2, 7 * e / 2, 3 * e};
  ASSERT_EQ(charged.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(charged[i], want[i], 1e-15) << i;
  for (const float v : y.values()) ASSERT_EQ(v, 5.0f);
  for (const float v : dx.values()) ASSERT_EQ(v, 5.0f);
  for (const float v : sw.values()) ASSERT_EQ(v, 5.0f);
  EXPECT_EQ(max_abs_diff(rot.values(), x.values()), 0.0);
}

}  // namespace
}  // namespace meshtp
