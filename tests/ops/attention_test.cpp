#include "ops/attention.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "grad_check.hpp"
#include "tensor/gemm.hpp"

namespace meshtp {
namespace {

using testing::check_gradient;
using testing::dot;
using testing::error_message;
using testing::kFdTol;
using testing::plus;
using testing::test_tensor;

// Plain loops in double, straight from the definition: for each (b, h, t),
// p_j = softmax_{j ≤ t}(q_t·k_j / √HD), out_t = Σ_{j ≤ t} p_j·v_j.
std::vector<double> attention_naive(const Tensor& qkv, std::int64_t B, std::int64_t T,
                                    std::int64_t NH) {
  const std::int64_t Cp = qkv.dim(1) / 3, HD = Cp / NH;
  const auto q = [&](std::int64_t b, std::int64_t t, std::int64_t h, std::int64_t d) {
    return static_cast<double>(qkv.at({b * T + t, h * HD + d}));
  };
  const auto k = [&](std::int64_t b, std::int64_t t, std::int64_t h, std::int64_t d) {
    return static_cast<double>(qkv.at({b * T + t, Cp + h * HD + d}));
  };
  const auto v = [&](std::int64_t b, std::int64_t t, std::int64_t h, std::int64_t d) {
    return static_cast<double>(qkv.at({b * T + t, 2 * Cp + h * HD + d}));
  };
  std::vector<double> out(static_cast<std::size_t>(B * T * Cp), 0.0);
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      for (std::int64_t t = 0; t < T; ++t) {
        std::vector<double> p(static_cast<std::size_t>(t + 1));
        for (std::int64_t j = 0; j <= t; ++j) {
          double s = 0;
          for (std::int64_t d = 0; d < HD; ++d) s += q(b, t, h, d) * k(b, j, h, d);
          p[j] = s / std::sqrt(static_cast<double>(HD));
        }
        const double mx = *std::max_element(p.begin(), p.end());
        double sum = 0;
        for (double& e : p) sum += (e = std::exp(e - mx));
        for (std::int64_t d = 0; d < HD; ++d) {
          double o = 0;
          for (std::int64_t j = 0; j <= t; ++j) o += p[j] / sum * v(b, j, h, d);
          out[(b * T + t) * Cp + h * HD + d] = o;
        }
      }
    }
  }
  return out;
}

struct Case {
  std::int64_t B, T, NH, HD;
};

