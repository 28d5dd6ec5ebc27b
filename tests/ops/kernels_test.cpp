// The fast kernels (ops/kernels.hpp) on every instruction set this CPU has: each against its
// naive reference, exp and GeLU against the exact math in double, and the fast ops'
// gradients against finite differences.
#include "ops/kernels.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <vector>

#include "adamw_reference.hpp"
#include "core/error.hpp"
#include "grad_check.hpp"
#include "ops/adamw.hpp"
#include "ops/attention.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/gelu.hpp"
#include "ops/layernorm.hpp"
#include "ops/residual.hpp"

namespace meshtp {
namespace {

using kernels::Isa;
using testing::check_gradient;
using testing::dot;
using testing::kFdTol;
using testing::test_tensor;

class Kernels : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!kernels::available(GetParam())) {
      GTEST_SKIP() << "this CPU has no " << kernels::to_string(GetParam());
    }
    previous_ = kernels::selected();
    kernels::select(GetParam());
  }
  void TearDown() override {
    if (kernels::available(GetParam())) kernels::select(previous_);
  }

 private:
  Isa previous_ = Isa::kPortable;
};

// Column counts that exercise the 8-wide body, the tail, and both together.
const std::vector<std::int64_t> kWidths = {1, 5, 8, 13, 64, 259};

// ½·x·(1 + tanh u) written as x/(1 + e^(−2u)): the same number, without the cancellation of
// 1 + tanh u that makes the tanh form lose all digits in double below x ≈ −6.
double gelu_exact(double x) {
  const double k = std::sqrt(2.0 / std::acos(-1.0));
  return x / (1.0 + std::exp(-2.0 * k * (x + 0.044715 * x * x * x)));
}
double gelu_grad_exact(double x) {
  const double k = std::sqrt(2.0 / std::acos(-1.0));
  const double th = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * k * (1 + 3 * 0.044715 * x * x);
}

TEST_P(Kernels, ExpIsWithinOneAndAHalfUlpOfExp) {
  std::vector<float> x, y;
  for (int i = 0; i <= 100000; ++i) x.push_back(-87.3f + 175.3f * static_cast<float>(i) / 100000.0f);
  y.resize(x.size());
  kernels::fast().scaled_exp(y.data(), x.data(), static_cast<std::int64_t>(x.size()), 0.0f, 1.0f,
                             false);
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double exact = std::exp(static_cast<double>(x[i]));
    worst = std::max(worst, std::abs(y[i] - exact) / exact);
  }
  EXPECT_LT(worst, 1.5e-7);
  // Below the normal range the result is 0, so exp(−∞) of padded/masked entries is exact.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> edge = {-inf, -1000.0f, -87.5f, 0.0f, std::nanf(""), 5.0f, 1.0f, 2.0f, 3.0f};
  std::vector<float> out(edge.size());
  kernels::fast().scaled_exp(out.data(), edge.data(), 9, 0.0f, 1.0f, false);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 1.0f);
  EXPECT_TRUE(std::isnan(out[4]));  // a NaN is not hidden
  EXPECT_NEAR(out[8], std::exp(3.0), 3e-7 * std::exp(3.0));  // the tail lane
}

TEST_P(Kernels, GeluIsWithinOnePpmOfTheExactFormula) {
  const std::int64_t n = 120001;  // x = −12 … 12
  std::vector<float> x(n), y(n), dx(n, 0.0f);
  const std::vector<float> ones(n, 1.0f);
  for (std::int64_t i = 0; i < n; ++i) x[i] = 12.0f * static_cast<float>(i - 60000) / 60000.0f;
  kernels::fast().gelu_forward(y.data(), x.data(), n);
  kernels::fast().gelu_backward(dx.data(), x.data(), ones.data(), n);
  double worst = 0, worst_tail = 0, worst_grad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    // Relative for x ≥ −3 (|gelu| ≥ 3.6e-3). Below, gelu = x·e^(−2|u|) inherits the rounding
    // of u in fp32 (relative error ≈ 2|u|·6e-8, 1e-5 at x = −7), so there the bound is absolute.
    const double g = gelu_exact(x[i]);
    const double err = std::abs(y[i] - g);
    if (x[i] >= -3.0f) {
      worst = std::max(worst, err / std::abs(g));
    } else {
      worst_tail = std::max(worst_tail, err);
    }
    // gelu' crosses 0 near x = −0.75: relative to max(1, |gelu'|)
    worst_grad = std::max(worst_grad, std::abs(dx[i] - gelu_grad_exact(x[i])) /
                                          std::max(1.0, std::abs(gelu_grad_exact(x[i]))));
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_LT(worst_tail, 1e-8);  // observed 2.3e-9; the scalar tanh-form reference errs by 4e-7 here
  EXPECT_LT(worst_grad, 1e-6);
  std::cout << "gelu: worst relative error " << worst << " (x ≥ −3), absolute " << worst_tail
            << " (x < −3); gelu': " << worst_grad << "\n";
}

