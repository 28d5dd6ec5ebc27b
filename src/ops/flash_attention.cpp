#include "ops/flash_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"
#include "ops/kernels.hpp"
#include "ops/vector_math_impl.hpp"
#include "tensor/gemm.hpp"

namespace meshtp {
namespace {

constexpr float kNoKeys = -std::numeric_limits<float>::infinity();

// The sizes every entry point derives from its views.
struct FlashDims {
  std::int64_t B, NH, NKV, G, HD, Tq, Tk;
};

FlashDims flash_dims(const char* fn, ConstMatrixView q, ConstMatrixView k, ConstMatrixView v,
                     const FlashAttention& a) {
  MESHTP_CHECK(a.batch >= 1 && a.heads >= 1 && a.kv_heads >= 1,
               "{}: batch B={}, heads NH={}, kv_heads NKV={} must all be positive", fn, a.batch,
               a.heads, a.kv_heads);
  MESHTP_CHECK(a.heads % a.kv_heads == 0,
               "{}: heads NH={} is not a multiple of kv_heads NKV={} (each KV head serves NH/NKV "
               "query heads)",
               fn, a.heads, a.kv_heads);
  MESHTP_CHECK(a.block_q >= 1 && a.block_k >= 1, "{}: block_q={} and block_k={} must be positive",
               fn, a.block_q, a.block_k);
  MESHTP_CHECK(q.rows >= a.batch && q.rows % a.batch == 0,
               "{}: q has {} rows, not B·Tq for batch B={} (Tq ≥ 1)", fn, q.rows, a.batch);
  MESHTP_CHECK(k.rows >= a.batch && k.rows % a.batch == 0,
               "{}: k has {} rows, not B·Tk for batch B={} (Tk ≥ 1)", fn, k.rows, a.batch);
  MESHTP_CHECK(q.cols > 0 && q.cols % a.heads == 0, "{}: q width {} is not NH·HD for NH={} heads",
               fn, q.cols, a.heads);
  const std::int64_t HD = q.cols / a.heads;
  MESHTP_CHECK(k.cols == a.kv_heads * HD,
               "{}: k is {}x{}, expected width NKV·HD = {}·{} = {} (HD from q's width {} / NH={})",
               fn, k.rows, k.cols, a.kv_heads, HD, a.kv_heads * HD, q.cols, a.heads);
  MESHTP_CHECK(v.rows == k.rows && v.cols == k.cols, "{}: v is {}x{}, k is {}x{}: they must match",
               fn, v.rows, v.cols, k.rows, k.cols);
  return {.B = a.batch,
          .NH = a.heads,
          .NKV = a.kv_heads,
          .G = a.heads / a.kv_heads,
          .HD = HD,
          .Tq = q.rows / a.batch,
          .Tk = k.rows / a.batch};
}

void check_same(const char* fn, const char* what, ConstMatrixView x, const char* like,
                ConstMatrixView ref) {
  MESHTP_CHECK(x.rows == ref.rows && x.cols == ref.cols, "{}: {} is {}x{}, {} is {}x{}", fn, what,
               x.rows, x.cols, like, ref.rows, ref.cols);
}

void check_scratch(const char* fn, std::size_t size, const FlashAttention& a, const FlashDims& d) {
  const std::int64_t need = flash_attention_scratch_size(a, d.Tq, d.Tk, d.HD);
  MESHTP_CHECK(static_cast<std::int64_t>(size) >= need,
               "{}: scratch has {} floats, needs {} (flash_attention_scratch_size for Tq={}, "
               "Tk={}, HD={}, block_q={}, block_k={})",
               fn, size, need, d.Tq, d.Tk, d.HD, a.block_q, a.block_k);
}

void check_lse(const char* fn, std::size_t size, const FlashDims& d) {
  MESHTP_CHECK(static_cast<std::int64_t>(size) == d.B * d.NH * d.Tq,
               "{}: lse has {} floats, expected B·NH·Tq = {}·{}·{} = {}", fn, size, d.B, d.NH, d.Tq,
               d.B * d.NH * d.Tq);
}

// Keys of a tile starting at key c0 (n keys) that query row t sees: a prefix of the tile.
std::int64_t visible_keys(const FlashAttention& a, std::int64_t t, std::int64_t c0,
                          std::int64_t n) {
  return std::clamp<std::int64_t>(a.q_pos + t - a.k_pos - c0 + 1, 0, n);
}

// Keys [0, end) some row of query rows [r0, r1) sees (forward: the key tiles to visit).
std::int64_t keys_seen_by(const FlashAttention& a, std::int64_t r1, std::int64_t Tk) {
  return std::clamp<std::int64_t>(a.q_pos + r1 - 1 - a.k_pos + 1, 0, Tk);
}

// The first query row that sees key c0 (backward: the query tiles to visit).
std::int64_t first_row_seeing(const FlashAttention& a, std::int64_t c0, std::int64_t Tq) {
  return std::clamp<std::int64_t>(a.k_pos + c0 - a.q_pos, 0, Tq);
}

// Bytes touched beyond the tiles (read q, k, v, out; write out or the gradients): O(T).
double flash_bytes(const FlashDims& d, bool backward) {
  const double q_elems = static_cast<double>(d.B * d.Tq * d.NH * d.HD);
  const double kv_elems = static_cast<double>(d.B * d.Tk * d.NKV * d.HD);
  return op_costs::bytes(q_elems + kv_elems, backward ? op_costs::kFlashAttentionBackwardTouches
                                                      : op_costs::kFlashAttentionForwardTouches);
}

}  // namespace

std::int64_t flash_attention_lse_size(const FlashAttention& a, std::int64_t q_rows) {
  MESHTP_CHECK(a.batch >= 1 && q_rows % a.batch == 0,
               "flash_attention_lse_size: {} query rows are not B·Tq for batch B={}", q_rows,
               a.batch);
  return a.heads * q_rows;
}

std::int64_t flash_attention_scratch_size(const FlashAttention& a, std::int64_t Tq, std::int64_t Tk,
                                          std::int64_t HD) {
  return static_cast<std::int64_t>(op_costs::flash_attention_scratch_floats(
      static_cast<double>(Tq), static_cast<double>(Tk), static_cast<double>(HD),
      static_cast<double>(a.block_q), static_cast<double>(a.block_k)));
}

double flash_attention_flops(const FlashAttention& a, std::int64_t Tq, std::int64_t Tk,
                             std::int64_t HD, bool backward) {
  return op_costs::flash_attention_flops(Tq, Tk, HD, a.block_q, a.block_k, a.q_pos - a.k_pos,
                                         static_cast<double>(a.batch * a.heads), backward);
}

void flash_attention_forward(MatrixView out, std::span<float> lse, std::span<float> scratch,
                             ConstMatrixView q, ConstMatrixView k, ConstMatrixView v,
                             const FlashAttention& a) {
  constexpr const char* kFn = "flash_attention_forward";
  const ScopedSpan span("flash_attention", SpanKind::kCompute);
  const FlashDims d = flash_dims(kFn, q, k, v, a);
  check_same(kFn, "out", out, "q", q);
  check_lse(kFn, lse.size(), d);
  check_scratch(kFn, scratch.size(), a, d);
  // Simulated build, charged mode: the products' time and the O(T) bytes instead of the work.
  if (simhooks::charge(flash_attention_flops(a, d.Tq, d.Tk, d.HD, false), flash_bytes(d, false))) {
    return;
  }
  const std::int64_t HD = d.HD, bq = std::min(a.block_q, d.Tq), bk = std::min(a.block_k, d.Tk);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  const auto& kern = kernels::fast();
  // The tiles: scores/probabilities, the unnormalised output, the row max and sum.
  float* const s_buf = scratch.data();
  float* const m_row = s_buf + bq * bk;
  float* const l_row = m_row + bq;
  const MatrixView acc_all{l_row + bq, bq, HD, HD};
  for (std::int64_t b = 0; b < d.B; ++b) {
    for (std::int64_t h = 0; h < d.NH; ++h) {
      const std::int64_t g = h / d.G;  // its KV head
      const ConstMatrixView qh = q.block(b * d.Tq, h * HD, d.Tq, HD);
      const ConstMatrixView kh = k.block(b * d.Tk, g * HD, d.Tk, HD);
      const ConstMatrixView vh = v.block(b * d.Tk, g * HD, d.Tk, HD);
      const MatrixView oh = out.block(b * d.Tq, h * HD, d.Tq, HD);
      float* L = lse.data() + (b * d.NH + h) * d.Tq;
      for (std::int64_t r0 = 0; r0 < d.Tq; r0 += bq) {
        const std::int64_t r1 = std::min(d.Tq, r0 + bq), m = r1 - r0;
        const MatrixView acc = acc_all.block(0, 0, m, HD);
        zero(acc);
        std::fill(m_row, m_row + m, kNoKeys);
        std::fill(l_row, l_row + m, 0.0f);
        const std::int64_t kend = keys_seen_by(a, r1, d.Tk);
        for (std::int64_t c0 = 0; c0 < kend; c0 += bk) {
          const std::int64_t n = std::min(kend, c0 + bk) - c0;
          const MatrixView s{s_buf, m, n, n};
          gemm(qh.block(r0, 0, m, HD), Trans::kNo, kh.block(c0, 0, n, HD), Trans::kYes, s, scale);
          for (std::int64_t i = 0; i < m; ++i) {
            float* row = s.data + i * n;
            const std::int64_t valid = visible_keys(a, r0 + i, c0, n);
            std::fill(row + valid, row + n, 0.0f);
            if (valid == 0) continue;
            const float m_new = std::max(m_row[i], kern.max_of(row, valid));
            kern.scaled_exp(row, row, valid, m_new, 1.0f, false);
            const float alpha = std::exp(m_row[i] - m_new);  // 0 for the row's first keys
            l_row[i] = alpha * l_row[i] + detail::sum_of(row, valid);
            if (alpha != 1.0f) kern.scale(acc.data + i * HD, HD, alpha);
            m_row[i] = m_new;
          }
          gemm(s, Trans::kNo, vh.block(c0, 0, n, HD), Trans::kNo, acc, 1.0f, 1.0f);
        }
        for (std::int64_t i = 0; i < m; ++i) {
          float* o = oh.data + (r0 + i) * oh.ld;
          if (l_row[i] > 0.0f) {
            const float inv = 1.0f / l_row[i];
            const float* ar = acc.data + i * HD;
            for (std::int64_t c = 0; c < HD; ++c) o[c] = ar[c] * inv;
            L[r0 + i] = m_row[i] + std::log(l_row[i]);
          } else {  // no key of this range: the identity of merge
            std::fill(o, o + HD, 0.0f);
            L[r0 + i] = kNoKeys;
          }
        }
      }
    }
  }
}

void flash_attention_backward(MatrixView dq, MatrixView dk, MatrixView dv, std::span<float> scratch,
                              ConstMatrixView dout, ConstMatrixView q, ConstMatrixView k,
                              ConstMatrixView v, ConstMatrixView out, std::span<const float> lse,
                              const FlashAttention& a) {
  constexpr const char* kFn = "flash_attention_backward";
  const ScopedSpan span("flash_attention", SpanKind::kCompute);
  const FlashDims d = flash_dims(kFn, q, k, v, a);
  check_same(kFn, "out", out, "q", q);
  check_same(kFn, "dout", dout, "q", q);
  check_same(kFn, "dq", dq, "q", q);
  check_same(kFn, "dk", dk, "k", k);
  check_same(kFn, "dv", dv, "v", v);
  check_lse(kFn, lse.size(), d);
  check_scratch(kFn, scratch.size(), a, d);
  if (simhooks::charge(flash_attention_flops(a, d.Tq, d.Tk, d.HD, true), flash_bytes(d, true))) {
    return;
  }
  const std::int64_t HD = d.HD, bq = std::min(a.block_q, d.Tq), bk = std::min(a.block_k, d.Tk);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  const auto& kern = kernels::fast();
  float* const p_buf = scratch.data();
  float* const dp_buf = p_buf + bq * bk;
  float* const D = dp_buf + bq * bk;
  for (std::int64_t b = 0; b < d.B; ++b) {
    for (std::int64_t h = 0; h < d.NH; ++h) {
      const std::int64_t g = h / d.G;
      const ConstMatrixView qh = q.block(b * d.Tq, h * HD, d.Tq, HD);
      const ConstMatrixView kh = k.block(b * d.Tk, g * HD, d.Tk, HD);
      const ConstMatrixView vh = v.block(b * d.Tk, g * HD, d.Tk, HD);
      const ConstMatrixView oh = out.block(b * d.Tq, h * HD, d.Tq, HD);
      const ConstMatrixView doh = dout.block(b * d.Tq, h * HD, d.Tq, HD);
      const MatrixView dqh = dq.block(b * d.Tq, h * HD, d.Tq, HD);
      const MatrixView dkh = dk.block(b * d.Tk, g * HD, d.Tk, HD);
      const MatrixView dvh = dv.block(b * d.Tk, g * HD, d.Tk, HD);
      const float* L = lse.data() + (b * d.NH + h) * d.Tq;
      for (std::int64_t t = 0; t < d.Tq; ++t) {  // D_t = dO_t · O_t
        D[t] = detail::dot_of(doh.data + t * doh.ld, oh.data + t * oh.ld, HD);
      }
      for (std::int64_t c0 = 0; c0 < d.Tk; c0 += bk) {
        const std::int64_t n_tile = std::min(d.Tk, c0 + bk) - c0;
        const ConstMatrixView kt = kh.block(c0, 0, n_tile, HD), vt = vh.block(c0, 0, n_tile, HD);
        const MatrixView dkt = dkh.block(c0, 0, n_tile, HD), dvt = dvh.block(c0, 0, n_tile, HD);
        for (std::int64_t r0 = first_row_seeing(a, c0, d.Tq); r0 < d.Tq; r0 += bq) {
          const std::int64_t r1 = std::min(d.Tq, r0 + bq), m = r1 - r0;
          // Keys of the tile the tile's last row sees: the rest is masked for every row.
          const std::int64_t n = visible_keys(a, r1 - 1, c0, n_tile);
          const ConstMatrixView kc = kt.block(0, 0, n, HD), vc = vt.block(0, 0, n, HD);
          const MatrixView dkc = dkt.block(0, 0, n, HD), dvc = dvt.block(0, 0, n, HD);
          const MatrixView p{p_buf, m, n, n}, ds{dp_buf, m, n, n};
          const ConstMatrixView qr = qh.block(r0, 0, m, HD), dor = doh.block(r0, 0, m, HD);
          // P = e^(scale·Q·Kᵀ − L), 0 where masked
          gemm(qr, Trans::kNo, kc, Trans::kYes, p, scale);
          for (std::int64_t i = 0; i < m; ++i) {
            float* row = p.data + i * n;
            const float Li = L[r0 + i];
            const std::int64_t valid = Li == kNoKeys ? 0 : visible_keys(a, r0 + i, c0, n);
            kern.scaled_exp(row, row, valid, Li, 1.0f, false);
            std::fill(row + valid, row + n, 0.0f);
          }
          gemm(p, Trans::kYes, dor, Trans::kNo, dvc, 1.0f, 1.0f);  // dV += Pᵀ·dO
          gemm(dor, Trans::kNo, vc, Trans::kYes, ds);              // dP = dO·Vᵀ
          for (std::int64_t i = 0; i < m; ++i) {                   // dS = P ⊙ (dP − D)
            const float* pr = p.data + i * n;
            float* dr = ds.data + i * n;
            const float Di = D[r0 + i];
            for (std::int64_t j = 0; j < n; ++j) dr[j] = pr[j] * (dr[j] - Di);
          }
          gemm(ds, Trans::kNo, kc, Trans::kNo, dqh.block(r0, 0, m, HD), scale, 1.0f);
          gemm(ds, Trans::kYes, qr, Trans::kNo, dkc, scale, 1.0f);
        }
      }
    }
  }
}

void flash_attention_merge(MatrixView out, std::span<float> lse, ConstMatrixView out_b,
                           std::span<const float> lse_b, const FlashAttention& a) {
  constexpr const char* kFn = "flash_attention_merge";
  MESHTP_CHECK(a.batch >= 1 && a.heads >= 1 && out.rows % a.batch == 0 && out.cols % a.heads == 0,
               "{}: out is {}x{}, not (B·Tq)x(NH·HD) for batch B={}, heads NH={}", kFn, out.rows,
               out.cols, a.batch, a.heads);
  check_same(kFn, "out_b", out_b, "out", out);
  const std::int64_t Tq = out.rows / a.batch, HD = out.cols / a.heads;
  MESHTP_CHECK(
      static_cast<std::int64_t>(lse.size()) == a.batch * a.heads * Tq && lse_b.size() == lse.size(),
      "{}: lse has {} and lse_b {} floats, expected B·NH·Tq = {}·{}·{} = {}", kFn, lse.size(),
      lse_b.size(), a.batch, a.heads, Tq, a.batch * a.heads * Tq);
  if (simhooks::charge_bytes(op_costs::bytes(3.0 * static_cast<double>(out.rows * out.cols), 1))) {
    return;  // read O_a, O_b, write O
  }
  for (std::int64_t b = 0; b < a.batch; ++b) {
    for (std::int64_t h = 0; h < a.heads; ++h) {
      for (std::int64_t t = 0; t < Tq; ++t) {
        const std::size_t li = static_cast<std::size_t>((b * a.heads + h) * Tq + t);
        const float la = lse[li], lb = lse_b[li];
        if (lb == kNoKeys) continue;  // b adds nothing
        float* o = out.data + (b * Tq + t) * out.ld + h * HD;
        const float* ob = out_b.data + (b * Tq + t) * out_b.ld + h * HD;
        if (la == kNoKeys) {  // a had nothing: take b
          std::copy(ob, ob + HD, o);
          lse[li] = lb;
          continue;
        }
        const float mx = std::max(la, lb);
        const float l = mx + std::log1p(std::exp(-std::fabs(la - lb)));
        const float wa = std::exp(la - l), wb = std::exp(lb - l);
        for (std::int64_t c = 0; c < HD; ++c) o[c] = wa * o[c] + wb * ob[c];
        lse[li] = l;
      }
    }
  }
}

namespace {

// The q, k, v views of packed qkv rows (B·T, (NH + 2·NKV)·HD).
struct PackedQkv {
  ConstMatrixView q, k, v;
  FlashAttention a;
};

PackedQkv split_qkv(const char* fn, ConstMatrixView qkv, std::int64_t B, std::int64_t T,
                    std::int64_t NH, std::int64_t NKV) {
  MESHTP_CHECK(B >= 1 && T >= 1 && NH >= 1 && NKV >= 1,
               "{}: B={}, T={}, NH={}, NKV={} must all be positive", fn, B, T, NH, NKV);
  MESHTP_CHECK(NH % NKV == 0, "{}: heads NH={} is not a multiple of kv_heads NKV={}", fn, NH, NKV);
  MESHTP_CHECK(qkv.rows == B * T, "{}: qkv has {} rows, expected B·T = {}·{} = {}", fn, qkv.rows, B,
               T, B * T);
  MESHTP_CHECK(qkv.cols > 0 && qkv.cols % (NH + 2 * NKV) == 0,
               "{}: qkv width {} is not (NH + 2·NKV)·HD for NH={}, NKV={}", fn, qkv.cols, NH, NKV);
  const std::int64_t HD = qkv.cols / (NH + 2 * NKV), rows = B * T;
  return {.q = qkv.block(0, 0, rows, NH * HD),
          .k = qkv.block(0, NH * HD, rows, NKV * HD),
          .v = qkv.block(0, (NH + NKV) * HD, rows, NKV * HD),
          .a = {.batch = B, .heads = NH, .kv_heads = NKV}};
}

}  // namespace

void flash_attention_forward_qkv(MatrixView out, std::span<float> lse, std::span<float> scratch,
                                 ConstMatrixView qkv, std::int64_t B, std::int64_t T,
                                 std::int64_t NH, std::int64_t NKV) {
  const PackedQkv p = split_qkv("flash_attention_forward", qkv, B, T, NH, NKV);
  flash_attention_forward(out, lse, scratch, p.q, p.k, p.v, p.a);
}

void flash_attention_backward_qkv(MatrixView dqkv, std::span<float> scratch, ConstMatrixView dout,
                                  ConstMatrixView qkv, ConstMatrixView out,
                                  std::span<const float> lse, std::int64_t B, std::int64_t T,
                                  std::int64_t NH, std::int64_t NKV) {
  const PackedQkv p = split_qkv("flash_attention_backward", qkv, B, T, NH, NKV);
  check_same("flash_attention_backward", "dqkv", dqkv, "qkv", qkv);
  const std::int64_t HD = p.q.cols / NH, rows = B * T;
  flash_attention_backward(dqkv.block(0, 0, rows, NH * HD), dqkv.block(0, NH * HD, rows, NKV * HD),
                           dqkv.block(0, (NH + NKV) * HD, rows, NKV * HD), scratch, dout, p.q, p.k,
                           p.v, out, lse, p.a);
}

}  // namespace meshtp
