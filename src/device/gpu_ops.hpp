// The ops on the GPU: the same forward/backward pairs as ops/ (their headers give the math),
// on device memory, queued on the context's compute stream.
//
// Activations and weights for compute are fp32 or bf16 (`type`); statistics (LayerNorm's mean
// and rstd, cross-entropy's lse), parameter gradients of the small vectors (LayerNorm's w, b)
// and everything AdamW touches are fp32. Every kernel computes in fp32 and rounds once when
// it stores a bf16 value. GeMMs accumulate in fp32 (cuBLASLt, CUBLAS_COMPUTE_32F; no TF32, so
// fp32 GeMMs are fp32 GeMMs). "+=" ops read the destination, so it must hold values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/adamw_step.hpp"
#include "core/flash_attention_shape.hpp"
#include "core/view.hpp"
#include "device/backend.hpp"
#include "device/gpu.hpp"
#include "tensor/gemm.hpp"

namespace meshtp::gpu {

// A matrix in device memory is the seam's one view (core/view.hpp); the epilogues are the
// backend's (device/backend.hpp).
using device::Epilogue;

// A buffer's first rows·cols elements of `type` as a packed rows × cols view.
inline View matrix_of(const Buffer& buffer, Element type, std::int64_t rows, std::int64_t cols) {
  return View::packed(buffer.data(), type, rows, cols);
}

// C = epilogue(α·op(A)·op(B) + β·C) on cuBLASLt; A and B of one element type, C of any, the
// bias (when the epilogue has one) of C's type. Throws on a shape mismatch, naming the shapes.
void gemm(Context& ctx, const View& a, Trans trans_a, const View& b, Trans trans_b, const View& c, float alpha = 1.0f, float beta = 0.0f,
          Epilogue epilogue = Epilogue::kNone, const void* bias = nullptr);

// Strided views of fp32 or bf16 (one shape): dst ← src (converting when the types differ),
// dst += src (one type), dst ← 0. Throw, naming both views, on a mismatch.
void copy_2d(Context& ctx, const View& dst, const View& src);
void add_2d(Context& ctx, const View& dst, const View& src);
// SwiGLU on strided fp32 or bf16 views (ops/swiglu.hpp): y (N × F) = silu(a) ⊙ b of
// x = [a | b] (N × 2F); dx (N × 2F) += its gradient. Throws naming a view that does not match.
void swiglu_forward(Context& ctx, const View& y, const View& x);
void swiglu_backward(Context& ctx, const View& dx, const View& x, const View& dy);
// RoPE in place on a strided view x (batch·T rows × heads·HD), the table cos_sin fp32
// (≥ T rows × HD, device memory); backward rotates back (ops/rope.hpp).
void rope(Context& ctx, const View& x, const View& cos_sin, std::int64_t batch,
          std::int64_t heads, bool backward);
void zero_2d(Context& ctx, const View& dst);

// y = gelu(x);  dx += dy ⊙ gelu'(x)  (n elements; ops/gelu.hpp)
void gelu_forward(Context& ctx, Element type, void* y, const void* x, std::int64_t n);
void gelu_backward(Context& ctx, Element type, void* dx, const void* x, const void* dy,
                   std::int64_t n);

// y = a + b (n elements; ops/residual.hpp)
void residual_forward(Context& ctx, Element type, void* y, const void* a, const void* b,
                      std::int64_t n);

// LayerNorm over rows of C (ops/layernorm.hpp): y, x, dx, dy of `type`; w, b, dw, db, mean,
// rstd fp32.
void layernorm_forward(Context& ctx, Element type, void* y, float* mean, float* rstd, const void* x,
                       const float* w, const float* b, std::int64_t rows, std::int64_t cols);
void layernorm_backward(Context& ctx, Element type, void* dx, float* dw, float* db, const void* dy,
                        const void* x, const float* w, const float* mean, const float* rstd,
                        std::int64_t rows, std::int64_t cols);

// Normalisations on strided views (device/backend.hpp's norm ops: its comment gives the
// phases, ops/layernorm.hpp and ops/rmsnorm.hpp the math and phase semantics). x, y, dx, dy
// are fp32 or bf16 views of one type with any leading dimension; w, b, dw, db fp32 1 × C,
// mean and rstd (RMSNorm: its r) fp32 1 × N; sums fp64 1 × device::norm_sum_count(norm, N),
// laid out as the CPU ops lay them ([Σx | Σx²]: a row's two sums N apart), so that the
// group's elementwise all-reduce between the phases is the same on either backend. A view
// the norm has no use for (RMSNorm's b, db, mean) is ignored. Mismatched views are refused,
// naming the view (describe()).
//   norm_forward/backward  whole rows: LayerNorm on packed views runs layernorm_forward/
//                          backward (two-pass fp32 statistics), anything else the strided
//                          kernels (fp64 row sums taken in the kernel, then phase 2's formulas)
//   norm_shard_*           the phases around the all-reduce of `sums`; backward_sums also adds
//                          this shard's dw (and LayerNorm's db)
void norm_forward(Context& ctx, layout::Norm norm, const View& y, const View& mean,
                  const View& rstd, const View& x, const View& w, const View& b);
void norm_backward(Context& ctx, layout::Norm norm, const View& dx, const View& dw, const View& db,
                   const View& dy, const View& x, const View& w, const View& mean,
                   const View& rstd);
void norm_shard_forward_sums(Context& ctx, layout::Norm norm, const View& sums, const View& x);
void norm_shard_forward_apply(Context& ctx, layout::Norm norm, const View& y, const View& mean,
                              const View& rstd, const View& x, const View& w, const View& b,
                              const View& sums, std::int64_t c_global);
void norm_shard_backward_sums(Context& ctx, layout::Norm norm, const View& sums, const View& dw,
                              const View& db, const View& dy, const View& x, const View& w,
                              const View& mean, const View& rstd);
void norm_shard_backward_apply(Context& ctx, layout::Norm norm, const View& dx, const View& dy,
                               const View& x, const View& w, const View& mean, const View& rstd,
                               const View& sums, std::int64_t c_global);

// A vocabulary shard on strided views (device/backend.hpp; ops/embedding.hpp and
// ops/cross_entropy.hpp give the math): the table's rows [begin, begin + wte.rows), the
// logits' columns [begin, begin + logits.cols) of a vocabulary whose real tokens end at
// vocab_real. Tokens and targets are host ids, uploaded unchecked (the caller checks them; an
// id the shard does not hold is skipped, as on the CPU). out, wte, dout, logits fp32 or bf16
// (out and wte one type); dwte, row_max (1 × N), sums (1 × 2N: [Σexp, target logit] per row,
// interleaved as the CPU's) and lse (1 × N) fp32. cross_entropy_shard_max overwrites the
// padding columns with −∞; the loss waits for the stream (it returns the mean, summed in
// double on the host as the CPU op does); the backward rewrites the logits in place.
void embedding_shard_forward(Context& ctx, const View& out, std::span<const std::int32_t> tokens,
                             const View& wte, std::int64_t begin);
void embedding_shard_backward(Context& ctx, const View& dwte, const View& dout,
                              std::span<const std::int32_t> tokens, std::int64_t begin);
void cross_entropy_shard_max(Context& ctx, const View& logits, const View& row_max,
                             std::int64_t begin, std::int64_t vocab_real);
void cross_entropy_shard_sums(Context& ctx, const View& sums, const View& logits,
                              const View& row_max, std::span<const std::int32_t> targets,
                              std::int64_t begin, std::int64_t vocab_real);
double cross_entropy_shard_loss(Context& ctx, const View& lse, const View& row_max,
                                const View& sums);
void cross_entropy_shard_backward(Context& ctx, const View& logits, const View& lse,
                                  std::span<const std::int32_t> targets, std::int64_t begin,
                                  float scale);

// Softmax cross-entropy (ops/cross_entropy.hpp): logits (rows × classes, rows `ld` ≥ classes
// elements apart; columns from `classes` to `ld` are padding, read by neither pass and left
// alone by the backward) of `type`, lse fp32.
// `targets` are on the host, checked against [0, classes) before anything is queued (the
// message names the row), then uploaded. The forward returns the mean loss (per-row losses
// summed in double on the host, as the CPU op does), so it waits for the stream.
double cross_entropy_forward(Context& ctx, Element type, float* lse, const void* logits,
                             std::span<const std::int32_t> targets, std::int64_t rows,
                             std::int64_t classes, std::int64_t ld);
void cross_entropy_backward(Context& ctx, Element type, void* dlogits, const void* logits,
                            const float* lse, std::span<const std::int32_t> targets,
                            std::int64_t rows, std::int64_t classes, std::int64_t ld,
                            float dloss = 1.0f);

// Token + position embedding (ops/embedding.hpp): out, wte, wpe of `type`; the gradients dwte,
// dwpe fp32 (+=, atomic adds: a token seen twice gets both). `tokens` are on the host,
// checked against [0, vocab) before anything is queued, then uploaded.
void embedding_forward(Context& ctx, Element type, void* out, std::span<const std::int32_t> tokens,
                       std::int64_t batch, std::int64_t seq, const void* wte, std::int64_t vocab,
                       const void* wpe, std::int64_t channels);
void embedding_backward(Context& ctx, Element type, float* dwte, float* dwpe, const void* dout,
                        std::span<const std::int32_t> tokens, std::int64_t batch, std::int64_t seq,
                        std::int64_t vocab, std::int64_t channels);

// Causal self-attention core (ops/attention.hpp): qkv (B·T, 3·NH·HD), out (B·T, NH·HD), att
// (B, NH, T, T) probabilities, all of `type`. Products on cuBLAS, strided-batched over heads
// (one launch per batch element and product); the masked softmax and its backward are
// kernels. The backward needs B·NH·T·T elements of scratch of `type`.
inline std::int64_t attention_scratch_elements(std::int64_t batch, std::int64_t seq,
                                               std::int64_t heads) {
  return batch * heads * seq * seq;
}
void attention_forward(Context& ctx, Element type, void* out, void* att, const void* qkv,
                       std::int64_t batch, std::int64_t seq, std::int64_t heads,
                       std::int64_t head_dim);
void attention_backward(Context& ctx, Element type, void* dqkv, void* scratch, const void* dout,
                        const void* qkv, const void* att, std::int64_t batch, std::int64_t seq,
                        std::int64_t heads, std::int64_t head_dim);

// Fused causal attention (ops/flash_attention.hpp's math; flash_attention.cu; nothing T×T):
// q (B·Tq, NH·HD), k and v (B·Tk, NKV·HD) strided views of one type (query head h reads
// key/value head h / (NH/NKV)), at the absolute positions a.q_pos and a.k_pos (a query sees
// the keys at or before its position); out (B·Tq, NH·HD) of q's type, lse B·NH·Tq fp32 values
// (lse[(b·NH + h)·Tq + t]), a row that sees no key getting out 0 and lse −∞. The backward
// ADDS into dq, dk, dv, given the final out and lse, with flash_attention_scratch_floats(a,
// Tq) fp32 values of scratch. The merge folds a partial (part, part_lse) over a disjoint key
// set into (out, lse). Head dims 16, 32, 64, 128 and 256; another, or NH not a multiple of
// NKV, or views that do not chain, is refused naming them.
inline std::int64_t flash_attention_scratch_floats(const FlashAttention& a, std::int64_t tq) {
  return a.batch * a.heads * tq;
}
void flash_attention_forward(Context& ctx, const View& out, float* lse, const View& q,
                             const View& k, const View& v, const FlashAttention& a);
void flash_attention_backward(Context& ctx, const View& dq, const View& dk, const View& dv,
                              float* scratch, const View& dout, const View& q, const View& k,
                              const View& v, const View& out, const float* lse,
                              const FlashAttention& a);
void flash_attention_merge(Context& ctx, const View& out, float* lse, const View& part,
                           const float* part_lse, const FlashAttention& a);

// Rows by index (device/backend.hpp gather_rows, scatter_add_rows, row_dots; the same checks):
// the host's index and scale lists uploaded with the call. The scatter runs as a gather over
// each destination row's sources, listed on the host in index order, so a row sums its
// sources in the CPU's order with no atomics; row_dots waits for the device.
void gather_rows(Context& ctx, const View& dst, const View& src,
                 std::span<const std::int64_t> index, std::span<const float> scale);
void scatter_add_rows(Context& ctx, const View& dst, const View& src,
                      std::span<const std::int64_t> index, std::span<const float> scale);
std::vector<float> row_dots(Context& ctx, const View& a, std::span<const std::int64_t> index,
                            const View& b);

// AdamW over many parameter tensors in one launch (multi-tensor; gpu.hpp's AdamWTensor): fp32
// p, g, m, v; when a tensor's `p_compute` is set, its updated p is also written there in bf16
// (the compute copy of a mixed-precision run).
void adamw_update(Context& ctx, std::span<const AdamWTensor> tensors, const AdamWStep& step);

// Σ x² over n fp32 values (cuBLAS nrm2 per 2³¹−1 values, squared and summed in double; waits
// for the stream: the caller needs it on the host), and x ← α·x (cuBLAS scal): gradient
// clipping's two halves.
double sum_of_squares(Context& ctx, const float* x, std::int64_t n);
// Σ x² of each of many fp32 device vectors: cuBLAS nrm2 in device pointer mode into one device
// buffer, read back with one wait (the gradient norm over every parameter); each squared and
// summed in double as above.
std::vector<double> sums_of_squares(Context& ctx, std::span<const std::span<const float>> vectors);
void scale(Context& ctx, float* x, float alpha, std::int64_t n);

// y = x converted between element types (n elements); same type is a copy.
void convert(Context& ctx, void* y, Element y_type, const void* x, Element x_type, std::int64_t n);

}  // namespace meshtp::gpu
