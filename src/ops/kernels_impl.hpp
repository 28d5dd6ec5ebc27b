// Private to src/ops: the fast kernels, written once over a vector type S (simd_impl.hpp) and
// instantiated per vector width by kernels_simd.cpp.
// The math of each is in kernels.hpp; here is how it is computed.
//
// Vector exp (within 1.2e-7 relative of exp on the normal range):
//   x = n·ln2 + r, n = round(x/ln2), |r| ≤ ln2/2  (Cody–Waite: ln2 = 0.693359375 − 2.1219444e-4,
//   the first part exact in 9 bits so n·ln2_hi is exact), e^r ≈ 1 + r + r²·P(r) with the
//   Cephes expf polynomial, and 2ⁿ put into the exponent bits. Inputs above 88 give e^88
//   (no caller exponentiates anything above 0 after its max shift); below ln(FLT_MIN) ≈ −87.34
//   the result is 0, so padded or masked logits at −∞ give exact zeros.
//
// GeLU uses no tanh: ½·(1 + tanh u) = σ(2u) = 1/(1 + e^(−2u)), so
//   gelu(x)  = x·s,                                   s = σ(2u), u = √(2/π)·(x + 0.044715·x³)
//   gelu'(x) = s + 2·x·s·(1 − s)·√(2/π)·(1 + 3·0.044715·x²)
// one exp and one division per element, and no cancellation in 1 + tanh u for negative x
// (SigmoidOfTwoU below).
//
// Row statistics (LayerNorm) are accumulated in double lanes, like the reference's double
// sums; softmax and cross-entropy sums in float/double lanes as noted. Every loop handles
// its tail (n mod the vector width) with a partial load padded by a neutral value.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/kernels.hpp"
#include "ops/layernorm.hpp"
#include "ops/simd_impl.hpp"

