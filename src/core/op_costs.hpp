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

}  // namespace meshtp::op_costs
