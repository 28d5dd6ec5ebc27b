// The launchers of kernels.cu: one per kernel, on a stream, for an element type. They check
// nothing and return cudaGetLastError() after the launch; the ops (ops.cpp) check the
// arguments before and the status after. This header, like kernels.cu, uses no fmt: nvcc
// cannot compile fmt 9's compile-time format checks.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/adamw_step.hpp"
#include "device/gpu.hpp"

namespace meshtp::gpu {

cudaError_t launch_gelu_forward(cudaStream_t s, Element t, void* y, const void* x, std::int64_t n);
cudaError_t launch_gelu_backward(cudaStream_t s, Element t, void* dx, const void* x, const void* dy,
                                 std::int64_t n);
cudaError_t launch_add(cudaStream_t s, Element t, void* y, const void* a, const void* b,
                       std::int64_t n);
// fp32 ⇄ bf16 (the types differ).
cudaError_t launch_convert(cudaStream_t s, void* y, Element y_type, const void* x, std::int64_t n);
// Strided views (fp32 or bf16, either to either): y ← x, and y += x (one type).
cudaError_t launch_copy_2d(cudaStream_t s, void* y, Element y_type, std::int64_t ldy,
                          const void* x, Element x_type, std::int64_t ldx, std::int64_t rows,
                          std::int64_t cols);
// SwiGLU on strided views (ops/swiglu.hpp): y (rows × f) = silu(a) ⊙ b of x = [a | b]
// (rows × 2f); the backward adds into dx (rows × 2f).
cudaError_t launch_swiglu_forward(cudaStream_t s, Element t, void* y, std::int64_t ldy,
                                  const void* x, std::int64_t ldx, std::int64_t rows,
                                  std::int64_t f);
cudaError_t launch_swiglu_backward(cudaStream_t s, Element t, void* dx, std::int64_t lddx,
                                   const void* x, std::int64_t ldx, const void* dy,
                                   std::int64_t lddy, std::int64_t rows, std::int64_t f);
// RoPE in place on a strided view (ops/rope.hpp): rows = batch·T, heads·hd columns, the table
// cos_sin (≥ T rows × hd, ldt apart, fp32); sign −1 rotates back (the backward).
cudaError_t launch_rope(cudaStream_t s, Element t, void* x, std::int64_t ldx, std::int64_t rows,
                        std::int64_t heads, std::int64_t hd, std::int64_t batch,
                        const float* cos_sin, std::int64_t ldt, float sign);
cudaError_t launch_add_2d(cudaStream_t s, Element t, void* y, std::int64_t ldy, const void* x,
                         std::int64_t ldx, std::int64_t rows, std::int64_t cols);
cudaError_t launch_layernorm_forward(cudaStream_t s, Element t, void* y, float* mean, float* rstd,
                                     const void* x, const float* w, const float* b,
                                     std::int64_t rows, std::int64_t cols, float eps);
// dx kernel, then dw/db over `slices` row slices.
cudaError_t launch_layernorm_backward(cudaStream_t s, Element t, void* dx, float* dw, float* db,
                                      const void* dy, const void* x, const float* w,
                                      const float* mean, const float* rstd, std::int64_t rows,
                                      std::int64_t cols, std::int64_t slices);
// Normalisations on strided views (rows ld elements apart), one block per row; `rms` picks
// RMSNorm (no mean, no b, no db) over LayerNorm. `sums` (fp64) holds a row's sums at [row] and,
// for LayerNorm, [rows + row] (ops/layernorm.cpp's and ops/rmsnorm.cpp's layout):
//   norm_forward_sums      LayerNorm Σx | Σx², RMSNorm Σx²
//   norm_forward_apply     mean (LayerNorm), rstd and y from the sums over c_global features;
//                          sums == nullptr: whole rows (c_global = cols), summed in the kernel
//   norm_backward_sums     LayerNorm Σg | Σg·x̂, RMSNorm Σg·x̂  (g = dy⊙w)
//   norm_backward_apply    dx += …; sums == nullptr: whole rows, summed in the kernel
//   norm_backward_weights  dw += Σ_n dy⊙x̂ (LayerNorm: db += Σ_n dy) over `slices` row slices
cudaError_t launch_norm_forward_sums(cudaStream_t s, Element t, bool rms, double* sums,
                                     const void* x, std::int64_t ldx, std::int64_t rows,
                                     std::int64_t cols);
cudaError_t launch_norm_forward_apply(cudaStream_t s, Element t, bool rms, void* y,
                                      std::int64_t ldy, float* mean, float* rstd, const void* x,
                                      std::int64_t ldx, const float* w, const float* b,
                                      const double* sums, std::int64_t rows, std::int64_t cols,
                                      std::int64_t c_global, float eps);
cudaError_t launch_norm_backward_sums(cudaStream_t s, Element t, bool rms, double* sums,
                                      const void* dy, std::int64_t lddy, const void* x,
                                      std::int64_t ldx, const float* w, const float* mean,
                                      const float* rstd, std::int64_t rows, std::int64_t cols);
cudaError_t launch_norm_backward_apply(cudaStream_t s, Element t, bool rms, void* dx,
                                       std::int64_t lddx, const void* dy, std::int64_t lddy,
                                       const void* x, std::int64_t ldx, const float* w,
                                       const float* mean, const float* rstd, const double* sums,
                                       std::int64_t rows, std::int64_t cols, std::int64_t c_global);
cudaError_t launch_norm_backward_weights(cudaStream_t s, Element t, bool rms, float* dw, float* db,
                                         const void* dy, std::int64_t lddy, const void* x,
                                         std::int64_t ldx, const float* mean, const float* rstd,
                                         std::int64_t rows, std::int64_t cols, std::int64_t slices);
// A vocabulary shard (ops/embedding.hpp, ops/cross_entropy.hpp): table rows / logit columns
// [begin, begin + wte_rows or cols); `real` of the logits' columns are real tokens, the rest
// padding. tokens and targets are device arrays of `rows` ids (any value: an id the shard
// does not hold is skipped).
cudaError_t launch_embedding_shard_forward(cudaStream_t s, Element t, void* out, std::int64_t ldo,
                                           const std::int32_t* tokens, const void* wte,
                                           std::int64_t ldw, std::int64_t wte_rows,
                                           std::int64_t begin, std::int64_t rows,
                                           std::int64_t cols);
cudaError_t launch_embedding_shard_backward(cudaStream_t s, Element t, float* dwte,
                                            std::int64_t ldw, std::int64_t wte_rows,
                                            const void* dout, std::int64_t ldd,
                                            const std::int32_t* tokens, std::int64_t begin,
                                            std::int64_t rows, std::int64_t cols);
//   cross_entropy_shard_max       padding ← −∞, row_max[r] = max of the row
//   cross_entropy_shard_sums      sums[2r] = Σ exp(x − row_max) over the real columns,
//                                 sums[2r + 1] = the target's logit here, else 0
//   cross_entropy_shard_lse       lse[r] = row_max[r] + log sums[2r]
//   cross_entropy_shard_backward  logits ← scale·(exp(x − lse) − onehot), in place
cudaError_t launch_cross_entropy_shard_max(cudaStream_t s, Element t, void* logits, std::int64_t ld,
                                           float* row_max, std::int64_t rows, std::int64_t cols,
                                           std::int64_t real);
cudaError_t launch_cross_entropy_shard_sums(cudaStream_t s, Element t, float* sums,
                                            const void* logits, std::int64_t ld,
                                            const float* row_max, const std::int32_t* targets,
                                            std::int64_t begin, std::int64_t rows,
                                            std::int64_t cols, std::int64_t real);
cudaError_t launch_cross_entropy_shard_lse(cudaStream_t s, float* lse, const float* row_max,
                                           const float* sums, std::int64_t rows);
cudaError_t launch_cross_entropy_shard_backward(cudaStream_t s, Element t, void* logits,
                                                std::int64_t ld, const float* lse,
                                                const std::int32_t* targets, std::int64_t begin,
                                                std::int64_t rows, std::int64_t cols, float scale);
cudaError_t launch_cross_entropy_forward(cudaStream_t s, Element t, float* lse, float* loss,
                                         const void* logits, const std::int32_t* targets,
                                         std::int64_t rows, std::int64_t classes, std::int64_t ld);
cudaError_t launch_cross_entropy_backward(cudaStream_t s, Element t, void* dlogits,
                                          const void* logits, const float* lse,
                                          const std::int32_t* targets, std::int64_t rows,
                                          std::int64_t classes, std::int64_t ld, float scale);
cudaError_t launch_embedding_forward(cudaStream_t s, Element t, void* out,
                                     const std::int32_t* tokens, const void* wte, const void* wpe,
                                     std::int64_t rows, std::int64_t seq, std::int64_t channels);
cudaError_t launch_embedding_backward(cudaStream_t s, Element t, float* dwte, float* dwpe,
                                      const void* dout, const std::int32_t* tokens,
                                      std::int64_t rows, std::int64_t seq, std::int64_t channels);
// Over `rows` rows of `seq` values, row r being query t = r mod seq:
//   causal_softmax:          x[r, j] ← softmax_{j ≤ t}(x[r, :])[j], 0 for j > t
//   causal_softmax_backward: ds[r, j] ← p[r, j]·(ds[r, j] − Σ_j ds[r, j]·p[r, j])
cudaError_t launch_causal_softmax(cudaStream_t s, Element t, void* x, std::int64_t rows,
                                  std::int64_t seq);
cudaError_t launch_causal_softmax_backward(cudaStream_t s, Element t, void* ds, const void* p,
                                           std::int64_t rows, std::int64_t seq);
// Rows by index (gpu_ops.hpp gather_rows, scatter_add_rows, row_dots), index, scale, first and
// order in device memory (scale null: every factor 1). The scatter is a gather over CSR lists:
// destination row r sums src rows order[first[r] … first[r+1]) in that order.
cudaError_t launch_gather_rows(cudaStream_t s, Element t, void* dst, std::int64_t ldd,
                               const void* src, std::int64_t lds, std::int64_t rows,
                               std::int64_t cols, const std::int64_t* index, const float* scale);
cudaError_t launch_scatter_add_rows(cudaStream_t s, Element t, void* dst, std::int64_t ldd,
                                    const void* src, std::int64_t lds, std::int64_t dst_rows,
                                    std::int64_t cols, const std::int64_t* first,
                                    const std::int64_t* order, const float* scale);
cudaError_t launch_row_dots(cudaStream_t s, Element t, float* out, const void* a, std::int64_t lda,
                            const std::int64_t* index, const void* b, std::int64_t ldb,
                            std::int64_t rows, std::int64_t cols);
// Fused causal attention (flash_attention.cu; gpu_ops.hpp flash_attention_* has the math and
// the layouts): each view as its element 0 and its row stride in elements. The forward reads
// q, k, v and writes out and lse (B·NH·Tq floats); the backward reads q, k, v, out, dout and
// lse, adds into dq, dk, dv, and uses delta (B·NH·Tq floats) as scratch; the merge folds
// (part, part_lse) into (out, lse). Head dims 16, 32, 64, 128, 256 (cudaErrorInvalidValue
// else).
struct FlashOperands {
  std::int64_t B = 0, Tq = 0, Tk = 0, NH = 1, NKV = 1, q_pos = 0, k_pos = 0;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  const void* dout = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  std::int64_t ldq = 0, ldk = 0, ldv = 0, ldo = 0, lddo = 0, lddq = 0, lddk = 0, lddv = 0;
};
bool flash_attention_head_dim_supported(std::int64_t head_dim);
cudaError_t launch_flash_attention_forward(cudaStream_t s, Element t, const FlashOperands& o,
                                           float* lse, std::int64_t head_dim);
cudaError_t launch_flash_attention_backward(cudaStream_t s, Element t, const FlashOperands& o,
                                            const float* lse, float* delta, std::int64_t head_dim);
cudaError_t launch_flash_attention_merge(cudaStream_t s, Element t, void* out, std::int64_t ldo,
                                         float* lse, const void* part, std::int64_t ldp,
                                         const float* part_lse, std::int64_t batch, std::int64_t tq,
                                         std::int64_t heads, std::int64_t head_dim);
// AdamW's work is cut into chunks of kAdamWChunk elements of one tensor, one block each, so
// that a launch over one huge tensor (wte) and many small ones keeps every SM busy to the end
// (the multi-tensor-apply scheme of NVIDIA Apex). `tensors` and `chunks` are device arrays;
// chunk c covers tensors[chunks[c].tensor] from chunks[c].chunk · kAdamWChunk.
inline constexpr std::int64_t kAdamWChunk = 65536;
struct AdamWChunk {
  std::int32_t tensor, chunk;
};
cudaError_t launch_adamw(cudaStream_t s, const AdamWTensor* tensors, const AdamWChunk* chunks,
                         std::int64_t chunk_count, const AdamWStep& step);

}  // namespace meshtp::gpu