namespace meshtp::kernels {
namespace {

template <class S>
[[gnu::always_inline]] inline typename S::V vexp(typename S::V x) {
  using V = typename S::V;
  const V lo = S::set1(-87.33654f);  // ln(FLT_MIN): below it, 0
  const V hi = S::set1(88.0f);       // n ≤ 127: 2ⁿ stays a normal float
  const V xc = S::max(lo, S::min(hi, x));  // operand order keeps a NaN x
  const auto n = S::round_to_int(S::mul(xc, S::set1(1.44269504088896341f)));
  const V nf = S::to_float(n);
  V r = S::fma(nf, S::set1(-0.693359375f), xc);
  r = S::fma(nf, S::set1(2.12194440e-4f), r);
  V p = S::set1(1.9875691500e-4f);
  p = S::fma(p, r, S::set1(1.3981999507e-3f));
  p = S::fma(p, r, S::set1(8.3334519073e-3f));
  p = S::fma(p, r, S::set1(4.1665795894e-2f));
  p = S::fma(p, r, S::set1(1.6666665459e-1f));
  p = S::fma(p, r, S::set1(5.0000001201e-1f));
  p = S::fma(S::mul(p, r), r, S::add(r, S::set1(1.0f)));
  const V y = S::mul(p, S::pow2(n));
  return S::select_below(x, lo, S::set1(0.0f), y);
}

// ---- elementwise maps: each is f applied to full vectors, then to the tail ------------------

template <class S, class F>
[[gnu::always_inline]] inline void map1(float* y, const float* x, std::int64_t n, F f) {
  std::int64_t i = 0;
  for (; i + S::kWidth <= n; i += S::kWidth) S::store(y + i, f(S::load(x + i)));
  if (i < n) store_part<S>(y + i, n - i, f(load_part<S>(x + i, n - i, 0.0f)));
}

template <class S, class F>
[[gnu::always_inline]] inline void map2(float* y, const float* a, const float* b, std::int64_t n, F f) {
  std::int64_t i = 0;
  for (; i + S::kWidth <= n; i += S::kWidth) S::store(y + i, f(S::load(a + i), S::load(b + i)));
  if (i < n) {
    store_part<S>(y + i, n - i, f(load_part<S>(a + i, n - i, 0.0f), load_part<S>(b + i, n - i, 0.0f)));
  }
}

template <class S, class F>
[[gnu::always_inline]] inline void map3(float* y, const float* a, const float* b, const float* c, std::int64_t n, F f) {
  std::int64_t i = 0;
  for (; i + S::kWidth <= n; i += S::kWidth) {
    S::store(y + i, f(S::load(a + i), S::load(b + i), S::load(c + i)));
  }
  if (i < n) {
    const std::int64_t k = n - i;
    store_part<S>(y + i, k, f(load_part<S>(a + i, k, 0.0f), load_part<S>(b + i, k, 0.0f),
                              load_part<S>(c + i, k, 0.0f)));
  }
}

// ---- reductions: independent chains ------------------------------------------------------
//
// A sum over a row is one dependency chain: each add waits for the previous (3–4 cycles),
// while the core could start two every cycle. for_vectors hands the full vectors of [0, n) to
// f(i, chain) in groups of U, chain = 0 … U−1, so U accumulators run side by side and are
// added at the end (in a fixed order: results are deterministic for a given n). It returns
// the start of the tail (fewer than kWidth elements), which the caller handles.
template <class S, int U, class F>
[[gnu::always_inline]] inline std::int64_t for_vectors(std::int64_t n, F f) {
  std::int64_t i = 0;
  for (; i + U * S::kWidth <= n; i += U * S::kWidth) {
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) f(i + u * S::kWidth, u);
  }
  for (; i + S::kWidth <= n; i += S::kWidth) f(i, 0);
  return i;
}

// Σ of U double accumulators, pairwise
template <class S, int U>
[[gnu::always_inline]] inline double dreduce_all(typename S::D (&acc)[U]) {
  static_assert(U == 1 || U == 2 || U == 4);
  if constexpr (U == 4) {
    return S::dreduce(S::dsum(S::dsum(acc[0], acc[1]), S::dsum(acc[2], acc[3])));
  } else if constexpr (U == 2) {
    return S::dreduce(S::dsum(acc[0], acc[1]));
  } else {
    return S::dreduce(acc[0]);
  }
}

// σ(2u) and σ(2u)·(1 − σ(2u)) from t = −2u, through a = e^(−|t|) ≤ 1 so nothing overflows:
//   s = (t ≥ 0 ? a : 1)/(1 + a),   s·(1 − s) = e^t/(1 + e^t)² = a/(1 + a)²
// (and 1 − s is never formed: it would round to 0 once e^t < 6e-8).
template <class S>
struct SigmoidOfTwoU {
  typename S::V s, s_one_minus_s;
  [[gnu::always_inline]] explicit SigmoidOfTwoU(typename S::V t) {
    const auto one = S::set1(1.0f);
    const auto a = vexp<S>(S::sub(S::set1(0.0f), S::abs(t)));
    const auto d = S::div(one, S::add(one, a));
    s = S::mul(S::select_below(t, S::set1(0.0f), one, a), d);
    s_one_minus_s = S::mul(a, S::mul(d, d));
  }
};

// −2u = x·(−2√(2/π))·(1 + 0.044715·x²)
template <class S>
[[gnu::always_inline]] inline typename S::V minus_two_u(typename S::V x) {
  constexpr float k = -2.0f * 0.7978845608028654f;
  return S::mul(x, S::fma(S::mul(x, x), S::set1(k * 0.044715f), S::set1(k)));
}

template <class S>
[[gnu::always_inline]] inline typename S::V gelu_of(typename S::V x) {
  return S::mul(x, SigmoidOfTwoU<S>(minus_two_u<S>(x)).s);
}

// gelu'(x) = s + 2x·s(1 − s)·u'(x),  u'(x) = √(2/π)·(1 + 3·0.044715·x²)
template <class S>
[[gnu::always_inline]] inline typename S::V gelu_grad_of(typename S::V x) {
  const SigmoidOfTwoU<S> sig(minus_two_u<S>(x));
  const auto du = S::fma(S::mul(x, x), S::set1(0.7978845608028654f * 3.0f * 0.044715f),
                         S::set1(0.7978845608028654f));
  return S::fma(S::mul(S::add(x, x), sig.s_one_minus_s), du, sig.s);
}

template <class S>
void gelu_forward(float* y, const float* x, std::int64_t n) {
  map1<S>(y, x, n, [](auto v) { return gelu_of<S>(v); });
}

template <class S>
void gelu_backward(float* dx, const float* x, const float* dy, std::int64_t n) {
  map3<S>(dx, dx, x, dy, n, [](auto acc, auto v, auto d) { return S::fma(d, gelu_grad_of<S>(v), acc); });
}

template <class S>
void bias_gelu_forward(float* pre, float* y, const float* bias, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + S::kWidth <= n; i += S::kWidth) {
    const auto v = S::add(S::load(pre + i), S::load(bias + i));
    S::store(pre + i, v);
    S::store(y + i, gelu_of<S>(v));
  }
  if (i < n) {
    const std::int64_t k = n - i;
    const auto v = S::add(load_part<S>(pre + i, k, 0.0f), load_part<S>(bias + i, k, 0.0f));
    store_part<S>(pre + i, k, v);
    store_part<S>(y + i, k, gelu_of<S>(v));
  }
}

template <class S>
void add(float* y, const float* a, const float* b, std::int64_t n) {
  map2<S>(y, a, b, n, [](auto u, auto v) { return S::add(u, v); });
}

template <class S>
void scale(float* x, std::int64_t n, float s) {
  const auto sv = S::set1(s);
  map1<S>(x, x, n, [sv](auto v) { return S::mul(v, sv); });
}

// ---- reductions ---------------------------------------------------------------------------

template <class S>
float max_of(const float* x, std::int64_t n) {
  auto m0 = S::set1(-INFINITY), m1 = m0;
  std::int64_t i = 0;
  for (; i + 2 * S::kWidth <= n; i += 2 * S::kWidth) {
    m0 = S::max(m0, S::load(x + i));
    m1 = S::max(m1, S::load(x + i + S::kWidth));
  }
  for (; i + S::kWidth <= n; i += S::kWidth) m0 = S::max(m0, S::load(x + i));
  if (i < n) m1 = S::max(m1, load_part<S>(x + i, n - i, -INFINITY));
  return S::reduce_max(S::max(m0, m1));
}

template <class S>
RowSums moments(const float* x, std::int64_t n) {
  typename S::D s[2] = {S::dzero(), S::dzero()}, q[2] = {S::dzero(), S::dzero()};
  const auto step = [&](auto v, int c) {
    s[c] = S::dadd(s[c], v);
    q[c] = S::dfma(q[c], v, v);
  };
  const std::int64_t i =
      for_vectors<S, 2>(n, [&](std::int64_t j, int c) { step(S::load(x + j), c); });
  if (i < n) step(load_part<S>(x + i, n - i, 0.0f), 1);
  return {dreduce_all<S>(s), dreduce_all<S>(q)};
}

// ---- LayerNorm rows -----------------------------------------------------------------------

template <class S>
void layernorm_row_apply(float* y, const float* x, std::int64_t n, const float* w,
                         const float* b, float mean, float rstd) {
  const auto mv = S::set1(mean), rv = S::set1(rstd);
  map3<S>(y, x, w, b, n, [&](auto xv, auto wv, auto bv) {
    return S::fma(S::mul(S::sub(xv, mv), rv), wv, bv);
  });
}

template <class S>
void layernorm_row_forward(float* y, const float* x, std::int64_t n, const float* w,
                           const float* b, float* mean, float* rstd) {
  typename S::D s[4] = {S::dzero(), S::dzero(), S::dzero(), S::dzero()};
  std::int64_t i = for_vectors<S, 4>(
      n, [&](std::int64_t j, int c) { s[c] = S::dadd(s[c], S::load(x + j)); });
  if (i < n) s[1] = S::dadd(s[1], load_part<S>(x + i, n - i, 0.0f));
  const double mu = dreduce_all<S>(s) / static_cast<double>(n);
  typename S::D q[4] = {S::dzero(), S::dzero(), S::dzero(), S::dzero()};
  i = for_vectors<S, 4>(
      n, [&](std::int64_t j, int c) { q[c] = S::dfma_centered(q[c], S::load(x + j), mu); });
  double sq = dreduce_all<S>(q);
  for (; i < n; ++i) sq += (x[i] - mu) * (x[i] - mu);
  const float m = static_cast<float>(mu);
  const float r = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(n) + kLayerNormEps));
  layernorm_row_apply<S>(y, x, n, w, b, m, r);
  *mean = m;
  *rstd = r;
}

// Σ g and Σ g·x̂ (double), with g = dy⊙w, x̂ = (x − mean)·rstd; and dw += dy⊙x̂, db += dy.
// The float → double conversions are this kernel's most expensive step, so the terms of two
// vectors are first added in float (one rounding, ≤ 6e-8 of the pair's sum) and converted
// once; two such pairs feed two independent chains.
template <class S>
RowSums layernorm_row_backward_sums(const float* dy, const float* x, std::int64_t n,
                                       const float* w, float mean, float rstd, float* dw,
                                       float* db) {
  using V = typename S::V;
  struct Terms {
    V g, gx;  // g and g·x̂ of one vector
  };
  const auto mv = S::set1(mean), rv = S::set1(rstd);
  const auto terms = [&](V d, V xv, V wv, V dwv, V dbv, auto store_w, auto store_b) {
    const V xhat = S::mul(S::sub(xv, mv), rv);
    store_w(S::fma(d, xhat, dwv));
    store_b(S::add(dbv, d));
    const V g = S::mul(d, wv);
    return Terms{g, S::mul(g, xhat)};
  };
  const auto full = [&](std::int64_t j) {
    return terms(S::load(dy + j), S::load(x + j), S::load(w + j), S::load(dw + j),
                 S::load(db + j), [&](V v) { S::store(dw + j, v); },
                 [&](V v) { S::store(db + j, v); });
  };
  typename S::D gs[2] = {S::dzero(), S::dzero()}, gxs[2] = {S::dzero(), S::dzero()};
  const auto add = [&](int c, V g, V gx) {
    gs[c] = S::dadd(gs[c], g);
    gxs[c] = S::dadd(gxs[c], gx);
  };
  constexpr int W = S::kWidth;
  std::int64_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    const Terms a = full(i), b = full(i + W), c = full(i + 2 * W), d = full(i + 3 * W);
    add(0, S::add(a.g, b.g), S::add(a.gx, b.gx));
    add(1, S::add(c.g, d.g), S::add(c.gx, d.gx));
  }
  for (; i + W <= n; i += W) {
    const Terms a = full(i);
    add(0, a.g, a.gx);
  }
  if (i < n) {
    const std::int64_t k = n - i;
    const Terms a = terms(load_part<S>(dy + i, k, 0.0f), load_part<S>(x + i, k, 0.0f),
                          load_part<S>(w + i, k, 0.0f), load_part<S>(dw + i, k, 0.0f),
                          load_part<S>(db + i, k, 0.0f), [&](V v) { store_part<S>(dw + i, k, v); },
                          [&](V v) { store_part<S>(db + i, k, v); });
    add(1, a.g, a.gx);
  }
  return {dreduce_all<S>(gs), dreduce_all<S>(gxs)};
}

// dx += rstd·(dy⊙w − g_mean − x̂·gx_mean)
template <class S>
void layernorm_row_backward_apply(float* dx, const float* dy, const float* x, std::int64_t n,
                                  const float* w, float mean, float rstd, float g_mean,
                                  float gx_mean) {
  const auto mv = S::set1(mean), rv = S::set1(rstd), gm = S::set1(g_mean),
             gxm = S::set1(gx_mean);
  std::int64_t i = 0;
  const auto f = [&](auto acc, auto d, auto xv, auto wv) {
    const auto xhat = S::mul(S::sub(xv, mv), rv);
    const auto inner = S::sub(S::sub(S::mul(d, wv), gm), S::mul(xhat, gxm));
    return S::fma(rv, inner, acc);
  };
  for (; i + S::kWidth <= n; i += S::kWidth) {
    S::store(dx + i, f(S::load(dx + i), S::load(dy + i), S::load(x + i), S::load(w + i)));
  }
  if (i < n) {
    const std::int64_t k = n - i;
    store_part<S>(dx + i, k, f(load_part<S>(dx + i, k, 0.0f), load_part<S>(dy + i, k, 0.0f),
                               load_part<S>(x + i, k, 0.0f), load_part<S>(w + i, k, 0.0f)));
  }
}

// ---- softmax rows -------------------------------------------------------------------------

// p[0, valid) = softmax(p[0, valid)); p[valid, n) = 0.
template <class S>
void softmax_row(float* p, std::int64_t valid, std::int64_t n) {
  const auto mx = S::set1(max_of<S>(p, valid));
  auto sum = S::set1(0.0f);
  std::int64_t i = 0;
  for (; i + S::kWidth <= valid; i += S::kWidth) {
    const auto e = vexp<S>(S::sub(S::load(p + i), mx));
    S::store(p + i, e);
    sum = S::add(sum, e);
  }
  if (i < valid) {
    const std::int64_t k = valid - i;
    const auto e = vexp<S>(S::sub(load_part<S>(p + i, k, -INFINITY), mx));
    store_part<S>(p + i, k, e);
    sum = S::add(sum, e);
  }
  scale<S>(p, valid, 1.0f / S::reduce_add(sum));
  for (i = valid; i < n; ++i) p[i] = 0.0f;
}

