// Fused causal attention (flash-style): the attention core of ops/attention.hpp without its
// T×T buffer, with grouped-query attention and explicit query/key positions, so a ring
// context-parallel layer can run it on one key range at a time and merge the partial results.
// FlashAttention (Dao et al. 2022, Algorithms 1 and 2) in the loop order of FlashAttention-2
// (Dao 2023, §3.1): docs/references.md.
//
//   B    batch (or one chunk of it)                  NH   query heads     NKV  key/value heads
//   Tq   query rows per sequence (q has B·Tq rows)    HD   head dim        G = NH / NKV
//   Tk   key rows per sequence (k, v have B·Tk rows)
//
//   q:   (B·Tq, NH·HD)    row (b,t): head h is columns [h·HD, (h+1)·HD)
//   k,v: (B·Tk, NKV·HD)   query head h reads key/value head h / G (grouped-query attention;
//                         NKV = NH is multi-head attention, NKV = 1 multi-query)
//   out: (B·Tq, NH·HD)    heads contiguous, as the output projection expects
//   lse: B·NH·Tq floats   lse[(b·NH + h)·Tq + t] = L_t, the log-sum-exp of row t's scores
//   Any of them may be a strided view inside a wider buffer (the packed [q | k | v] rows of a
//   QKV projection: flash_attention_*_qkv below).
//
// Positions. Query row t sits at absolute position q_pos + t of its sequence, key row j at
// k_pos + j, and query t sees key j iff k_pos + j ≤ q_pos + t (causal by absolute position).
// q_pos = k_pos = 0 with Tq = Tk is ordinary causal self-attention; a ring step of context
// parallelism (zigzag chunks) passes the positions of the chunks it holds.
//
// Forward, for each (b, h), with scale = 1/√HD, S = scale·Q·Kᵀ restricted to what t sees:
//   O_t = Σ_j softmax_j(S_t)·V_j,   L_t = log Σ_j e^(S_tj)
// computed in tiles of block_q query rows × block_k keys with an online softmax: per row a
// running max m and sum l, and an unnormalised accumulator A (block_q × HD); for each key
// tile [c0, c1):
//   S = scale·Q[r0:r1]·K[c0:c1]ᵀ                      (meshtp::gemm on strided views)
//   m' = max(m, max_j S_tj);  P = e^(S − m');  l = e^(m − m')·l + Σ_j P_tj
//   A  = e^(m − m')·A + P·V[c0:c1]                    (meshtp::gemm)
// and at the end O = A / l, L = m + log l. A row that sees no key of the range (possible for
// a key range: all its keys lie after the row) gets O = 0 and L = −∞, the identity of merge.
// Key tiles that no row of a query tile sees (past the diagonal) are skipped, not computed.
// Memory per call: the tiles (block_q × block_k scores, block_q × HD accumulator, block_q
// row statistics), independent of T; nothing T×T. What the backward needs is O and L: O(T).
//
// Backward (FlashAttention-2 Algorithm 2), for each (b, h), given dO and the forward's O, L:
//   D_t = Σ_d dO_td·O_td                              (= Σ_j P_tj·dP_tj: the softmax's row term)
//   for each key tile [c0, c1), for each query tile [r0, r1) that sees some of it:
//     P  = e^(scale·Q[r0:r1]·K[c0:c1]ᵀ − L)           (recomputed, 0 where masked)
//     dV[c0:c1] += Pᵀ·dO[r0:r1]
//     dP = dO[r0:r1]·V[c0:c1]ᵀ
//     dS = P ⊙ (dP − D)
//     dQ[r0:r1] += scale·dS·K[c0:c1]
//     dK[c0:c1] += scale·dSᵀ·Q[r0:r1]
// dq, dk, dv are added to (+=), so the G query heads of one KV head add into its dK, dV, and a
// ring's steps over key ranges add into one dQ. Over a key range, O and L must be the FINAL
// ones (after every range was merged): then P above is the true softmax restricted to the
// range, and the sum of the ranges' backwards is the full backward.
//
// Products: the forward 2 and the backward 5 (the scores are recomputed) per visible tile,
// against today's attention's 2 and 4 per visible row block; flash_attention_flops() counts
// them as the op runs them. Simulated build, charged mode: each entry point charges those
// FLOPs (at the device's GeMM rate) and the O(T) bytes it touches, and computes nothing.
#pragma once

#include <cstdint>
#include <span>

#include "core/flash_attention_shape.hpp"  // FlashAttention
#include "tensor/tensor.hpp"

namespace meshtp {

// B·NH·Tq: the floats of lse for q_rows = B·Tq query rows.
std::int64_t flash_attention_lse_size(const FlashAttention& a, std::int64_t q_rows);
// Floats of scratch the forward and the backward need for Tq query and Tk key rows per
// sequence and head dim HD: the tiles and D, O(block_q·block_k + Tq), independent of T².
std::int64_t flash_attention_scratch_size(const FlashAttention& a, std::int64_t Tq, std::int64_t Tk,
                                          std::int64_t HD);

// out = attention of q over the keys k, v (positions as above); lse = each row's L.
// scratch ≥ flash_attention_scratch_size (as every op here, the caller owns every buffer).
void flash_attention_forward(MatrixView out, std::span<float> lse, std::span<float> scratch,
                             ConstMatrixView q, ConstMatrixView k, ConstMatrixView v,
                             const FlashAttention& a);

// dq += ∂/∂q, dk += ∂/∂k, dv += ∂/∂v of Σ dout ⊙ out, given the forward's out and lse.
void flash_attention_backward(MatrixView dq, MatrixView dk, MatrixView dv, std::span<float> scratch,
                              ConstMatrixView dout, ConstMatrixView q, ConstMatrixView k,
                              ConstMatrixView v, ConstMatrixView out, std::span<const float> lse,
                              const FlashAttention& a);

// Merges a partial result (out_b, lse_b) over a key set K_b into (out, lse) over a disjoint
// key set K_a, in place: (out, lse) becomes the attention over K_a ∪ K_b. With
// O_x = Σ_{j∈K_x} e^(S_j − L_x)·V_j and L_x = log Σ_{j∈K_x} e^(S_j), per row and head:
//   L = log(e^(L_a) + e^(L_b)) = M + log1p(e^(−|L_a − L_b|)),   M = max(L_a, L_b)
//   O = e^(L_a − L)·O_a + e^(L_b − L)·O_b
// A side with L = −∞ (no key) contributes nothing; both −∞ leave O = 0, L = −∞. Merging is
// associative and commutative up to rounding, so a ring may merge its steps in any order.
void flash_attention_merge(MatrixView out, std::span<float> lse, ConstMatrixView out_b,
                           std::span<const float> lse_b, const FlashAttention& a);

// The same over the packed rows of a QKV projection: qkv is (B·T, (NH + 2·NKV)·HD), row
// (b,t) = [ q (NH·HD) | k (NKV·HD) | v (NKV·HD) ], causal self-attention (positions 0..T−1).
// With NKV = NH this is ops/attention.hpp's qkv layout: the forward's out equals
// attention_forward's, and the backward adds what attention_backward adds to dqkv.
// scratch ≥ flash_attention_scratch_size(a, T, T, HD) with a's block sizes the defaults.
void flash_attention_forward_qkv(MatrixView out, std::span<float> lse, std::span<float> scratch,
                                 ConstMatrixView qkv, std::int64_t B, std::int64_t T,
                                 std::int64_t NH, std::int64_t NKV);
void flash_attention_backward_qkv(MatrixView dqkv, std::span<float> scratch, ConstMatrixView dout,
                                  ConstMatrixView qkv, ConstMatrixView out,
                                  std::span<const float> lse, std::int64_t B, std::int64_t T,
                                  std::int64_t NH, std::int64_t NKV);

// The FLOPs (2·m·n·k per product) of the products one call runs for Tq query and Tk key rows
// per sequence and head dim HD: what meshtp::gemm's ledger counts and the simulated build
// charges.
double flash_attention_flops(const FlashAttention& a, std::int64_t Tq, std::int64_t Tk,
                             std::int64_t HD, bool backward);

}  // namespace meshtp
