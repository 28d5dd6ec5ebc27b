// The fused causal attention (ops/flash_attention.hpp) against today's attention
// (ops/attention.hpp) for multi-head attention, against a reference that repeats the KV heads
// for grouped-query attention, against finite differences, and over key ranges merged as a
// ring of context parallelism merges them.
#include "ops/flash_attention.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/simulation.hpp"
#include "grad_check.hpp"
#include "ops/attention.hpp"
#include "tensor/gemm.hpp"

namespace meshtp {
namespace {

using testing::check_gradient;
using testing::dot;
using testing::error_message;
using testing::kFdTol;
using testing::plus;
using testing::test_tensor;

struct Case {
  std::int64_t B, T, NH, NKV, HD;
};

std::string name(const Case& c) {
  return "B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) + " NH=" + std::to_string(c.NH) +
         " NKV=" + std::to_string(c.NKV) + " HD=" + std::to_string(c.HD);
}

// Scratch for packed self-attention at the default tiles.
Tensor scratch_for(std::int64_t T, std::int64_t HD, const FlashAttention& a = {}) {
  return Tensor({flash_attention_scratch_size(a, T, T, HD)});
}

// Forward and backward of the fused op on packed qkv: out, lse, dqkv.
struct FlashRun {
  Tensor out, lse, dqkv;
};
FlashRun run_flash(const Tensor& qkv, const Tensor& dout, const Case& c) {
  FlashRun r{Tensor({c.B * c.T, c.NH * c.HD}, 7.0f), Tensor({c.B * c.NH * c.T}),
             Tensor(qkv.shape())};
  Tensor scratch = scratch_for(c.T, c.HD);
  flash_attention_forward_qkv(r.out.matrix(), r.lse.values(), scratch.values(), qkv.matrix(), c.B,
                              c.T, c.NH, c.NKV);
  flash_attention_backward_qkv(r.dqkv.matrix(), scratch.values(), dout.matrix(), qkv.matrix(),
                               r.out.matrix(), r.lse.values(), c.B, c.T, c.NH, c.NKV);
  return r;
}

// Today's attention, forward and backward: out and dqkv.
std::pair<Tensor, Tensor> run_today(const Tensor& qkv, const Tensor& dout, std::int64_t B,
                                    std::int64_t T, std::int64_t NH) {
  const std::int64_t Cp = qkv.dim(1) / 3;
  Tensor out({B * T, Cp}), att({attention_att_size(B, T, NH)}), scratch({T * T}), dqkv(qkv.shape());
  attention_forward(out.matrix(), att.values(), qkv.matrix(), B, T, NH);
  attention_backward(dqkv.matrix(), scratch.values(), dout.matrix(), qkv.matrix(), att.values(), B,
                     T, NH);
  return {std::move(out), std::move(dqkv)};
}

constexpr double kFlashTol = 2e-5;  // fp32, relative to the largest element (max_relative_error)

TEST(FlashAttention, EqualsTodaysAttentionForMultiHead) {
  for (const Case c : {Case{1, 1, 1, 1, 4}, Case{2, 7, 3, 3, 4}, Case{1, 64, 2, 2, 8},
                       Case{2, 129, 2, 2, 16}, Case{1, 300, 3, 3, 8}, Case{3, 65, 1, 1, 64}}) {
    const std::int64_t Cp = c.NH * c.HD;
    const Tensor qkv = test_tensor({c.B * c.T, 3 * Cp}, 11, 2.0f);
    const Tensor dout = test_tensor({c.B * c.T, Cp}, 12);
    const auto [out, dqkv] = run_today(qkv, dout, c.B, c.T, c.NH);
    const FlashRun f = run_flash(qkv, dout, c);
    EXPECT_LT(max_relative_error(f.out.values(), out.values()), kFlashTol) << name(c);
    EXPECT_LT(max_relative_error(f.dqkv.values(), dqkv.values()), kFlashTol) << name(c);
  }
}

// Tiles smaller than the sequence and not dividing it: the online softmax over many key
// tiles, partial tiles at both ends, the diagonal inside a tile.
TEST(FlashAttention, SmallAndRaggedTilesGiveTheSameResult) {
  const Case c{2, 129, 2, 2, 8};
  const std::int64_t Cp = c.NH * c.HD;
  const Tensor qkv = test_tensor({c.B * c.T, 3 * Cp}, 13, 3.0f);
  const Tensor dout = test_tensor({c.B * c.T, Cp}, 14);
  const auto [out, dqkv] = run_today(qkv, dout, c.B, c.T, c.NH);
  const ConstMatrixView all = qkv.matrix();
  for (const auto& [bq, bk] : {std::pair{1, 1}, {7, 5}, {16, 32}, {32, 16}, {200, 300}}) {
    const FlashAttention a{
        .batch = c.B, .heads = c.NH, .kv_heads = c.NKV, .block_q = bq, .block_k = bk};
    Tensor o({c.B * c.T, Cp}), lse({c.B * c.NH * c.T}), d(qkv.shape());
    Tensor scratch({flash_attention_scratch_size(a, c.T, c.T, c.HD)});
    const ConstMatrixView q = all.block(0, 0, c.B * c.T, Cp), k = all.block(0, Cp, c.B * c.T, Cp),
                          v = all.block(0, 2 * Cp, c.B * c.T, Cp);
    flash_attention_forward(o.matrix(), lse.values(), scratch.values(), q, k, v, a);
    const MatrixView dm = d.matrix();
    flash_attention_backward(dm.block(0, 0, c.B * c.T, Cp), dm.block(0, Cp, c.B * c.T, Cp),
                             dm.block(0, 2 * Cp, c.B * c.T, Cp), scratch.values(), dout.matrix(), q,
                             k, v, o.matrix(), lse.values(), a);
    EXPECT_LT(max_relative_error(o.values(), out.values()), kFlashTol) << bq << "x" << bk;
    EXPECT_LT(max_relative_error(d.values(), dqkv.values()), kFlashTol) << bq << "x" << bk;
  }
}

// Grouped-query attention equals multi-head attention with each KV head repeated for its
// NH/NKV query heads; its dK, dV are the sums over the repeated copies.
TEST(FlashAttention, GroupedQueryEqualsRepeatedKvHeads) {
  for (const Case c :
       {Case{2, 9, 4, 2, 4}, Case{1, 70, 6, 2, 8}, Case{2, 33, 4, 1, 8}, Case{1, 300, 8, 2, 4}}) {
    const std::int64_t G = c.NH / c.NKV, Cq = c.NH * c.HD, Ckv = c.NKV * c.HD, rows = c.B * c.T;
    const Tensor qkv = test_tensor({rows, Cq + 2 * Ckv}, 15, 2.0f);
    const Tensor dout = test_tensor({rows, Cq}, 16);
    Tensor wide({rows, 3 * Cq});  // q, then k and v with head g copied to heads g·G … g·G+G−1
    copy(qkv.matrix().block(0, 0, rows, Cq), wide.matrix().block(0, 0, rows, Cq));
    for (std::int64_t h = 0; h < c.NH; ++h) {
      for (const std::int64_t part : {1, 2}) {
        copy(qkv.matrix().block(0, Cq + (part - 1) * Ckv + (h / G) * c.HD, rows, c.HD),
             wide.matrix().block(0, part * Cq + h * c.HD, rows, c.HD));
      }
    }
    const auto [out, dwide] = run_today(wide, dout, c.B, c.T, c.NH);
    Tensor expected(qkv.shape());  // dq as is; dk, dv summed over each group
    copy(dwide.matrix().block(0, 0, rows, Cq), expected.matrix().block(0, 0, rows, Cq));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t h = 0; h < c.NH; ++h) {
        for (const std::int64_t part : {1, 2}) {
          for (std::int64_t e = 0; e < c.HD; ++e) {
            expected.at({r, Cq + (part - 1) * Ckv + (h / G) * c.HD + e}) +=
                dwide.at({r, part * Cq + h * c.HD + e});
          }
        }
      }
    }
    const FlashRun f = run_flash(qkv, dout, c);
    EXPECT_LT(max_relative_error(f.out.values(), out.values()), kFlashTol) << name(c);
    EXPECT_LT(max_relative_error(f.dqkv.values(), expected.values()), kFlashTol) << name(c);
  }
}

