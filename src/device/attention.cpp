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

// The operands of one fused call, checked: q, k, v of one type, NH a multiple of NKV, rows
// B·Tq and B·Tk, a head dim the kernel runs, outputs of q's shapes.
FlashOperands flash_operands(const View& q, const View& k, const View& v, const FlashAttention& a,
                             const char* fn) {
  MESHTP_CHECK(a.batch > 0 && a.heads > 0 && a.kv_heads > 0 && a.heads % a.kv_heads == 0 &&
                   q.cols % a.heads == 0 && q.rows % a.batch == 0 && k.rows % a.batch == 0,
               "{}: bad sizes B={} NH={} NKV={} for q {} (NH must be a multiple of NKV, q B·Tq "
               "rows of NH·HD)",
               fn, a.batch, a.heads, a.kv_heads, describe(q));
  const std::int64_t hd = q.cols / a.heads;
  MESHTP_CHECK(flash_attention_head_dim_supported(hd),
               "{}: head dim HD={} is not one the GPU kernel runs (16, 32, 64, 128, 256)", fn, hd);
  MESHTP_CHECK(k.type == q.type && v.type == q.type && k.cols == a.kv_heads * hd &&
                   v.cols == k.cols && v.rows == k.rows,
               "{}: q {}, k {}, v {}: k and v need {}·{} columns and q's type", fn, describe(q),
               describe(k), describe(v), a.kv_heads, hd);
  return {.B = a.batch,
          .Tq = q.rows / a.batch,
          .Tk = k.rows / a.batch,
          .NH = a.heads,
          .NKV = a.kv_heads,
          .q_pos = a.q_pos,
          .k_pos = a.k_pos,
          .q = q.data,
          .k = k.data,
          .v = v.data,
          .ldq = q.ld,
          .ldk = k.ld,
          .ldv = v.ld};
}

void check_flash_operand(const View& x, const View& like, const char* what, const char* fn) {
  MESHTP_CHECK(x.type == like.type && x.rows == like.rows && x.cols == like.cols,
               "{}: {} is {}, it needs {}'s shape and type ({})", fn, what, describe(x), what,
               describe(like));
}

}  // namespace

void flash_attention_forward(Context& ctx, const View& out, float* lse, const View& q,
                             const View& k, const View& v, const FlashAttention& a) {
  constexpr const char* kFn = "gpu::flash_attention_forward";
  FlashOperands o = flash_operands(q, k, v, a, kFn);
  check_flash_operand(out, q, "out", kFn);
  if (o.Tq == 0) return;
  o.out = out.data;
  o.ldo = out.ld;
  MESHTP_CUDA(launch_flash_attention_forward(static_cast<cudaStream_t>(ctx.stream()), q.type, o,
                                             lse, q.cols / a.heads));
}

void flash_attention_backward(Context& ctx, const View& dq, const View& dk, const View& dv,
                              float* scratch, const View& dout, const View& q, const View& k,
                              const View& v, const View& out, const float* lse,
                              const FlashAttention& a) {
  constexpr const char* kFn = "gpu::flash_attention_backward";
  FlashOperands o = flash_operands(q, k, v, a, kFn);
  check_flash_operand(dq, q, "dq", kFn);
  check_flash_operand(dk, k, "dk", kFn);
  check_flash_operand(dv, v, "dv", kFn);
  check_flash_operand(dout, q, "dout", kFn);
  check_flash_operand(out, q, "out", kFn);
  if (o.Tq == 0 || o.Tk == 0) return;
  o.out = out.data;
  o.ldo = out.ld;
  o.dout = dout.data;
  o.lddo = dout.ld;
  o.dq = dq.data;
  o.lddq = dq.ld;
  o.dk = dk.data;
  o.lddk = dk.ld;
  o.dv = dv.data;
  o.lddv = dv.ld;
  MESHTP_CUDA(launch_flash_attention_backward(static_cast<cudaStream_t>(ctx.stream()), q.type, o,
                                              lse, scratch, q.cols / a.heads));
}

void flash_attention_merge(Context& ctx, const View& out, float* lse, const View& part,
                           const float* part_lse, const FlashAttention& a) {
  constexpr const char* kFn = "gpu::flash_attention_merge";
  MESHTP_CHECK(a.batch > 0 && a.heads > 0 && out.rows % a.batch == 0 && out.cols % a.heads == 0,
               "{}: bad sizes B={} NH={} for out {}", kFn, a.batch, a.heads, describe(out));
  check_flash_operand(part, out, "the partial out", kFn);
  if (out.rows == 0) return;
  MESHTP_CUDA(launch_flash_attention_merge(
      static_cast<cudaStream_t>(ctx.stream()), out.type, out.data, out.ld, lse, part.data, part.ld,
      part_lse, a.batch, out.rows / a.batch, a.heads, out.cols / a.heads));
}

}  // namespace meshtp::gpu