// d[0, valid) = p ⊙ (d − Σ p⊙d); d[valid, n) = 0.
template <class S>
void softmax_row_backward(float* d, const float* p, std::int64_t valid, std::int64_t n) {
  typename S::V acc[2] = {S::set1(0.0f), S::set1(0.0f)};
  std::int64_t i = for_vectors<S, 2>(valid, [&](std::int64_t j, int c) {
    acc[c] = S::fma(S::load(p + j), S::load(d + j), acc[c]);
  });
  if (i < valid) {
    acc[1] = S::fma(load_part<S>(p + i, valid - i, 0.0f), load_part<S>(d + i, valid - i, 0.0f),
                    acc[1]);
  }
  const auto dot = S::set1(S::reduce_add(S::add(acc[0], acc[1])));
  map2<S>(d, p, d, valid, [dot](auto pv, auto dv) { return S::mul(pv, S::sub(dv, dot)); });
  for (i = valid; i < n; ++i) d[i] = 0.0f;
}

// ---- cross-entropy rows -------------------------------------------------------------------

// Σ_i e^(x_i − shift), in double lanes.
template <class S>
double sum_exp(const float* x, std::int64_t n, float shift) {
  const auto sv = S::set1(shift);
  auto acc = S::dzero();
  std::int64_t i = 0;
  for (; i + S::kWidth <= n; i += S::kWidth) acc = S::dadd(acc, vexp<S>(S::sub(S::load(x + i), sv)));
  if (i < n) acc = S::dadd(acc, vexp<S>(S::sub(load_part<S>(x + i, n - i, -INFINITY), sv)));
  return S::dreduce(acc);
}

// y = scale·e^(x − shift)  (accumulate: y += …); y may be x.
template <class S>
void scaled_exp(float* y, const float* x, std::int64_t n, float shift, float scale_by,
                bool accumulate) {
  const auto sv = S::set1(shift), kv = S::set1(scale_by);
  if (accumulate) {
    map2<S>(y, x, y, n, [&](auto v, auto acc) { return S::fma(kv, vexp<S>(S::sub(v, sv)), acc); });
  } else {
    map1<S>(y, x, n, [&](auto v) { return S::mul(kv, vexp<S>(S::sub(v, sv))); });
  }
}

// ---- AdamW --------------------------------------------------------------------------------

template <class S>
void adamw(float* p, const float* g, float* m, float* v, std::int64_t n, const AdamWStep& a) {
  const auto b1 = S::set1(a.beta1), c1 = S::set1(1.0f - a.beta1);
  const auto b2 = S::set1(a.beta2), c2 = S::set1(1.0f - a.beta2);
  const auto inv1 = S::set1(1.0f / a.bias1), inv2 = S::set1(1.0f / a.bias2);
  const auto eps = S::set1(a.eps), decay = S::set1(a.decay), lr = S::set1(a.lr);
  const auto update = [&](auto pv, auto gv, auto& mv, auto& vv) {
    mv = S::fma(b1, mv, S::mul(c1, gv));
    vv = S::fma(b2, vv, S::mul(S::mul(c2, gv), gv));
    const auto step = S::div(S::mul(mv, inv1), S::add(S::sqrt(S::mul(vv, inv2)), eps));
    return S::sub(pv, S::mul(lr, S::fma(decay, pv, step)));
  };
  std::int64_t i = 0;
  for (; i + S::kWidth <= n; i += S::kWidth) {
    auto mv = S::load(m + i), vv = S::load(v + i);
    S::store(p + i, update(S::load(p + i), S::load(g + i), mv, vv));
    S::store(m + i, mv);
    S::store(v + i, vv);
  }
  if (i < n) {
    const std::int64_t k = n - i;
    auto mv = load_part<S>(m + i, k, 0.0f), vv = load_part<S>(v + i, k, 0.0f);
    store_part<S>(p + i, k, update(load_part<S>(p + i, k, 0.0f), load_part<S>(g + i, k, 0.0f), mv, vv));
    store_part<S>(m + i, k, mv);
    store_part<S>(v + i, k, vv);
  }
}

// The table of one instruction set.
template <class S>
Table make_table(const char* name) {
  return {.name = name,
          .gelu_forward = gelu_forward<S>,
          .gelu_backward = gelu_backward<S>,
          .bias_gelu_forward = bias_gelu_forward<S>,
          .add = add<S>,
          .scale = scale<S>,
          .max_of = max_of<S>,
          .moments = moments<S>,
          .layernorm_row_forward = layernorm_row_forward<S>,
          .layernorm_row_apply = layernorm_row_apply<S>,
          .layernorm_row_backward_sums = layernorm_row_backward_sums<S>,
          .layernorm_row_backward_apply = layernorm_row_backward_apply<S>,
          .softmax_row = softmax_row<S>,
          .softmax_row_backward = softmax_row_backward<S>,
          .sum_exp = sum_exp<S>,
          .scaled_exp = scaled_exp<S>,
          .adamw = adamw<S>};
}

}  // namespace
}  // namespace meshtp::kernels