TEST(FlashAttention, GradientMatchesFiniteDifferences) {
  for (const Case c : {Case{2, 5, 2, 2, 4}, Case{1, 9, 4, 2, 3}, Case{1, 6, 3, 1, 2}}) {
    const std::int64_t rows = c.B * c.T, Cq = c.NH * c.HD;
    Tensor qkv = test_tensor({rows, (c.NH + 2 * c.NKV) * c.HD}, 21, 1.5f);
    const Tensor dout = test_tensor({rows, Cq}, 22);
    // Tiles of 2 queries × 3 keys, so the FD check covers the online softmax across tiles.
    const FlashAttention a{
        .batch = c.B, .heads = c.NH, .kv_heads = c.NKV, .block_q = 2, .block_k = 3};
    Tensor out({rows, Cq}), lse({c.B * c.NH * c.T});
    Tensor scratch({flash_attention_scratch_size(a, c.T, c.T, c.HD)});
    const auto views = [&](auto m) {
      return std::array{m.block(0, 0, rows, Cq), m.block(0, Cq, rows, c.NKV * c.HD),
                        m.block(0, Cq + c.NKV * c.HD, rows, c.NKV * c.HD)};
    };
    const auto loss = [&] {
      const auto [q, k, v] = views(ConstMatrixView(qkv.matrix()));
      flash_attention_forward(out.matrix(), lse.values(), scratch.values(), q, k, v, a);
      return dot(dout.values(), out.values());
    };
    loss();
    Tensor dqkv(qkv.shape());
    const auto [q, k, v] = views(ConstMatrixView(qkv.matrix()));
    const auto [dq, dk, dv] = views(dqkv.matrix());
    flash_attention_backward(dq, dk, dv, scratch.values(), dout.matrix(), q, k, v, out.matrix(),
                             lse.values(), a);
    const auto r = check_gradient(qkv.values(), dqkv.values(), loss);
    EXPECT_LT(r.error, kFdTol) << "dqkv, " << name(c) << ": " << r;
  }
}

TEST(FlashAttention, BackwardAddsIntoItsGradients) {
  const Case c{2, 11, 4, 2, 3};
  const Tensor qkv = test_tensor({c.B * c.T, (c.NH + 2 * c.NKV) * c.HD}, 1);
  const Tensor dout = test_tensor({c.B * c.T, c.NH * c.HD}, 2);
  const FlashRun f = run_flash(qkv, dout, c);
  const Tensor prior = test_tensor(qkv.shape(), 3);
  Tensor acc = prior, scratch = scratch_for(c.T, c.HD);
  flash_attention_backward_qkv(acc.matrix(), scratch.values(), dout.matrix(), qkv.matrix(),
                               f.out.matrix(), f.lse.values(), c.B, c.T, c.NH, c.NKV);
  EXPECT_LT(max_relative_error(acc.values(), plus(prior, f.dqkv).values()), 1e-6);
}

// What a tensor-parallel rank does with grouped-query attention: its NH/tp query heads and
// the KV heads they read — its NKV/tp own when tp ≤ NKV, else the one KV head it shares with
// tp/NKV other ranks (replicated, as Megatron-LM does) — packed into a local qkv, give exactly
// those heads' columns of the full output, of dq, and of dk, dv summed over the ranks that
// hold each KV head.
TEST(FlashAttention, TensorParallelShareOfHeadsEqualsThoseHeadsOfTheFullRun) {
  const std::int64_t B = 2, T = 19, NH = 8, NKV = 2, HD = 3, rows = B * T;
  const std::int64_t Cq = NH * HD, Ckv = NKV * HD;
  const Tensor qkv = test_tensor({rows, Cq + 2 * Ckv}, 61, 2.0f);
  const Tensor dout = test_tensor({rows, Cq}, 62);
  const FlashRun full = run_flash(qkv, dout, {B, T, NH, NKV, HD});
  for (const std::int64_t tp : {1, 2, 4, 8}) {
    const std::int64_t nh = NH / tp, nkv = std::max<std::int64_t>(1, NKV / tp);
    Tensor dkv_sum({rows, 2 * Ckv});  // dk, dv summed over the ranks
    for (std::int64_t rank = 0; rank < tp; ++rank) {
      const std::int64_t h0 = rank * nh, g0 = h0 / (NH / NKV);  // first query and KV head
      Tensor local({rows, (nh + 2 * nkv) * HD}), dout_l({rows, nh * HD});
      copy(qkv.matrix().block(0, h0 * HD, rows, nh * HD),
           local.matrix().block(0, 0, rows, nh * HD));
      for (const std::int64_t part : {0, 1}) {  // k, v
        copy(qkv.matrix().block(0, Cq + part * Ckv + g0 * HD, rows, nkv * HD),
             local.matrix().block(0, (nh + part * nkv) * HD, rows, nkv * HD));
      }
      copy(dout.matrix().block(0, h0 * HD, rows, nh * HD), dout_l.matrix());
      const FlashRun l = run_flash(local, dout_l, {B, T, nh, nkv, HD});
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < nh * HD; ++c) {
          EXPECT_NEAR(l.out.at({r, c}), full.out.at({r, h0 * HD + c}), 1e-6) << "tp=" << tp;
          EXPECT_NEAR(l.dqkv.at({r, c}), full.dqkv.at({r, h0 * HD + c}), 1e-6) << "tp=" << tp;
        }
        for (const std::int64_t part : {0, 1}) {
          for (std::int64_t c = 0; c < nkv * HD; ++c) {
            dkv_sum.at({r, part * Ckv + g0 * HD + c}) += l.dqkv.at({r, (nh + part * nkv) * HD + c});
          }
        }
      }
    }
    const Tensor full_dkv = [&] {
      Tensor t({rows, 2 * Ckv});
      copy(full.dqkv.matrix().block(0, Cq, rows, 2 * Ckv), t.matrix());
      return t;
    }();
    EXPECT_LT(max_relative_error(dkv_sum.values(), full_dkv.values()), 1e-6) << "tp=" << tp;
  }
}