TEST(Attention, ForwardMatchesPlainLoops) {
  for (const Case c : {Case{2, 5, 3, 4}, Case{1, 1, 1, 2}, Case{3, 9, 2, 8}, Case{1, 17, 4, 1}}) {
    const std::int64_t Cp = c.NH * c.HD;
    const Tensor qkv = test_tensor({c.B * c.T, 3 * Cp}, 1, 2.0f);
    Tensor out({c.B * c.T, Cp}, 9.0f);  // stale values must be overwritten
    Tensor att({attention_att_size(c.B, c.T, c.NH)});
    attention_forward(out.matrix(), att.values(), qkv.matrix(), c.B, c.T, c.NH);
    const std::vector<double> ref = attention_naive(qkv, c.B, c.T, c.NH);
    double worst = 0;
    for (std::int64_t i = 0; i < out.numel(); ++i)
      worst = std::max(worst, std::abs(out[i] - ref[i]));
    EXPECT_LT(worst, 1e-5) << "B=" << c.B << " T=" << c.T << " NH=" << c.NH << " HD=" << c.HD;
    // Saved probabilities: causal rows that sum to one.
    for (std::int64_t row = 0; row < c.B * c.NH * c.T; ++row) {
      const std::int64_t t = row % c.T;
      double sum = 0;
      for (std::int64_t j = 0; j < c.T; ++j) {
        const float p = att[row * c.T + j];
        if (j > t) {
          EXPECT_EQ(p, 0.0f) << "masked entry t=" << t << " j=" << j;
        }
        sum += p;
      }
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
  }
}

TEST(Attention, GradientMatchesFiniteDifferences) {
  for (const Case c : {Case{2, 5, 3, 4}, Case{1, 6, 1, 3}}) {
    const std::int64_t Cp = c.NH * c.HD;
    Tensor qkv = test_tensor({c.B * c.T, 3 * Cp}, 21, 1.5f);
    const Tensor dout = test_tensor({c.B * c.T, Cp}, 22);
    Tensor out({c.B * c.T, Cp}), att({attention_att_size(c.B, c.T, c.NH)});
    const auto loss = [&] {
      attention_forward(out.matrix(), att.values(), qkv.matrix(), c.B, c.T, c.NH);
      return dot(dout.values(), out.values());
    };
    loss();
    Tensor dqkv(qkv.shape()), scratch({attention_scratch_size(c.T)});
    attention_backward(dqkv.matrix(), scratch.values(), dout.matrix(), qkv.matrix(), att.values(),
                       c.B, c.T, c.NH);
    const auto r = check_gradient(qkv.values(), dqkv.values(), loss);
    EXPECT_LT(r.error, kFdTol) << "dqkv, B=" << c.B << " T=" << c.T << " NH=" << c.NH << ": " << r;
  }
}

TEST(Attention, BackwardAddsIntoDqkv) {
  const std::int64_t B = 2, T = 4, NH = 2, HD = 3, Cp = NH * HD;
  const Tensor qkv = test_tensor({B * T, 3 * Cp}, 1), dout = test_tensor({B * T, Cp}, 2);
  Tensor out({B * T, Cp}), att({attention_att_size(B, T, NH)}), scratch({T * T});
  attention_forward(out.matrix(), att.values(), qkv.matrix(), B, T, NH);
  Tensor dqkv(qkv.shape());
  attention_backward(dqkv.matrix(), scratch.values(), dout.matrix(), qkv.matrix(), att.values(), B,
                     T, NH);
  const Tensor prior = test_tensor(qkv.shape(), 3);
  Tensor acc = prior;
  attention_backward(acc.matrix(), scratch.values(), dout.matrix(), qkv.matrix(), att.values(), B,
                     T, NH);
  EXPECT_LT(max_relative_error(acc.values(), plus(prior, dqkv).values()), 1e-6);
}

// What a tensor-parallel rank does: the core on its own heads only. Heads [h0, h0+nh) of a
// 4-head qkv, packed into a local [B·T, 3·nh·HD] qkv, give exactly those heads' columns of
// the full output and of the full dqkv.
TEST(Attention, SubsetOfHeadsEqualsThoseHeadsOfTheFullRun) {
  const std::int64_t B = 2, T = 6, NH = 4, HD = 3, Cp = NH * HD;
  const Tensor qkv = test_tensor({B * T, 3 * Cp}, 31, 1.5f), dout = test_tensor({B * T, Cp}, 32);
  Tensor out({B * T, Cp}), att({attention_att_size(B, T, NH)}), scratch({T * T});
  Tensor dqkv(qkv.shape());
  attention_forward(out.matrix(), att.values(), qkv.matrix(), B, T, NH);
  attention_backward(dqkv.matrix(), scratch.values(), dout.matrix(), qkv.matrix(), att.values(), B,
                     T, NH);
  for (const std::int64_t nh : {1, 2}) {
    for (std::int64_t h0 = 0; h0 + nh <= NH; h0 += nh) {
      const std::int64_t w = nh * HD;
      Tensor local({B * T, 3 * w}), dout_l({B * T, w});
      for (std::int64_t part = 0; part < 3; ++part) {  // q, k, v
        copy(qkv.matrix().block(0, part * Cp + h0 * HD, B * T, w),
             local.matrix().block(0, part * w, B * T, w));
      }
      copy(dout.matrix().block(0, h0 * HD, B * T, w), dout_l.matrix());
      Tensor out_l({B * T, w}), att_l({attention_att_size(B, T, nh)}), dqkv_l(local.shape());
      attention_forward(out_l.matrix(), att_l.values(), local.matrix(), B, T, nh);
      attention_backward(dqkv_l.matrix(), scratch.values(), dout_l.matrix(), local.matrix(),
                         att_l.values(), B, T, nh);
      for (std::int64_t r = 0; r < B * T; ++r) {
        for (std::int64_t c = 0; c < w; ++c) {
          EXPECT_NEAR(out_l.at({r, c}), out.at({r, h0 * HD + c}), 1e-6);
          for (std::int64_t part = 0; part < 3; ++part) {
            EXPECT_NEAR(dqkv_l.at({r, part * w + c}), dqkv.at({r, part * Cp + h0 * HD + c}), 1e-6)
                << "nh=" << nh << " h0=" << h0 << " part=" << part;
          }
        }
      }
    }
  }
}

// What the chunked-overlap code does: the core on a row block (one batch element) of strided
// qkv / out / dqkv views inside wider buffers.
TEST(Attention, BatchChunkOnStridedViewsEqualsThoseRowsOfTheFullRun) {
  const std::int64_t B = 3, T = 4, NH = 2, HD = 2, Cp = NH * HD;
  const Tensor qkv = test_tensor({B * T, 3 * Cp}, 41), dout = test_tensor({B * T, Cp}, 42);
  Tensor out({B * T, Cp}), att({attention_att_size(B, T, NH)}), scratch({T * T});
  Tensor dqkv(qkv.shape());
  attention_forward(out.matrix(), att.values(), qkv.matrix(), B, T, NH);
  attention_backward(dqkv.matrix(), scratch.values(), dout.matrix(), qkv.matrix(), att.values(), B,
                     T, NH);
  // Batch element 1, held at column offset 2 of buffers 5 columns wider than needed.
  Tensor qkv_wide({T, 3 * Cp + 5}), out_wide({T, Cp + 5}), dout_wide({T, Cp + 5});
  Tensor dqkv_wide({T, 3 * Cp + 5});
  copy(qkv.matrix().block(T, 0, T, 3 * Cp), qkv_wide.matrix().block(0, 2, T, 3 * Cp));
  copy(dout.matrix().block(T, 0, T, Cp), dout_wide.matrix().block(0, 2, T, Cp));
  Tensor att1({attention_att_size(1, T, NH)});
  attention_forward(out_wide.matrix().block(0, 2, T, Cp), att1.values(),
                    qkv_wide.matrix().block(0, 2, T, 3 * Cp), 1, T, NH);
  attention_backward(dqkv_wide.matrix().block(0, 2, T, 3 * Cp), scratch.values(),
                     dout_wide.matrix().block(0, 2, T, Cp),
                     qkv_wide.matrix().block(0, 2, T, 3 * Cp), att1.values(), 1, T, NH);
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t c = 0; c < Cp; ++c) {
      EXPECT_NEAR(out_wide.at({t, 2 + c}), out.at({T + t, c}), 1e-6);
    }
    for (std::int64_t c = 0; c < 3 * Cp; ++c) {
      EXPECT_NEAR(dqkv_wide.at({t, 2 + c}), dqkv.at({T + t, c}), 1e-6);
    }
    EXPECT_EQ(dqkv_wide.at({t, 0}), 0.0f);  // outside the block: untouched
  }
}