TEST_P(Kernels, GeluAndBiasGeluMatchTheReference) {
  for (const std::int64_t C : kWidths) {
    const Tensor x = test_tensor({3, C}, 1, 6.0f), dy = test_tensor({3, C}, 2);
    const Tensor bias = test_tensor({C}, 3);
    Tensor y({3, C}), y_ref({3, C}), dx = test_tensor({3, C}, 4), dx_ref = dx;
    gelu_forward(y.matrix(), x.matrix());
    gelu_forward_reference(y_ref.matrix(), x.matrix());
    EXPECT_LT(max_relative_error(y.values(), y_ref.values()), 1e-6) << "C=" << C;
    gelu_backward(dx.matrix(), x.matrix(), dy.matrix());
    gelu_backward_reference(dx_ref.matrix(), x.matrix(), dy.matrix());
    EXPECT_LT(max_relative_error(dx.values(), dx_ref.values()), 1e-6) << "C=" << C;
    // bias + GeLU fused = bias add, then GeLU
    Tensor pre = x, pre_ref = x;
    for (std::int64_t r = 0; r < 3; ++r) {
      for (std::int64_t c = 0; c < C; ++c) pre_ref.at({r, c}) += bias[c];
    }
    bias_gelu_forward(y.matrix(), pre.matrix(), bias.values());
    gelu_forward_reference(y_ref.matrix(), pre_ref.matrix());
    EXPECT_EQ(max_relative_error(pre.values(), pre_ref.values()), 0.0) << "C=" << C;
    EXPECT_LT(max_relative_error(y.values(), y_ref.values()), 1e-6) << "C=" << C;
  }
}

TEST_P(Kernels, LayerNormMatchesTheReferenceEvenFarFromZero) {
  for (const std::int64_t C : kWidths) {
    for (const float offset : {0.0f, 300.0f}) {
      const Tensor x = test_tensor({4, C}, 5, 2.0f, offset), dy = test_tensor({4, C}, 6);
      const Tensor w = test_tensor({C}, 7, 1.0f, 1.0f), b = test_tensor({C}, 8);
      Tensor y({4, C}), y_ref({4, C}), mean({4}), rstd({4}), mean_ref({4}), rstd_ref({4});
      layernorm_forward(y.matrix(), mean.values(), rstd.values(), x.matrix(), w.values(),
                        b.values());
      layernorm_forward_reference(y_ref.matrix(), mean_ref.values(), rstd_ref.values(),
                                  x.matrix(), w.values(), b.values());
      EXPECT_LT(max_relative_error(y.values(), y_ref.values()), 2e-6) << "C=" << C;
      EXPECT_LT(max_relative_error(rstd.values(), rstd_ref.values()), 1e-6) << "C=" << C;
      EXPECT_EQ(max_relative_error(mean.values(), mean_ref.values()), 0.0) << "C=" << C;
      Tensor dx = test_tensor({4, C}, 9), dx_ref = dx, dw = test_tensor({C}, 10), dw_ref = dw,
             db = test_tensor({C}, 11), db_ref = db;
      layernorm_backward(dx.matrix(), dw.values(), db.values(), dy.matrix(), x.matrix(),
                         w.values(), mean.values(), rstd.values());
      layernorm_backward_reference(dx_ref.matrix(), dw_ref.values(), db_ref.values(), dy.matrix(),
                                   x.matrix(), w.values(), mean.values(), rstd.values());
      EXPECT_LT(max_relative_error(dx.values(), dx_ref.values()), 1e-5) << "C=" << C;
      EXPECT_LT(max_relative_error(dw.values(), dw_ref.values()), 1e-6) << "C=" << C;
      EXPECT_EQ(max_relative_error(db.values(), db_ref.values()), 0.0) << "C=" << C;
    }
  }
}