// What a ring of context parallelism does with one sequence cut into chunks: each query chunk
// against each key chunk (positions by chunk), merged; the backward over each key range with
// the merged out and lse, dQ summed over the ranges. Chunk cuts include uneven ones and the
// zigzag's order (the later chunk first).
TEST(FlashAttention, KeyRangePartialsMergeIntoTheFullAttention) {
  const std::int64_t B = 2, T = 37, NH = 4, NKV = 2, HD = 4, Cq = NH * HD, Ckv = NKV * HD;
  const Tensor qkv = test_tensor({B * T, Cq + 2 * Ckv}, 31, 2.0f);
  const Tensor dout = test_tensor({B * T, Cq}, 32);
  const FlashRun full = run_flash(qkv, dout, {B, T, NH, NKV, HD});
  // Rows [t0, t1) of every sequence, as a contiguous tensor of B·(t1−t0) rows.
  const auto rows_of = [&](const Tensor& x, std::int64_t t0, std::int64_t t1) {
    Tensor r({B * (t1 - t0), x.dim(1)});
    for (std::int64_t b = 0; b < B; ++b) {
      copy(x.matrix().block(b * T + t0, 0, t1 - t0, x.dim(1)),
           r.matrix().block(b * (t1 - t0), 0, t1 - t0, x.dim(1)));
    }
    return r;
  };
  for (const std::vector<std::int64_t>& cuts :
       {std::vector<std::int64_t>{0, 37}, {0, 20, 37}, {0, 9, 18, 28, 37}, {0, 1, 36, 37}}) {
    const std::size_t n = cuts.size() - 1;
    Tensor dqkv_ring(qkv.shape());
    for (std::size_t qi = 0; qi < n; ++qi) {
      const std::int64_t q0 = cuts[qi], q1 = cuts[qi + 1], tq = q1 - q0;
      const Tensor qc = rows_of(qkv, q0, q1), doc = rows_of(dout, q0, q1);
      const ConstMatrixView qv = qc.matrix().block(0, 0, B * tq, Cq);
      Tensor out({B * tq, Cq}), lse({B * NH * tq}), part({B * tq, Cq}), lse_part({B * NH * tq});
      const float inf = std::numeric_limits<float>::infinity();
      std::fill(lse.values().begin(), lse.values().end(), -inf);  // nothing yet: O = 0, L = −∞
      for (std::size_t step = 0; step < n; ++step) {
        const std::size_t ki = n - 1 - step;  // later key chunks first
        const std::int64_t k0 = cuts[ki], tk = cuts[ki + 1] - k0;
        const Tensor kc = rows_of(qkv, k0, cuts[ki + 1]);
        const FlashAttention a{.batch = B,
                               .heads = NH,
                               .kv_heads = NKV,
                               .q_pos = q0,
                               .k_pos = k0,
                               .block_q = 4,
                               .block_k = 8};
        Tensor scratch({flash_attention_scratch_size(a, tq, tk, HD)});
        flash_attention_forward(part.matrix(), lse_part.values(), scratch.values(), qv,
                                kc.matrix().block(0, Cq, B * tk, Ckv),
                                kc.matrix().block(0, Cq + Ckv, B * tk, Ckv), a);
        flash_attention_merge(out.matrix(), lse.values(), part.matrix(), lse_part.values(), a);
      }
      for (std::int64_t b = 0; b < B; ++b) {
        for (std::int64_t t = 0; t < tq; ++t) {
          for (std::int64_t c = 0; c < Cq; ++c) {
            EXPECT_NEAR(out.at({b * tq + t, c}), full.out.at({b * T + q0 + t, c}), 1e-5)
                << "cuts " << n << " b=" << b << " t=" << q0 + t;
          }
          for (std::int64_t h = 0; h < NH; ++h) {
            EXPECT_NEAR(lse[(b * NH + h) * tq + t], full.lse[(b * NH + h) * T + q0 + t], 1e-5);
          }
        }
      }
      // Backward over each key range with the merged (out, lse): dq adds up, dk, dv land on
      // the key chunk's rows.
      Tensor dqc({B * tq, Cq});
      for (std::size_t ki = 0; ki < n; ++ki) {
        const std::int64_t k0 = cuts[ki], k1 = cuts[ki + 1], tk = k1 - k0;
        const Tensor kc = rows_of(qkv, k0, k1);
        Tensor dkvc({B * tk, 2 * Ckv});
        const FlashAttention a{.batch = B,
                               .heads = NH,
                               .kv_heads = NKV,
                               .q_pos = q0,
                               .k_pos = k0,
                               .block_q = 4,
                               .block_k = 8};
        Tensor scratch({flash_attention_scratch_size(a, tq, tk, HD)});
        flash_attention_backward(dqc.matrix(), dkvc.matrix().block(0, 0, B * tk, Ckv),
                                 dkvc.matrix().block(0, Ckv, B * tk, Ckv), scratch.values(),
                                 doc.matrix(), qv, kc.matrix().block(0, Cq, B * tk, Ckv),
                                 kc.matrix().block(0, Cq + Ckv, B * tk, Ckv), out.matrix(),
                                 lse.values(), a);
        for (std::int64_t b = 0; b < B; ++b) {
          for (std::int64_t t = 0; t < tk; ++t) {
            for (std::int64_t c = 0; c < 2 * Ckv; ++c) {
              dqkv_ring.at({b * T + k0 + t, Cq + c}) += dkvc.at({b * tk + t, c});
            }
          }
        }
      }
      for (std::int64_t b = 0; b < B; ++b) {
        copy(dqc.matrix().block(b * tq, 0, tq, Cq),
             dqkv_ring.matrix().block(b * T + q0, 0, tq, Cq));
      }
    }
    EXPECT_LT(max_relative_error(dqkv_ring.values(), full.dqkv.values()), kFlashTol)
        << cuts.size() - 1 << " chunks";
  }
}