TEST(Attention, FlopsAreTheSpecsTwelveBSSquaredH) {
  // Forward 2 and backward 4 T×T products per (b, h): 12·B·T²·(NH·HD) FLOPs in all.
  const std::int64_t B = 2, T = 8, NH = 2, HD = 4, Cp = NH * HD;
  const Tensor qkv = test_tensor({B * T, 3 * Cp}, 1), dout = test_tensor({B * T, Cp}, 2);
  Tensor out({B * T, Cp}), att({attention_att_size(B, T, NH)}), scratch({T * T});
  Tensor dqkv(qkv.shape());
  const ComputeLedger before = compute_ledger();
  attention_forward(out.matrix(), att.values(), qkv.matrix(), B, T, NH);
  attention_backward(dqkv.matrix(), scratch.values(), dout.matrix(), qkv.matrix(), att.values(), B,
                     T, NH);
  EXPECT_EQ(compute_ledger().gemm_calls - before.gemm_calls, 6 * B * NH);
  EXPECT_DOUBLE_EQ(compute_ledger().flops - before.flops, 12.0 * B * T * T * Cp);
}

TEST(Attention, RejectsShapesThatDoNotSplitIntoHeads) {
  const Tensor qkv({8, 30});
  Tensor out({8, 10}), att({attention_att_size(2, 4, 4)});
  EXPECT_NE(error_message([&] {
              attention_forward(out.matrix(), att.values(), qkv.matrix(), 2, 4, 4);
            }).find("qkv width 30 is not 3·NH·HD for NH=4 heads"),
            std::string::npos);
  Tensor att2({attention_att_size(2, 4, 5)});
  EXPECT_NE(error_message([&] {
              attention_forward(out.matrix(), att2.values(), qkv.matrix(), 4, 4, 5);
            }).find("qkv has 8 rows, expected B·T = 4·4 = 16"),
            std::string::npos);
  Tensor dqkv({8, 30}), small({3});
  const Tensor dout({8, 10});
  Tensor att5({attention_att_size(2, 4, 5)});
  EXPECT_NE(error_message([&] {
              attention_backward(dqkv.matrix(), small.values(), dout.matrix(), qkv.matrix(),
                                 att5.values(), 2, 4, 5);
            }).find("scratch has 3 floats, needs T·T = 16"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtp
