#include "ops/moe.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "ops/gelu.hpp"
#include "ops/linear.hpp"

namespace meshtp {
namespace {

void check_rows(std::int64_t rows, std::int64_t expected, const char* what) {
  MESHTP_CHECK(rows == expected, "moe: {} has {} rows, expected {}", what, rows, expected);
}

// ∂aux/∂p_{n,e} = α·E·c_e / (N_g²·k): the same for every token.
std::vector<double> aux_grad_per_expert(const MoeRouting& r, std::span<const std::int64_t> counts,
                                        std::int64_t global_tokens, double coeff) {
  MESHTP_CHECK(static_cast<std::int64_t>(counts.size()) == r.experts,
               "moe aux loss: {} global counts for {} experts", counts.size(), r.experts);
  MESHTP_CHECK(global_tokens >= r.tokens && global_tokens > 0,
               "moe aux loss: the token set has {} tokens, fewer than this call's {}",
               global_tokens, r.tokens);
  const double n = static_cast<double>(global_tokens);
  std::vector<double> grad(static_cast<std::size_t>(r.experts));
  for (std::int64_t e = 0; e < r.experts; ++e)
    grad[e] = coeff * static_cast<double>(r.experts) * static_cast<double>(counts[e]) /
              (n * n * static_cast<double>(r.top_k));
  return grad;
}

}  // namespace

std::int64_t moe_capacity(std::int64_t tokens, std::int64_t experts, std::int64_t top_k,
                          double capacity_factor) {
  if (capacity_factor == 0.0) return tokens * top_k;
  return static_cast<std::int64_t>(std::ceil(capacity_factor * static_cast<double>(tokens) *
                                             static_cast<double>(top_k) /
                                             static_cast<double>(experts)));
}

MoeRouting moe_route(ConstMatrixView logits, std::int64_t top_k, double capacity_factor,
                     bool force_balance) {
  const std::int64_t N = logits.rows, E = logits.cols;
  MESHTP_CHECK(E >= 1 && top_k >= 1 && top_k <= E,
               "moe router: top_k={} must be between 1 and the number of experts {}", top_k, E);
  MESHTP_CHECK(capacity_factor >= 0.0 && std::isfinite(capacity_factor),
               "moe router: capacity_factor={} must be ≥ 0 (0: dropless)", capacity_factor);
  MoeRouting r;
  r.tokens = N;
  r.experts = E;
  r.top_k = top_k;
  r.probs.resize(static_cast<std::size_t>(N * E));
  r.expert.resize(static_cast<std::size_t>(N * top_k));
  r.gate.resize(r.expert.size());
  r.kept.assign(r.expert.size(), 1);
  r.counts.assign(static_cast<std::size_t>(E), 0);
  std::vector<std::int32_t> order(static_cast<std::size_t>(E));
  for (std::int64_t n = 0; n < N; ++n) {
    const float* l = &logits(n, 0);
    const float m = *std::max_element(l, l + E);
    double sum = 0;
    for (std::int64_t e = 0; e < E; ++e) sum += std::exp(static_cast<double>(l[e] - m));
    for (std::int64_t e = 0; e < E; ++e)
      r.probs[n * E + e] = static_cast<float>(std::exp(static_cast<double>(l[e] - m)) / sum);
    if (force_balance) {
      for (std::int64_t j = 0; j < top_k; ++j)
        order[j] = static_cast<std::int32_t>((n * top_k + j) % E);
    } else {
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                        [&](std::int32_t a, std::int32_t b) {
                          return l[a] > l[b] || (l[a] == l[b] && a < b);
                        });
    }
    double chosen = 0;
    for (std::int64_t j = 0; j < top_k; ++j)
      chosen += std::exp(static_cast<double>(l[order[j]] - m));
    for (std::int64_t j = 0; j < top_k; ++j) {
      r.expert[n * top_k + j] = order[j];
      r.gate[n * top_k + j] =
          static_cast<float>(std::exp(static_cast<double>(l[order[j]] - m)) / chosen);
      r.counts[order[j]] += 1;
    }
  }
  const std::int64_t capacity = moe_capacity(N, E, top_k, capacity_factor);
  std::vector<std::int64_t> taken(static_cast<std::size_t>(E), 0);
  for (std::int64_t a = 0; a < N * top_k; ++a) {
    if (taken[r.expert[a]] < capacity) {
      ++taken[r.expert[a]];
    } else {
      r.kept[a] = 0;
    }
  }
  return r;
}