// Keys all after the queries: no row sees any key: O = 0, L = −∞, and merging that changes
// nothing; its backward adds nothing.
TEST(FlashAttention, RangeWithNoVisibleKeyIsTheIdentityOfMerge) {
  const std::int64_t B = 1, NH = 2, HD = 3, T = 5;
  const Tensor q = test_tensor({B * T, NH * HD}, 41), kv = test_tensor({B * T, 2 * NH * HD}, 42);
  const FlashAttention a{.batch = B, .heads = NH, .kv_heads = NH, .q_pos = 0, .k_pos = 5};
  Tensor out({B * T, NH * HD}, 3.0f), lse({B * NH * T}),
      scratch({flash_attention_scratch_size(a, T, T, HD)});
  const ConstMatrixView k = kv.matrix().block(0, 0, T, NH * HD),
                        v = kv.matrix().block(0, NH * HD, T, NH * HD);
  flash_attention_forward(out.matrix(), lse.values(), scratch.values(), q.matrix(), k, v, a);
  for (const float o : out.values()) EXPECT_EQ(o, 0.0f);
  for (const float l : lse.values()) EXPECT_EQ(l, -std::numeric_limits<float>::infinity());
  Tensor other = test_tensor({B * T, NH * HD}, 43), other_lse = test_tensor({B * NH * T}, 44);
  const Tensor before = other, before_lse = other_lse;
  flash_attention_merge(other.matrix(), other_lse.values(), out.matrix(), lse.values(), a);
  EXPECT_EQ(max_abs_diff(other.values(), before.values()), 0.0);
  EXPECT_EQ(max_abs_diff(other_lse.values(), before_lse.values()), 0.0);
  Tensor dq({B * T, NH * HD}), dkv({B * T, 2 * NH * HD});
  flash_attention_backward(dq.matrix(), dkv.matrix().block(0, 0, T, NH * HD),
                           dkv.matrix().block(0, NH * HD, T, NH * HD), scratch.values(),
                           other.matrix(), q.matrix(), k, v, other.matrix(), other_lse.values(), a);
  for (const float g : dq.values()) EXPECT_EQ(g, 0.0f);
  for (const float g : dkv.values()) EXPECT_EQ(g, 0.0f);
}