TEST_P(Kernels, ResidualLayerNormEqualsResidualThenLayerNorm) {
  const std::int64_t C = 37;
  const Tensor a = test_tensor({3, C}, 1), b = test_tensor({3, C}, 2);
  const Tensor w = test_tensor({C}, 3), bias = test_tensor({C}, 4);
  Tensor sum({3, C}), y({3, C}), mean({3}), rstd({3});
  residual_layernorm_forward(sum.matrix(), y.matrix(), mean.values(), rstd.values(), a.matrix(),
                             b.matrix(), w.values(), bias.values());
  Tensor sum_ref({3, C}), y_ref({3, C}), mean_ref({3}), rstd_ref({3});
  residual_forward_reference(sum_ref.matrix(), a.matrix(), b.matrix());
  layernorm_forward_reference(y_ref.matrix(), mean_ref.values(), rstd_ref.values(),
                              sum_ref.matrix(), w.values(), bias.values());
  EXPECT_EQ(max_relative_error(sum.values(), sum_ref.values()), 0.0);
  EXPECT_LT(max_relative_error(y.values(), y_ref.values()), 2e-6);
}

TEST_P(Kernels, AttentionMatchesTheFullProductReference) {
  // T = 130 ≥ 128 runs the causal blocks (64 query rows each, the last one partial).
  for (const std::int64_t T : {5, 130}) {
    const std::int64_t B = 2, NH = 2, HD = 3, Cp = NH * HD;
    const Tensor qkv = test_tensor({B * T, 3 * Cp}, 12, 2.0f), dout = test_tensor({B * T, Cp}, 13);
    Tensor out({B * T, Cp}), out_ref({B * T, Cp});
    Tensor att({attention_att_size(B, T, NH)}), att_ref({attention_att_size(B, T, NH)});
    attention_forward(out.matrix(), att.values(), qkv.matrix(), B, T, NH);
    attention_forward_reference(out_ref.matrix(), att_ref.values(), qkv.matrix(), B, T, NH);
    EXPECT_LT(max_relative_error(out.values(), out_ref.values()), 1e-6) << "T=" << T;
    EXPECT_LT(max_relative_error(att.values(), att_ref.values()), 1e-6) << "T=" << T;
    Tensor dqkv = test_tensor({B * T, 3 * Cp}, 14), dqkv_ref = dqkv, scratch({T * T});
    attention_backward(dqkv.matrix(), scratch.values(), dout.matrix(), qkv.matrix(), att.values(),
                       B, T, NH);
    attention_backward_reference(dqkv_ref.matrix(), scratch.values(), dout.matrix(), qkv.matrix(),
                                 att.values(), B, T, NH);
    EXPECT_LT(max_relative_error(dqkv.values(), dqkv_ref.values()), 2e-6) << "T=" << T;
  }
}