double moe_aux_loss(const MoeRouting& r, std::span<const std::int64_t> global_counts,
                    std::int64_t global_tokens, double coeff) {
  const std::vector<double> g = aux_grad_per_expert(r, global_counts, global_tokens, coeff);
  double aux = 0;
  for (std::int64_t n = 0; n < r.tokens; ++n)
    for (std::int64_t e = 0; e < r.experts; ++e) aux += g[e] * r.probs[n * r.experts + e];
  return aux;
}

void moe_router_backward(MatrixView dlogits, const MoeRouting& r, std::span<const float> dgate,
                         std::span<const std::int64_t> global_counts, std::int64_t global_tokens,
                         double coeff, double aux_weight) {
  const std::int64_t N = r.tokens, E = r.experts, k = r.top_k;
  check_rows(dlogits.rows, N, "dlogits");
  MESHTP_CHECK(dlogits.cols == E && static_cast<std::int64_t>(dgate.size()) == N * k,
               "moe router backward: dlogits has {} columns for {} experts and dgate {} values "
               "for {} tokens × top_k {}",
               dlogits.cols, E, dgate.size(), N, k);
  std::vector<double> dp;
  if (aux_weight != 0.0) {
    dp = aux_grad_per_expert(r, global_counts, global_tokens, coeff);
    for (double& v : dp) v *= aux_weight;
  }
  for (std::int64_t n = 0; n < N; ++n) {
    float* d = &dlogits(n, 0);
    std::fill(d, d + E, 0.0f);
    double gdg = 0;
    for (std::int64_t j = 0; j < k; ++j) gdg += static_cast<double>(r.gate[n * k + j]) * dgate[n * k + j];
    for (std::int64_t j = 0; j < k; ++j)
      d[r.expert[n * k + j]] +=
          static_cast<float>(r.gate[n * k + j] * (dgate[n * k + j] - gdg));
    if (dp.empty()) continue;
    const float* p = &r.probs[n * E];
    double pdp = 0;
    for (std::int64_t e = 0; e < E; ++e) pdp += p[e] * dp[e];
    for (std::int64_t e = 0; e < E; ++e) d[e] += static_cast<float>(p[e] * (dp[e] - pdp));
  }
}

MoeDispatch moe_dispatch(const MoeRouting& r) {
  const std::int64_t A = r.tokens * r.top_k;
  MoeDispatch d;
  d.offsets.assign(static_cast<std::size_t>(r.experts + 1), 0);
  for (std::int64_t a = 0; a < A; ++a)
    if (r.kept[a]) ++d.offsets[r.expert[a] + 1];
  std::partial_sum(d.offsets.begin(), d.offsets.end(), d.offsets.begin());
  std::vector<std::int64_t> next(d.offsets.begin(), d.offsets.end() - 1);
  d.row_of.assign(static_cast<std::size_t>(A), -1);
  d.token_of.resize(static_cast<std::size_t>(d.offsets.back()));
  for (std::int64_t a = 0; a < A; ++a) {
    if (!r.kept[a]) continue;
    const std::int64_t row = next[r.expert[a]]++;
    d.row_of[a] = row;
    d.token_of[row] = a / r.top_k;
  }
  return d;
}

void moe_permute(MatrixView xp, ConstMatrixView x, const MoeDispatch& d) {
  check_rows(xp.rows, d.rows(), "the permuted tokens");
  MESHTP_CHECK(xp.cols == x.cols, "moe permute: {} columns into {}", x.cols, xp.cols);
  for (std::int64_t row = 0; row < d.rows(); ++row)
    std::copy_n(&x(d.token_of[row], 0), x.cols, &xp(row, 0));
}

void moe_permute_backward(MatrixView dx, ConstMatrixView dxp, const MoeDispatch& d) {
  check_rows(dxp.rows, d.rows(), "the permuted gradient");
  MESHTP_CHECK(dxp.cols == dx.cols, "moe permute backward: {} columns into {}", dxp.cols, dx.cols);
  for (std::int64_t row = 0; row < d.rows(); ++row) {
    float* out = &dx(d.token_of[row], 0);
    const float* in = &dxp(row, 0);
    for (std::int64_t c = 0; c < dx.cols; ++c) out[c] += in[c];
  }
}

void moe_combine(MatrixView y, ConstMatrixView yp, const MoeRouting& r, const MoeDispatch& d) {
  check_rows(y.rows, r.tokens, "the combined output");
  check_rows(yp.rows, d.rows(), "the experts' output");
  zero(y);
  for (std::int64_t n = 0; n < r.tokens; ++n) {
    float* out = &y(n, 0);
    for (std::int64_t j = 0; j < r.top_k; ++j) {
      const std::int64_t row = d.row_of[n * r.top_k + j];
      if (row < 0) continue;
      const float g = r.gate[n * r.top_k + j];
      const float* in = &yp(row, 0);
      for (std::int64_t c = 0; c < y.cols; ++c) out[c] += g * in[c];
    }
  }
}

void moe_combine_backward(MatrixView dyp, std::span<float> dgate, ConstMatrixView dy,
                          ConstMatrixView yp, const MoeRouting& r, const MoeDispatch& d) {
  check_rows(dy.rows, r.tokens, "dy");
  check_rows(dyp.rows, d.rows(), "dyp");
  MESHTP_CHECK(static_cast<std::int64_t>(dgate.size()) == r.tokens * r.top_k,
               "moe combine backward: dgate has {} values for {} tokens × top_k {}",
               dgate.size(), r.tokens, r.top_k);
  for (std::int64_t n = 0; n < r.tokens; ++n) {
    const float* g_out = &dy(n, 0);
    for (std::int64_t j = 0; j < r.top_k; ++j) {
      const std::int64_t a = n * r.top_k + j;
      const std::int64_t row = d.row_of[a];
      if (row < 0) {
        dgate[a] = 0.0f;
        continue;
      }
      const float g = r.gate[a];
      const float* out = &yp(row, 0);
      float* back = &dyp(row, 0);
      double dot = 0;
      for (std::int64_t c = 0; c < dy.cols; ++c) {
        back[c] = g * g_out[c];
        dot += static_cast<double>(g_out[c]) * out[c];
      }
      dgate[a] = static_cast<float>(dot);
    }
  }
}

void expert_mlp_forward(MatrixView y, MatrixView pre, MatrixView act, ConstMatrixView x,
                        ConstMatrixView w1, ConstMatrixView w2,
                        std::span<const std::int64_t> offsets) {
  const auto E = static_cast<std::int64_t>(offsets.size()) - 1;
  MESHTP_CHECK(E >= 1 && w1.rows % E == 0 && w2.rows == E * x.cols && w1.cols == x.cols &&
                   w2.cols == w1.rows / E,
               "expert MLP: W1 [{}, {}] and W2 [{}, {}] do not fit {} experts of hidden {}",
               w1.rows, w1.cols, w2.rows, w2.cols, E, x.cols);
  const std::int64_t F = w1.rows / E, h = x.cols;
  check_rows(x.rows, offsets.back(), "the experts' input");
  for (std::int64_t e = 0; e < E; ++e) {
    const std::int64_t r0 = offsets[e], n = offsets[e + 1] - offsets[e];
    if (n == 0) continue;
    const MatrixView pre_e = pre.block(r0, 0, n, F), act_e = act.block(r0, 0, n, F);
    linear_forward(pre_e, x.block(r0, 0, n, h), w1.block(e * F, 0, F, h), {});
    gelu_forward(act_e, pre_e);
    linear_forward(y.block(r0, 0, n, h), act_e, w2.block(e * h, 0, h, F), {});
  }
}

void expert_mlp_backward(MatrixView dx, MatrixView dw1, MatrixView dw2, MatrixView dact,
                         MatrixView dpre,
                         ConstMatrixView dy, ConstMatrixView x, ConstMatrixView pre,
                         ConstMatrixView act, ConstMatrixView w1, ConstMatrixView w2,
                         std::span<const std::int64_t> offsets) {
  const auto E = static_cast<std::int64_t>(offsets.size()) - 1;
  const std::int64_t F = w1.rows / E, h = x.cols;
  check_rows(dy.rows, offsets.back(), "the experts' output gradient");
  zero(dx);
  for (std::int64_t e = 0; e < E; ++e) {
    const std::int64_t r0 = offsets[e], n = offsets[e + 1] - offsets[e];
    if (n == 0) continue;
    const ConstMatrixView dy_e = dy.block(r0, 0, n, h), w2_e = w2.block(e * h, 0, h, F);
    const MatrixView dact_e = dact.block(r0, 0, n, F), dpre_e = dpre.block(r0, 0, n, F);
    zero(dact_e);
    zero(dpre_e);
    linear_backward_weight(dw2.block(e * h, 0, h, F), {}, dy_e, act.block(r0, 0, n, F));
    linear_backward_data(dact_e, dy_e, w2_e);
    gelu_backward(dpre_e, pre.block(r0, 0, n, F), dact_e);
    linear_backward_weight(dw1.block(e * F, 0, F, h), {}, dpre_e, x.block(r0, 0, n, h));
    linear_backward_data(dx.block(r0, 0, n, h), dpre_e, w1.block(e * F, 0, F, h));
  }
}

}  // namespace meshtp