// The products skip what the mask zeroes: the ledger counts exactly flash_attention_flops,
// which for T a multiple of the tiles is about half of the full 2 + 5 products.
TEST(FlashAttention, FlopsAreTheVisibleTilesProducts) {
  const Case c{2, 256, 2, 1, 8};
  const Tensor qkv = test_tensor({c.B * c.T, (c.NH + 2 * c.NKV) * c.HD}, 1);
  const Tensor dout = test_tensor({c.B * c.T, c.NH * c.HD}, 2);
  const FlashAttention a{.batch = c.B, .heads = c.NH, .kv_heads = c.NKV};
  const ComputeLedger before = compute_ledger();
  const FlashRun f = run_flash(qkv, dout, c);
  const double fwd = flash_attention_flops(a, c.T, c.T, c.HD, false);
  const double bwd = flash_attention_flops(a, c.T, c.T, c.HD, true);
  EXPECT_DOUBLE_EQ(compute_ledger().flops - before.flops, fwd + bwd);
  const double full = 2.0 * c.B * c.NH * c.T * c.T * c.HD;  // one T×T×HD product, all heads
  // Tiles of 64 queries × 256 keys: the forward's query tiles see 64, 128, 192, 256 keys.
  EXPECT_DOUBLE_EQ(fwd, 2 * full * (64.0 + 128 + 192 + 256) / (4 * 256));
  // One key tile; each query tile computes the keys its last row sees.
  EXPECT_DOUBLE_EQ(bwd, 5 * full * (64.0 + 128 + 192 + 256) / (4 * 256));
}

void no_clock_advance(double /*seconds*/) {}

// The simulated build's charged mode (core/simulation.hpp): each entry point charges its
// products' FLOPs at the GeMM rate and its O(T) bytes at the elementwise rate, once, and
// computes nothing (out keeps its stale values).
TEST(FlashAttention, ChargedModeChargesTheProductsAndComputesNothing) {
  constexpr double kFlopsPerS = 1e9, kBytesPerS = 1e8;
  const Case c{2, 96, 4, 2, 8};
  const std::int64_t rows = c.B * c.T, Cq = c.NH * c.HD, Ckv = c.NKV * c.HD;
  const Tensor qkv = test_tensor({rows, Cq + 2 * Ckv}, 51), dout = test_tensor({rows, Cq}, 52);
  Tensor out({rows, Cq}, 5.0f), lse({c.B * c.NH * c.T}), dqkv(qkv.shape());
  Tensor scratch = scratch_for(c.T, c.HD);
  const FlashAttention a{.batch = c.B, .heads = c.NH, .kv_heads = c.NKV};
  const simhooks::Hooks saved = simhooks::hooks();
  simhooks::Hooks& h = simhooks::hooks();
  h.mode = simhooks::Mode::kCharged;
  h.advance = &no_clock_advance;
  h.gemm = GemmModel(kFlopsPerS);
  h.elementwise_bytes_per_s = kBytesPerS;
  h.charged_s = 0;
  const ComputeLedger before = compute_ledger();
  flash_attention_forward_qkv(out.matrix(), lse.values(), scratch.values(), qkv.matrix(), c.B, c.T,
                              c.NH, c.NKV);
  const double forward = h.charged_s;
  flash_attention_backward_qkv(dqkv.matrix(), scratch.values(), dout.matrix(), qkv.matrix(),
                               out.matrix(), lse.values(), c.B, c.T, c.NH, c.NKV);
  const double backward = h.charged_s - forward;
  const double gemm_calls = compute_ledger().gemm_calls - before.gemm_calls;
  simhooks::hooks() = saved;
  const double q_elems = rows * Cq, kv_elems = rows * Ckv;
  EXPECT_NEAR(forward,
              flash_attention_flops(a, c.T, c.T, c.HD, false) / kFlopsPerS +
                  4 * (2 * q_elems + 2 * kv_elems) / kBytesPerS,
              1e-12);
  EXPECT_NEAR(backward,
              flash_attention_flops(a, c.T, c.T, c.HD, true) / kFlopsPerS +
                  4 * (4 * q_elems + 4 * kv_elems) / kBytesPerS,
              1e-12);
  EXPECT_EQ(gemm_calls, 0);
  for (const float o : out.values()) ASSERT_EQ(o, 5.0f);
}

