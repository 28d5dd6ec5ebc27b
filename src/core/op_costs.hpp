// What one call of each memory-bound op costs: reads + writes per element ("touches"). The
// planner prices elementwise work with these (plan/elementwise.hpp: elements · touches ·
// bytes / elementwise rate), `meshtp calibrate` measures the rate counting with them, and the
// simulated build charges each op's call with them (core/simulation.hpp), so all three count
// the same bytes.
//
//   op        forward                                    backward
//   ln        3  read x (row sums), read x, write y      6  read x, dy (row sums); read x, dy,
//                                                           dx, write dx
//   bias      2  read y, write y                         1  read dy (db = Σ_n dy)
//   softmax   3.5  on the causal half (½ of s×s): max r, 3  on the causal half: dot r p, r dP;
//                exp r+w, sum r, scale r+w (6·½); zeros     update r p, r dP, w dS (5·½);
//                written to the masked half (½)             zeros to the masked half (½)
//   residual  3  read a, b, write y                      2  copy dy into the branch's gradient
//   gelu      2  read x, write y                         5  zero dx; read x, dy, dx, write dx
//
// Outside the transformer layer (the planner does not price these; the simulator charges them
// so a whole training step is charged):
//   embedding     2  read a table row, write out         2  read dout, add into the table row
//   cross-entropy 3  row max, exp-sum, read logit        3  read logits, write dlogits, read lse
//   adamw         7  read w, g, m, v; write w, m, v
//
// Priced for runtimes that have it (Megatron-LM; meshtp's runtime has no dropout):
//   dropout   2  read x, write y; and a 1-byte mask     2  read dy, write dx; read the mask
//                written                                  (kDropoutMaskBytes per element)
#pragma once

#include <algorithm>
#include <cstdint>

namespace meshtp::op_costs {

inline constexpr double kLayerNormForwardTouches = 3, kLayerNormBackwardTouches = 6;
inline constexpr double kBiasForwardTouches = 2, kBiasBackwardTouches = 1;
inline constexpr double kSoftmaxForwardTouches = 3.5, kSoftmaxBackwardTouches = 3;
inline constexpr double kResidualForwardTouches = 3, kResidualBackwardTouches = 2;
inline constexpr double kGeluForwardTouches = 2, kGeluBackwardTouches = 5;
inline constexpr double kEmbeddingForwardTouches = 2, kEmbeddingBackwardTouches = 2;
inline constexpr double kCrossEntropyForwardTouches = 3, kCrossEntropyBackwardTouches = 3;
// The optimizer step: AdamW's update, the global gradient norm's read, clipping's scale. Its
// state is fp32 whatever the model's precision (mixed precision keeps fp32 master weights,
// gradients and moments), so these are charged at 4 bytes an element (simhooks
// charge_fp32_bytes) and priced so (plan::optimizer_s).
inline constexpr double kAdamWTouches = 7, kGradNormTouches = 1, kClipTouches = 2;
inline constexpr double kDropoutForwardTouches = 2, kDropoutBackwardTouches = 2;
inline constexpr double kDropoutMaskBytes = 1;

// fp32 everywhere in the runtime.
inline constexpr double kFloatBytes = 4;

// Bytes moved by an op touching `elements` fp32 values `touches` times each.
constexpr double bytes(double elements, double touches) { return elements * touches * kFloatBytes; }

// The fused attention's scratch (ops/flash_attention.hpp), in floats, for Tq query and Tk key
// rows of a sequence, head dim hd, tiles of bq × bk (each clamped to the rows): the larger of
// the forward's (scores, accumulator, running max and sum) and the backward's (P, dP, D).
// O(bq·bk + T): what the runtime allocates and the memory model prices.
constexpr double flash_attention_scratch_floats(double tq, double tk, double hd, double bq,
                                                double bk) {
  bq = bq < tq ? bq : tq;
  bk = bk < tk ? bk : tk;
  const double forward = bq * bk + bq * hd + 2 * bq, backward = 2 * bq * bk + tq;
  return forward > backward ? forward : backward;
}
// The default tiles (ops/flash_attention.hpp FlashAttention): 64 query rows × 256 keys.
inline constexpr double kFlashBlockQ = 64, kFlashBlockK = 256;

// The fused attention's (query row, key) pairs over the tiles it multiplies, per (sequence,
// head): Tq query rows at positions q_pos + t, Tk keys at k_pos + j, key j visible to row t
// when k_pos + j ≤ q_pos + t; `offset` = q_pos − k_pos. The forward visits, per tile of bq
// query rows, the key tiles up to its last row's last visible key; the backward, per key tile
// of bk keys, the query tiles from the first row that sees it (tiles start there), each cut
// to the keys its last row sees. The masked part of a visited tile is multiplied too. Each
// visited pair costs 2 products forward (S = QKᵀ, P·V) and 5 backward (S again, dV, dP, dQ,
// dK), 2·HD FLOPs each: flash_attention_flops. The op charges these (ops/flash_attention.cpp)
// and the planner prices them (core/gemm_model.hpp flash_attention_seconds).
inline double flash_attention_tile_pairs(std::int64_t tq, std::int64_t tk, std::int64_t bq,
                                         std::int64_t bk, std::int64_t offset, bool backward) {
  double pairs = 0;
  if (!backward) {
    for (std::int64_t r0 = 0; r0 < tq; r0 += bq) {
      const std::int64_t r1 = std::min(tq, r0 + bq);
      const std::int64_t keys = std::clamp<std::int64_t>(offset + r1, 0, tk);  // seen by r1 − 1
      pairs += static_cast<double>(r1 - r0) * static_cast<double>(keys);
    }
    return pairs;
  }
  for (std::int64_t c0 = 0; c0 < tk; c0 += bk) {
    const std::int64_t n = std::min(tk, c0 + bk) - c0;
    for (std::int64_t r0 = std::clamp<std::int64_t>(c0 - offset, 0, tq); r0 < tq; r0 += bq) {
      const std::int64_t r1 = std::min(tq, r0 + bq);
      const std::int64_t keys = std::clamp<std::int64_t>(offset + r1 - c0, 0, n);
      pairs += static_cast<double>(r1 - r0) * static_cast<double>(keys);
    }
  }
  return pairs;
}

// FLOPs of the fused attention over `sequence_heads` (sequence, head) pairs of head dim hd.
inline double flash_attention_flops(std::int64_t tq, std::int64_t tk, std::int64_t hd,
                                    std::int64_t bq, std::int64_t bk, std::int64_t offset,
                                    double sequence_heads, bool backward) {
  return (backward ? 5.0 : 2.0) * 2.0 *
         flash_attention_tile_pairs(tq, tk, bq, bk, offset, backward) * static_cast<double>(hd) *
         sequence_heads;
}

// The fused attention's bytes beyond its tiles, in touches of the q and k/v elements: forward
// reads q, k, v and writes out (2 per q element, 2 per k/v element); backward reads q, out,
// dout, k, v and writes dq, dk, dv (4 and 4). O(T): the s×s softmax's bytes are gone.
inline constexpr double kFlashAttentionForwardTouches = 2, kFlashAttentionBackwardTouches = 4;

}  // namespace meshtp::op_costs