TEST_P(Kernels, CrossEntropyMatchesTheReference) {
  for (const std::int64_t V : kWidths) {
    const Tensor logits = test_tensor({5, V}, 15, 8.0f);
    std::vector<std::int32_t> targets(5);
    for (std::size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<std::int32_t>((7 * i) % V);
    Tensor lse({5}), lse_ref({5});
    const double loss = cross_entropy_forward(lse.values(), logits.matrix(), targets);
    const double loss_ref = cross_entropy_forward_reference(lse_ref.values(), logits.matrix(), targets);
    EXPECT_NEAR(loss, loss_ref, 1e-6 * std::max(1.0, std::abs(loss_ref))) << "V=" << V;
    EXPECT_LT(max_relative_error(lse.values(), lse_ref.values()), 1e-6) << "V=" << V;
    Tensor d = test_tensor({5, V}, 16), d_ref = d;
    cross_entropy_backward(d.matrix(), logits.matrix(), lse.values(), targets, 0.5f);
    cross_entropy_backward_reference(d_ref.matrix(), logits.matrix(), lse.values(), targets, 0.5f);
    EXPECT_LT(max_relative_error(d.values(), d_ref.values()), 1e-6) << "V=" << V;
  }
}

TEST_P(Kernels, AdamWMatchesTheReferenceOverSteps) {
  const std::int64_t n = 1037;
  Tensor p = test_tensor({n}, 17), p_ref = p, m({n}), m_ref({n}), v({n}), v_ref({n});
  for (int t = 1; t <= 5; ++t) {
    const Tensor g = test_tensor({n}, 18 + static_cast<std::uint64_t>(t), 0.1f);
    const kernels::AdamWStep s{.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                               .decay = 0.1f,
                               .bias1 = 1.0f - std::pow(0.9f, static_cast<float>(t)),
                               .bias2 = 1.0f - std::pow(0.95f, static_cast<float>(t))};
    adamw_update(p.values(), g.values(), m.values(), v.values(), s);
    test_support::adamw_reference(p_ref.values(), g.values(), m_ref.values(), v_ref.values(), s);
  }
  EXPECT_LT(max_relative_error(p.values(), p_ref.values()), 1e-6);
  EXPECT_LT(max_relative_error(m.values(), m_ref.values()), 1e-6);
  EXPECT_LT(max_relative_error(v.values(), v_ref.values()), 1e-6);
}

TEST_P(Kernels, FastGradientsMatchFiniteDifferences) {
  {  // bias + GeLU: d/dpre through the fused forward
    Tensor x = test_tensor({3, 11}, 20, 4.0f);
    const Tensor dy = test_tensor({3, 11}, 21), bias = test_tensor({11}, 22);
    Tensor y({3, 11}), dx({3, 11});
    const auto loss = [&] {
      Tensor pre = x;
      bias_gelu_forward(y.matrix(), pre.matrix(), bias.values());
      return dot(dy.values(), y.values());
    };
    Tensor pre = x;
    bias_gelu_forward(y.matrix(), pre.matrix(), bias.values());
    gelu_backward(dx.matrix(), pre.matrix(), dy.matrix());
    const auto r = check_gradient(x.values(), dx.values(), loss);
    EXPECT_LT(r.error, kFdTol) << "bias+gelu: " << r;
  }
  {  // LayerNorm
    Tensor x = test_tensor({3, 13}, 23, 2.0f);
    const Tensor dy = test_tensor({3, 13}, 24), w = test_tensor({13}, 25, 1.0f, 1.0f),
                 b = test_tensor({13}, 26);
    Tensor y({3, 13}), mean({3}), rstd({3}), dx({3, 13}), dw({13}), db({13});
    const auto loss = [&] {
      layernorm_forward(y.matrix(), mean.values(), rstd.values(), x.matrix(), w.values(),
                        b.values());
      return dot(dy.values(), y.values());
    };
    loss();
    layernorm_backward(dx.matrix(), dw.values(), db.values(), dy.matrix(), x.matrix(), w.values(),
                       mean.values(), rstd.values());
    const auto r = check_gradient(x.values(), dx.values(), loss);
    EXPECT_LT(r.error, kFdTol) << "layernorm dx: " << r;
  }
  {  // attention with causal blocks
    const std::int64_t B = 1, T = 130, NH = 1, HD = 2;
    Tensor qkv = test_tensor({B * T, 3 * NH * HD}, 27, 1.0f);
    const Tensor dout = test_tensor({B * T, NH * HD}, 28);
    Tensor out({B * T, NH * HD}), att({attention_att_size(B, T, NH)}), dqkv({B * T, 3 * NH * HD}),
        scratch({T * T});
    const auto loss = [&] {
      attention_forward(out.matrix(), att.values(), qkv.matrix(), B, T, NH);
      return dot(dout.values(), out.values());
    };
    loss();
    attention_backward(dqkv.matrix(), scratch.values(), dout.matrix(), qkv.matrix(), att.values(),
                       B, T, NH);
    const auto r = check_gradient(qkv.values(), dqkv.values(), loss);
    EXPECT_LT(r.error, kFdTol) << "attention dqkv: " << r;
  }
  {  // cross-entropy
    Tensor logits = test_tensor({4, 19}, 29, 3.0f);
    const std::vector<std::int32_t> targets = {0, 18, 7, 7};
    Tensor lse({4}), d({4, 19});
    const auto loss = [&] { return cross_entropy_forward(lse.values(), logits.matrix(), targets); };
    loss();
    cross_entropy_backward(d.matrix(), logits.matrix(), lse.values(), targets);
    const auto r = check_gradient(logits.values(), d.values(), loss);
    EXPECT_LT(r.error, kFdTol) << "cross-entropy: " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, Kernels, ::testing::ValuesIn(kernels::kIsas),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return std::string(kernels::to_string(info.param));
                         });

TEST(KernelsDispatch, RunsTheBestTheCpuHasAndRefusesWhatItLacks) {
  EXPECT_TRUE(kernels::available(Isa::kPortable));
  // AVX-512 implies AVX2 here: its kernels use 256-bit steps too
  if (kernels::available(Isa::kAvx512)) {
    EXPECT_TRUE(kernels::available(Isa::kAvx2));
  }
  Isa best = Isa::kPortable;
  for (const Isa isa : kernels::kIsas) {
    if (kernels::available(isa)) {
      EXPECT_STREQ(kernels::table(isa).name, kernels::to_string(isa));
      best = isa;
    } else {
      EXPECT_THROW(kernels::select(isa), Error);
    }
  }
  if (std::getenv("MESHTP_KERNELS") == nullptr) {
    EXPECT_EQ(kernels::selected(), best);
  }
  std::cout << "this CPU runs '" << kernels::fast().name << "'\n";
}

}  // namespace
}  // namespace meshtp