TEST(FlashAttention, RejectsBadShapesNamingTheValues) {
  const Tensor qkv({8, 40});
  Tensor out({8, 16}), lse({2 * 4 * 4}), scratch({4096}), dqkv({8, 40});
  const auto fwd = [&](std::int64_t B, std::int64_t T, std::int64_t NH, std::int64_t NKV) {
    return error_message([&] {
      flash_attention_forward_qkv(out.matrix(), lse.values(), scratch.values(), qkv.matrix(), B, T,
                                  NH, NKV);
    });
  };
  EXPECT_NE(fwd(2, 4, 6, 4).find("heads NH=6 is not a multiple of kv_heads NKV=4"),
            std::string::npos);
  EXPECT_NE(fwd(2, 4, 4, 4).find("qkv width 40 is not (NH + 2·NKV)·HD for NH=4, NKV=4"),
            std::string::npos);
  EXPECT_NE(fwd(4, 4, 4, 2).find("qkv has 8 rows, expected B·T = 4·4 = 16"), std::string::npos);
  EXPECT_NE(fwd(2, 4, 0, 2).find("NH=0"), std::string::npos);
  // 40 = (2 + 2·1)·10 … width fine, output not: out is 8x16, q is 8x20
  EXPECT_NE(fwd(2, 4, 2, 1).find("out is 8x16, q is 8x20"), std::string::npos);
  Tensor small({3});
  Tensor out2({8, 20});  // NH=4, NKV=2: HD = 40 / 8 = 5
  EXPECT_NE(error_message([&] {
              flash_attention_forward_qkv(out2.matrix(), lse.values(), small.values(), qkv.matrix(),
                                          2, 4, 4, 2);
            }).find("scratch has 3 floats, needs"),
            std::string::npos);
  Tensor lse_bad({5});
  EXPECT_NE(error_message([&] {
              flash_attention_forward_qkv(out2.matrix(), lse_bad.values(), scratch.values(),
                                          qkv.matrix(), 2, 4, 4, 2);
            }).find("lse has 5 floats, expected B·NH·Tq = 2·4·4 = 32"),
            std::string::npos);
  // Separate views: k of the wrong width, v unlike k, rows not a multiple of the batch.
  const Tensor q({8, 20}), k({8, 10}), v({8, 6}), k_rows({7, 10});
  const FlashAttention a{.batch = 2, .heads = 4, .kv_heads = 2};
  EXPECT_NE(error_message([&] {
              flash_attention_forward(out2.matrix(), lse.values(), scratch.values(), q.matrix(),
                                      v.matrix(), v.matrix(), a);
            }).find("k is 8x6, expected width NKV·HD = 2·5 = 10"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              flash_attention_forward(out2.matrix(), lse.values(), scratch.values(), q.matrix(),
                                      k.matrix(), v.matrix(), a);
            }).find("v is 8x6, k is 8x10"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              flash_attention_forward(out2.matrix(), lse.values(), scratch.values(), q.matrix(),
                                      k_rows.matrix(), k_rows.matrix(), a);
            }).find("k has 7 rows, not B·Tk for batch B=2"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              flash_attention_backward_qkv(dqkv.matrix().block(0, 0, 8, 20), scratch.values(),
                                           out2.matrix(), qkv.matrix(), out2.matrix(), lse.values(),
                                           2, 4, 4, 2);
            }).find("dqkv is 8x20, qkv is 8x40"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtp
