#include "ops/attention.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"
#include "ops/kernels.hpp"
#include "ops/vector_math_impl.hpp"
#include "tensor/gemm.hpp"

namespace meshtp {
namespace {

// Checks the views against (B, T, NH) and returns HD.
std::int64_t check_attention(const char* fn, ConstMatrixView qkv, ConstMatrixView out,
                             std::int64_t B, std::int64_t T, std::int64_t NH) {
  MESHTP_CHECK(B >= 1 && T >= 1 && NH >= 1, "{}: B={}, T={}, NH={} must all be positive", fn, B, T,
               NH);
  MESHTP_CHECK(qkv.rows == B * T, "{}: qkv has {} rows, expected B·T = {}·{} = {}", fn, qkv.rows, B,
               T, B * T);
  MESHTP_CHECK(qkv.cols % (3 * NH) == 0 && qkv.cols > 0,
               "{}: qkv width {} is not 3·NH·HD for NH={} heads", fn, qkv.cols, NH);
  const std::int64_t HD = qkv.cols / (3 * NH);
  MESHTP_CHECK(out.rows == B * T && out.cols == NH * HD,
               "{}: output is {}x{}, expected (B·T)x(NH·HD) = {}x{}", fn, out.rows, out.cols, B * T,
               NH * HD);
  return HD;
}

void check_att(const char* fn, std::span<const float> att, std::int64_t B, std::int64_t T,
               std::int64_t NH) {
  MESHTP_CHECK(static_cast<std::int64_t>(att.size()) == attention_att_size(B, T, NH),
               "{}: att has {} floats, expected B·NH·T·T = {}", fn, att.size(),
               attention_att_size(B, T, NH));
}

void check_backward(MatrixView dqkv, std::span<const float> scratch, ConstMatrixView qkv,
                    std::int64_t T) {
  MESHTP_CHECK(dqkv.rows == qkv.rows && dqkv.cols == qkv.cols,
               "attention_backward: dqkv is {}x{}, qkv is {}x{}", dqkv.rows, dqkv.cols, qkv.rows,
               qkv.cols);
  MESHTP_CHECK(static_cast<std::int64_t>(scratch.size()) >= attention_scratch_size(T),
               "attention_backward: scratch has {} floats, needs T·T = {}", scratch.size(),
               attention_scratch_size(T));
}

// Query rows per causal block: blocks [r0, r1) need keys [0, r1) only.
std::int64_t causal_block(std::int64_t T) { return T >= 128 ? 64 : T; }

// The T×HD views of head h of one sequence's qkv rows: q, k, v.
struct Head {
  ConstMatrixView q, k, v;
  Head(ConstMatrixView rows, std::int64_t Cp, std::int64_t HD, std::int64_t h)
      : q(rows.block(0, h * HD, rows.rows, HD)),
        k(rows.block(0, Cp + h * HD, rows.rows, HD)),
        v(rows.block(0, 2 * Cp + h * HD, rows.rows, HD)) {}
};

}  // namespace

std::int64_t attention_att_size(std::int64_t B, std::int64_t T, std::int64_t NH) {
  return B * NH * T * T;
}

std::int64_t attention_scratch_size(std::int64_t T) { return T * T; }

void attention_forward(MatrixView out, std::span<float> att, ConstMatrixView qkv, std::int64_t B,
                       std::int64_t T, std::int64_t NH) {
  const ScopedSpan span("attention", SpanKind::kCompute);
  const std::int64_t HD = check_attention("attention_forward", qkv, out, B, T, NH);
  check_att("attention_forward", att, B, T, NH);
  // Simulated build, charged mode: the time instead of the work (core/simulation.hpp). Two
  // T×T×HD products per (b, h) (core/gemm_model.hpp attention_seconds, as the planner prices
  // them), and the softmax over the scores.
  if (simhooks::charge_attention(
          static_cast<double>(T), static_cast<double>(HD), static_cast<double>(B * NH),
          /*backward=*/false, op_costs::bytes(B * NH * T * T, op_costs::kSoftmaxForwardTouches))) {
    return;
  }
  const std::int64_t Cp = NH * HD, bq = causal_block(T);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  const auto& kern = kernels::fast();
  for (std::int64_t b = 0; b < B; ++b) {
    const ConstMatrixView rows = qkv.block(b * T, 0, T, 3 * Cp);
    for (std::int64_t h = 0; h < NH; ++h) {
      const Head hd(rows, Cp, HD, h);
      const MatrixView p{att.data() + (b * NH + h) * T * T, T, T, T};
      for (std::int64_t r0 = 0; r0 < T; r0 += bq) {
        const std::int64_t r1 = std::min(T, r0 + bq), m = r1 - r0;
        const MatrixView pb = p.block(r0, 0, m, r1);
        // S = scale · Q[r0:r1]·K[0:r1]ᵀ, then the causal softmax of each row (0 past t).
        gemm(hd.q.block(r0, 0, m, HD), Trans::kNo, hd.k.block(0, 0, r1, HD), Trans::kYes, pb,
             scale);
        for (std::int64_t t = r0; t < r1; ++t) kern.softmax_row(p.data + t * T, t + 1, T);
        // O[r0:r1] = P[r0:r1, 0:r1]·V[0:r1]
        gemm(pb, Trans::kNo, hd.v.block(0, 0, r1, HD), Trans::kNo,
             out.block(b * T + r0, h * HD, m, HD));
      }
    }
  }
}

void attention_backward(MatrixView dqkv, std::span<float> scratch, ConstMatrixView dout,
                        ConstMatrixView qkv, std::span<const float> att, std::int64_t B,
                        std::int64_t T, std::int64_t NH) {
  const ScopedSpan span("attention", SpanKind::kCompute);
  const std::int64_t HD = check_attention("attention_backward", qkv, dout, B, T, NH);
  check_backward(dqkv, scratch, qkv, T);
  check_att("attention_backward", att, B, T, NH);
  // Four T×T×HD products per (b, h), and the softmax's backward.
  if (simhooks::charge_attention(
          static_cast<double>(T), static_cast<double>(HD), static_cast<double>(B * NH),
          /*backward=*/true, op_costs::bytes(B * NH * T * T, op_costs::kSoftmaxBackwardTouches))) {
    return;
  }
  const std::int64_t Cp = NH * HD, bq = causal_block(T);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  const MatrixView ds{scratch.data(), T, T, T};
  const auto& kern = kernels::fast();
  for (std::int64_t b = 0; b < B; ++b) {
    const ConstMatrixView rows = qkv.block(b * T, 0, T, 3 * Cp);
    const MatrixView drows = dqkv.block(b * T, 0, T, 3 * Cp);
    for (std::int64_t h = 0; h < NH; ++h) {
      const Head hd(rows, Cp, HD, h);
      const ConstMatrixView p{att.data() + (b * NH + h) * T * T, T, T, T};
      const MatrixView dq = drows.block(0, h * HD, T, HD);
      const MatrixView dk = drows.block(0, Cp + h * HD, T, HD);
      const MatrixView dv = drows.block(0, 2 * Cp + h * HD, T, HD);
      for (std::int64_t r0 = 0; r0 < T; r0 += bq) {
        const std::int64_t r1 = std::min(T, r0 + bq), m = r1 - r0;
        const ConstMatrixView pb = p.block(r0, 0, m, r1);
        const MatrixView dsb = ds.block(r0, 0, m, r1);
        const ConstMatrixView dout_b = dout.block(b * T + r0, h * HD, m, HD);
        // dP = dO·Vᵀ;  dV[0:r1] += Pᵀ·dO
        gemm(dout_b, Trans::kNo, hd.v.block(0, 0, r1, HD), Trans::kYes, dsb);
        gemm(pb, Trans::kYes, dout_b, Trans::kNo, dv.block(0, 0, r1, HD), 1.0f, 1.0f);
        // dS = P ⊙ (dP − rowsum(dP ⊙ P)); only j ≤ t is non-zero.
        for (std::int64_t t = r0; t < r1; ++t) {
          kern.softmax_row_backward(ds.data + t * T, p.data + t * T, t + 1, r1);
        }
        // dQ[r0:r1] += scale · dS·K[0:r1],   dK[0:r1] += scale · dSᵀ·Q[r0:r1]
        gemm(dsb, Trans::kNo, hd.k.block(0, 0, r1, HD), Trans::kNo, dq.block(r0, 0, m, HD), scale,
             1.0f);
        gemm(dsb, Trans::kYes, hd.q.block(r0, 0, m, HD), Trans::kNo, dk.block(0, 0, r1, HD), scale,
             1.0f);
      }
    }
  }
}

void attention_forward_reference(MatrixView out, std::span<float> att, ConstMatrixView qkv,
                                 std::int64_t B, std::int64_t T, std::int64_t NH) {
  const std::int64_t HD = check_attention("attention_forward", qkv, out, B, T, NH);
  check_att("attention_forward", att, B, T, NH);
  const std::int64_t Cp = NH * HD;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  for (std::int64_t b = 0; b < B; ++b) {
    const ConstMatrixView rows = qkv.block(b * T, 0, T, 3 * Cp);
    for (std::int64_t h = 0; h < NH; ++h) {
      const Head hd(rows, Cp, HD, h);
      const MatrixView p{att.data() + (b * NH + h) * T * T, T, T, T};
      gemm(hd.q, Trans::kNo, hd.k, Trans::kYes, p, scale);  // S = scale · Q·Kᵀ
      for (std::int64_t t = 0; t < T; ++t) {  // causal softmax, in place
        float* pr = p.data + t * T;
        const float mx = detail::max_of(pr, t + 1);
        for (std::int64_t j = 0; j <= t; ++j) pr[j] = detail::exp_approx(pr[j] - mx);
        const float inv = 1.0f / detail::sum_of(pr, t + 1);
        for (std::int64_t j = 0; j <= t; ++j) pr[j] *= inv;
        std::fill(pr + t + 1, pr + T, 0.0f);
      }
      gemm(p, Trans::kNo, hd.v, Trans::kNo, out.block(b * T, h * HD, T, HD));  // O = P·V
    }
  }
}

void attention_backward_reference(MatrixView dqkv, std::span<float> scratch, ConstMatrixView dout,
                                  ConstMatrixView qkv, std::span<const float> att, std::int64_t B,
                                  std::int64_t T, std::int64_t NH) {
  const std::int64_t HD = check_attention("attention_backward", qkv, dout, B, T, NH);
  check_backward(dqkv, scratch, qkv, T);
  check_att("attention_backward", att, B, T, NH);
  const std::int64_t Cp = NH * HD;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  const MatrixView ds{scratch.data(), T, T, T};
  for (std::int64_t b = 0; b < B; ++b) {
    const ConstMatrixView rows = qkv.block(b * T, 0, T, 3 * Cp);
    const MatrixView drows = dqkv.block(b * T, 0, T, 3 * Cp);
    for (std::int64_t h = 0; h < NH; ++h) {
      const Head hd(rows, Cp, HD, h);
      const ConstMatrixView p{att.data() + (b * NH + h) * T * T, T, T, T};
      const ConstMatrixView dout_h = dout.block(b * T, h * HD, T, HD);
      gemm(dout_h, Trans::kNo, hd.v, Trans::kYes, ds);  // dP = dO·Vᵀ
      gemm(p, Trans::kYes, dout_h, Trans::kNo, drows.block(0, 2 * Cp + h * HD, T, HD), 1.0f,
           1.0f);  // dV += Pᵀ·dO
      for (std::int64_t t = 0; t < T; ++t) {  // dS = P ⊙ (dP − rowsum(dP ⊙ P))
        const float* pr = p.data + t * T;
        float* dr = ds.data + t * T;
        const float dot = detail::dot_of(pr, dr, t + 1);
        for (std::int64_t j = 0; j <= t; ++j) dr[j] = pr[j] * (dr[j] - dot);
        std::fill(dr + t + 1, dr + T, 0.0f);
      }
      gemm(ds, Trans::kNo, hd.k, Trans::kNo, drows.block(0, h * HD, T, HD), scale, 1.0f);
      gemm(ds, Trans::kYes, hd.q, Trans::kNo, drows.block(0, Cp + h * HD, T, HD), scale, 1.0f);
    }
  }
}

}  // namespace meshtp
