// The causal attention core on the GPU (ops/attention.hpp has the math and the layouts):
// the four products per (b, h) run as cuBLAS strided-batched GeMMs over the heads of one batch
// element (head h's Q is HD columns after head h−1's, so the heads are a uniform stride of
// HD elements apart in qkv, and T·T apart in att), the masked softmax and its backward as
// kernels over all B·NH·T rows at once. The full T×T products are computed and the mask
// applied by the softmax (a fused flash-style kernel that skips masked blocks is future work).
#include <cmath>

#include "core/error.hpp"
#include "device/cuda_check.hpp"
#include "device/gpu_internal.hpp"
#include "device/gpu_ops.hpp"
#include "device/kernel_launch.hpp"

namespace meshtp::gpu {

namespace {

struct Layout {
  std::int64_t B, T, NH, HD, C, ld_qkv, head_size;
  std::size_t es;  // element size in bytes
  // Pointers to head 0 of batch element b.
  const char* base(const void* p, std::int64_t b, std::int64_t ld, std::int64_t col) const {
    return static_cast<const char*>(p) + static_cast<std::size_t>((b * T * ld + col)) * es;
  }
  char* base(void* p, std::int64_t b, std::int64_t ld, std::int64_t col) const {
    return static_cast<char*>(p) + static_cast<std::size_t>((b * T * ld + col)) * es;
  }
  char* att(void* p, std::int64_t b) const {
    return static_cast<char*>(p) + static_cast<std::size_t>(b * NH * T * T) * es;
  }
  const char* att(const void* p, std::int64_t b) const {
    return static_cast<const char*>(p) + static_cast<std::size_t>(b * NH * T * T) * es;
  }
};

Layout layout_of(Element type, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                 std::int64_t head_dim, const char* fn) {
  MESHTP_CHECK(batch >= 0 && seq >= 0 && heads > 0 && head_dim > 0,
               "{}: bad sizes B={} T={} NH={} HD={}", fn, batch, seq, heads, head_dim);
  const std::int64_t C = heads * head_dim;
  return {batch, seq, heads, head_dim, C, 3 * C, seq * seq, element_size(type)};
}

}  // namespace

void attention_forward(Context& ctx, Element type, void* out, void* att, const void* qkv,
                       std::int64_t batch, std::int64_t seq, std::int64_t heads,
                       std::int64_t head_dim) {
  const Layout L = layout_of(type, batch, seq, heads, head_dim, "gpu::attention_forward");
  if (L.B == 0 || L.T == 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(L.HD));
  for (std::int64_t b = 0; b < L.B; ++b) {
    // S = scale·Q·Kᵀ for every head: (T×HD)·(T×HD)ᵀ → att[b, h] (T×T).
    gemm_strided_batched(ctx, type, Trans::kNo, Trans::kYes, L.T, L.T, L.HD, scale,
                         L.base(qkv, b, L.ld_qkv, 0), L.ld_qkv, L.HD, L.base(qkv, b, L.ld_qkv, L.C),
                         L.ld_qkv, L.HD, 0.0f, L.att(att, b), L.T, L.head_size, L.NH);
  }
  MESHTP_CUDA(launch_causal_softmax(static_cast<cudaStream_t>(ctx.stream()), type, att,
                                    L.B * L.NH * L.T, L.T));
  for (std::int64_t b = 0; b < L.B; ++b) {
    // O = P·V: (T×T)·(T×HD) → out rows of batch b, head h's columns.
    gemm_strided_batched(ctx, type, Trans::kNo, Trans::kNo, L.T, L.HD, L.T, 1.0f,
                         L.att(static_cast<const void*>(att), b), L.T, L.head_size,
                         L.base(qkv, b, L.ld_qkv, 2 * L.C), L.ld_qkv, L.HD, 0.0f,
                         L.base(out, b, L.C, 0), L.C, L.HD, L.NH);
  }
}

void attention_backward(Context& ctx, Element type, void* dqkv, void* scratch, const void* dout,
                        const void* qkv, const void* att, std::int64_t batch, std::int64_t seq,
                        std::int64_t heads, std::int64_t head_dim) {
  const Layout L = layout_of(type, batch, seq, heads, head_dim, "gpu::attention_backward");
  if (L.B == 0 || L.T == 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(L.HD));
  for (std::int64_t b = 0; b < L.B; ++b) {
    // dP = dO·Vᵀ → scratch[b, h]
    gemm_strided_batched(ctx, type, Trans::kNo, Trans::kYes, L.T, L.T, L.HD, 1.0f,
                         L.base(dout, b, L.C, 0), L.C, L.HD, L.base(qkv, b, L.ld_qkv, 2 * L.C),
                         L.ld_qkv, L.HD, 0.0f, L.att(scratch, b), L.T, L.head_size, L.NH);
    // dV += Pᵀ·dO
    gemm_strided_batched(ctx, type, Trans::kYes, Trans::kNo, L.T, L.HD, L.T, 1.0f, L.att(att, b),
                         L.T, L.head_size, L.base(dout, b, L.C, 0), L.C, L.HD, 1.0f,
                         L.base(dqkv, b, L.ld_qkv, 2 * L.C), L.ld_qkv, L.HD, L.NH);
  }
  // dS = P ⊙ (dP − rowsum(dP ⊙ P)), in place in scratch.
  MESHTP_CUDA(launch_causal_softmax_backward(static_cast<cudaStream_t>(ctx.stream()), type, scratch,
                                             att, L.B * L.NH * L.T, L.T));
  for (std::int64_t b = 0; b < L.B; ++b) {
    const void* ds = L.att(static_cast<const void*>(scratch), b);
    // dQ += scale·dS·K
    gemm_strided_batched(ctx, type, Trans::kNo, Trans::kNo, L.T, L.HD, L.T, scale, ds, L.T,
                         L.head_size, L.base(qkv, b, L.ld_qkv, L.C), L.ld_qkv, L.HD, 1.0f,
                         L.base(dqkv, b, L.ld_qkv, 0), L.ld_qkv, L.HD, L.NH);
    // dK += scale·dSᵀ·Q
    gemm_strided_batched(ctx, type, Trans::kYes, Trans::kNo, L.T, L.HD, L.T, scale, ds, L.T,
                         L.head_size, L.base(qkv, b, L.ld_qkv, 0), L.ld_qkv, L.HD, 1.0f,
                         L.base(dqkv, b, L.ld_qkv, L.C), L.ld_qkv, L.HD, L.NH);
  }
}

namespace {

void check_flash(std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t kv_heads,
                 std::int64_t head_dim, const char* fn) {
  MESHTP_CHECK(batch >= 0 && seq >= 0 && heads > 0 && kv_heads > 0 && heads % kv_heads == 0,
               "{}: bad sizes B={} T={} NH={} NKV={} (NH must be a multiple of NKV)", fn, batch,
               seq, heads, kv_heads);
  MESHTP_CHECK(flash_attention_head_dim_supported(head_dim),
               "{}: head dim HD={} is not one the GPU kernel runs (16, 32, 64, 128, 256)", fn,
               head_dim);
}

}  // namespace

void flash_attention_forward(Context& ctx, Element type, void* out, float* lse, const void* qkv,
                             std::int64_t batch, std::int64_t seq, std::int64_t heads,
                             std::int64_t kv_heads, std::int64_t head_dim) {
  check_flash(batch, seq, heads, kv_heads, head_dim, "gpu::flash_attention_forward");
  if (batch == 0 || seq == 0) return;
  MESHTP_CUDA(launch_flash_attention_forward(static_cast<cudaStream_t>(ctx.stream()), type, out,
                                             lse, qkv, batch, seq, heads, kv_heads, head_dim));
}

void flash_attention_backward(Context& ctx, Element type, void* dqkv, float* scratch,
                              const void* dout, const void* out, const float* lse, const void* qkv,
                              std::int64_t batch, std::int64_t seq, std::int64_t heads,
                              std::int64_t kv_heads, std::int64_t head_dim) {
  check_flash(batch, seq, heads, kv_heads, head_dim, "gpu::flash_attention_backward");
  if (batch == 0 || seq == 0) return;
  MESHTP_CUDA(launch_flash_attention_backward(static_cast<cudaStream_t>(ctx.stream()), type,
                                              dqkv, scratch, dout, out, lse, qkv, batch, seq,
                                              heads, kv_heads, head_dim));
}

}  // namespace meshtp::gpu
