#include "ops/attention.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/trace.hpp"
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

}  // namespace

std::int64_t attention_att_size(std::int64_t B, std::int64_t T, std::int64_t NH) {
  return B * NH * T * T;
}

std::int64_t attention_scratch_size(std::int64_t T) { return T * T; }

void attention_forward(MatrixView out, std::span<float> att, ConstMatrixView qkv, std::int64_t B,
                       std::int64_t T, std::int64_t NH) {
  const ScopedSpan span("attention", SpanKind::kCompute);
  const std::int64_t HD = check_attention("attention_forward", qkv, out, B, T, NH);
  MESHTP_CHECK(static_cast<std::int64_t>(att.size()) == attention_att_size(B, T, NH),
               "attention_forward: att has {} floats, expected B·NH·T·T = {}", att.size(),
               attention_att_size(B, T, NH));
  const std::int64_t Cp = NH * HD;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  for (std::int64_t b = 0; b < B; ++b) {
    const ConstMatrixView rows = qkv.block(b * T, 0, T, 3 * Cp);
    for (std::int64_t h = 0; h < NH; ++h) {
      const ConstMatrixView q = rows.block(0, h * HD, T, HD);
      const ConstMatrixView k = rows.block(0, Cp + h * HD, T, HD);
      const ConstMatrixView v = rows.block(0, 2 * Cp + h * HD, T, HD);
      const MatrixView p{att.data() + (b * NH + h) * T * T, T, T, T};
      // S = scale · Q·Kᵀ
      gemm(q, Trans::kNo, k, Trans::kYes, p, scale);
      // P = causal row softmax of S, in place; masked entries become exact zeros.
      for (std::int64_t t = 0; t < T; ++t) {
        float* pr = p.data + t * T;
        const float mx = detail::max_of(pr, t + 1);
        for (std::int64_t j = 0; j <= t; ++j) pr[j] = detail::exp_approx(pr[j] - mx);
        const float inv = 1.0f / detail::sum_of(pr, t + 1);
        for (std::int64_t j = 0; j <= t; ++j) pr[j] *= inv;
        std::fill(pr + t + 1, pr + T, 0.0f);
      }
      // O = P·V
      gemm(p, Trans::kNo, v, Trans::kNo, out.block(b * T, h * HD, T, HD));
    }
  }
}

void attention_backward(MatrixView dqkv, std::span<float> scratch, ConstMatrixView dout,
                        ConstMatrixView qkv, std::span<const float> att, std::int64_t B,
                        std::int64_t T, std::int64_t NH) {
  const ScopedSpan span("attention", SpanKind::kCompute);
  const std::int64_t HD = check_attention("attention_backward", qkv, dout, B, T, NH);
  MESHTP_CHECK(dqkv.rows == qkv.rows && dqkv.cols == qkv.cols,
               "attention_backward: dqkv is {}x{}, qkv is {}x{}", dqkv.rows, dqkv.cols, qkv.rows,
               qkv.cols);
  MESHTP_CHECK(static_cast<std::int64_t>(att.size()) == attention_att_size(B, T, NH),
               "attention_backward: att has {} floats, expected B·NH·T·T = {}", att.size(),
               attention_att_size(B, T, NH));
  MESHTP_CHECK(static_cast<std::int64_t>(scratch.size()) >= attention_scratch_size(T),
               "attention_backward: scratch has {} floats, needs T·T = {}", scratch.size(),
               attention_scratch_size(T));
  const std::int64_t Cp = NH * HD;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  const MatrixView ds{scratch.data(), T, T, T};
  for (std::int64_t b = 0; b < B; ++b) {
    const ConstMatrixView rows = qkv.block(b * T, 0, T, 3 * Cp);
    const MatrixView drows = dqkv.block(b * T, 0, T, 3 * Cp);
    for (std::int64_t h = 0; h < NH; ++h) {
      const ConstMatrixView q = rows.block(0, h * HD, T, HD);
      const ConstMatrixView k = rows.block(0, Cp + h * HD, T, HD);
      const ConstMatrixView v = rows.block(0, 2 * Cp + h * HD, T, HD);
      const ConstMatrixView p{att.data() + (b * NH + h) * T * T, T, T, T};
      const ConstMatrixView dout_h = dout.block(b * T, h * HD, T, HD);
      // dP = dO·Vᵀ
      gemm(dout_h, Trans::kNo, v, Trans::kYes, ds);
      // dV += Pᵀ·dO
      gemm(p, Trans::kYes, dout_h, Trans::kNo, drows.block(0, 2 * Cp + h * HD, T, HD), 1.0f, 1.0f);
      // dS = P ⊙ (dP − rowsum(dP ⊙ P)), in place; only j ≤ t is non-zero.
      for (std::int64_t t = 0; t < T; ++t) {
        const float* pr = p.data + t * T;
        float* dr = ds.data + t * T;
        const float dot = detail::dot_of(pr, dr, t + 1);
        for (std::int64_t j = 0; j <= t; ++j) dr[j] = pr[j] * (dr[j] - dot);
        std::fill(dr + t + 1, dr + T, 0.0f);
      }
      // dQ += scale · dS·K,   dK += scale · dSᵀ·Q
      gemm(ds, Trans::kNo, k, Trans::kNo, drows.block(0, h * HD, T, HD), scale, 1.0f);
      gemm(ds, Trans::kYes, q, Trans::kNo, drows.block(0, Cp + h * HD, T, HD), scale, 1.0f);
    }
  }
}

}  // namespace meshtp
