// device::Backend on the host: the reference ops of this layer (GeMM, GeLU, SwiGLU, residual,
// the norms, the attention cores, RoPE, the vocabulary shard's embedding and cross-entropy,
// AdamW) on fp32 views of host memory: what every distributed layer runs on the CPU, and what
// the inverted stand-in (tests/inverted_device.hpp) runs on host copies of its memory.
//
// Arrays are fp32, fp64 (a norm's sums) or bf16 (stored GeMM operands: copied, zeroed and
// multiplied, widened exactly); every other op computes on fp32 views and refuses the rest.
// The CPU's bf16 mixed precision is the runtime's (tensor/gemm.hpp ScopedGemmPrecision: GeMM
// operands rounded to bf16), which a caller holds around the calls as `train` does.
#pragma once

#include <span>

#include "device/backend.hpp"

namespace meshtp {

class CpuBackend final : public device::Backend {
 public:
  std::string name() const override { return "cpu"; }

  device::Array alloc(std::int64_t count, Element type) override;
  void zero(device::Array& a) override;
  void upload(device::Array& a, std::span<const float> values) override;
  std::vector<float> download(const device::Array& a) override;
  void copy(device::Array& dst, const device::Array& src) override;
  void synchronize() override {}

  // Views are host fp32 (a view of external host memory, such as a Tensor's, works too:
  // host_view below). Every op runs before the call returns, through the ops of this layer
  // and tensor/ (so meshtp::gemm's FLOP ledger, bf16 operand scope and simulation hooks
  // hold); events are done when made.
  std::shared_ptr<DeviceMemory> device_memory() override { return nullptr; }
  void gemm(const View& c, const View& a, Trans trans_a, const View& b, Trans trans_b, float alpha,
            float beta, device::Epilogue epilogue, const View& bias) override;
  void copy(const View& dst, const View& src) override;
  void add(const View& dst, const View& src) override;
  void zero(const View& dst) override;
  void residual(const View& sum, const View& a, const View& b) override;
  void residual_grad(const View& d, const View& dy) override;
  void add_bias(const View& y, const View& bias) override;
  void bias_grad(const View& db, const View& dy) override;
  void norm_forward(layout::Norm norm, const View& y, const View& mean, const View& rstd,
                    const View& x, const View& w, const View& b) override;
  void residual_norm_forward(layout::Norm norm, const View& sum, const View& y, const View& mean,
                             const View& rstd, const View& a, const View& b_in, const View& w,
                             const View& b) override;
  void norm_backward(layout::Norm norm, const View& dx, const View& dw, const View& db,
                     const View& dy, const View& x, const View& w, const View& mean,
                     const View& rstd) override;
  void norm_forward_sums(layout::Norm norm, const View& sums, const View& x) override;
  void norm_forward_apply(layout::Norm norm, const View& y, const View& mean, const View& rstd,
                          const View& x, const View& w, const View& b, const View& sums,
                          std::int64_t c_global) override;
  void norm_backward_sums(layout::Norm norm, const View& sums, const View& dw, const View& db,
                          const View& dy, const View& x, const View& w, const View& mean,
                          const View& rstd) override;
  void norm_backward_apply(layout::Norm norm, const View& dx, const View& dy, const View& x,
                           const View& w, const View& mean, const View& rstd, const View& sums,
                           std::int64_t c_global) override;
  void embedding_shard_forward(const View& out, std::span<const std::int32_t> tokens,
                               const View& wte, std::int64_t begin) override;
  void embedding_shard_backward(const View& dwte, const View& dout,
                                std::span<const std::int32_t> tokens, std::int64_t begin) override;
  void cross_entropy_shard_max(const View& logits, const View& row_max, std::int64_t begin,
                               std::int64_t vocab_real) override;
  void cross_entropy_shard_sums(const View& sums, const View& logits, const View& row_max,
                                std::span<const std::int32_t> targets, std::int64_t begin,
                                std::int64_t vocab_real) override;
  double cross_entropy_shard_loss(const View& lse, const View& row_max, const View& sums) override;
  void cross_entropy_shard_backward(const View& logits, const View& lse,
                                    std::span<const std::int32_t> targets, std::int64_t begin,
                                    float scale) override;
  void gelu_forward(const View& y, const View& x) override;
  void bias_gelu(const View& y, const View& pre, const View& bias) override;
  void gelu_backward(const View& dx, const View& x, const View& dy) override;
  void swiglu_forward(const View& y, const View& x) override;
  void swiglu_backward(const View& dx, const View& x, const View& dy) override;
  void attention_core_forward(const View& out, const View& att, const View& qkv, std::int64_t b,
                              std::int64_t t, std::int64_t nh) override;
  void attention_core_backward(const View& dqkv, const View& scratch, const View& dout,
                               const View& qkv, const View& att, std::int64_t b, std::int64_t t,
                               std::int64_t nh) override;
  std::int64_t flash_attention_scratch(const FlashAttention& a, std::int64_t tq, std::int64_t tk,
                                       std::int64_t hd) const override;
  void flash_attention_forward(const View& out, const View& lse, const View& scratch, const View& q,
                               const View& k, const View& v, const FlashAttention& a) override;
  void flash_attention_backward(const View& dq, const View& dk, const View& dv, const View& scratch,
                                const View& dout, const View& q, const View& k, const View& v,
                                const View& out, const View& lse, const FlashAttention& a) override;
  void flash_attention_merge(const View& out, const View& lse, const View& part,
                             const View& part_lse, const FlashAttention& a) override;
  void gather_rows(const View& dst, const View& src, std::span<const std::int64_t> index,
                   std::span<const float> scale) override;
  void scatter_add_rows(const View& dst, const View& src, std::span<const std::int64_t> index,
                        std::span<const float> scale) override;
  std::vector<float> row_dots(const View& a, std::span<const std::int64_t> index,
                              const View& b) override;
  void rope(const View& x, const View& cos_sin, std::int64_t batch, std::int64_t heads,
            bool backward) override;
  void copy_blocks(std::span<const View> dst, std::span<const View> src) override;
  void gemm_in_bands(const View& c, const View& a, Trans trans_a, const View& b, Trans trans_b,
                     float beta, int bands, const std::function<void()>& between) override;
  std::shared_ptr<device::Event> record() override;
  void wait(device::Event& event) override;
  void* native_stream() override { return nullptr; }

  double sum_of_squares(const device::Array& a) override;
  void scale(device::Array& a, float alpha) override;
  void adamw_update(std::span<const device::AdamWParam> params, const AdamWStep& step) override;
  std::int64_t attention_scratch(std::int64_t b, std::int64_t t, std::int64_t nh) const override;
};

// Host fp32 matrices as the seam's views, and back (the back way checks the type).
inline View host_view(MatrixView m) { return {m.data, Element::kF32, m.rows, m.cols, m.ld}; }
inline View host_view(ConstMatrixView m) {  // a view owns no constness: the callee only reads
  return {const_cast<float*>(m.data), Element::kF32, m.rows, m.cols, m.ld};
}
// A host vector (statistics, biases, scratch) as a 1 × n view.
inline View host_view(std::span<const float> v) {
  return View::packed(const_cast<float*>(v.data()), Element::kF32, 1,
                      static_cast<std::int64_t>(v.size()));
}
inline View host_view(std::span<const double> v) {
  return View::packed(const_cast<double*>(v.data()), Element::kF64, 1,
                      static_cast<std::int64_t>(v.size()));
}
MatrixView host_matrix(const View& v, const char* what);

// The process's CPU backend (stateless: one serves every thread).
CpuBackend& cpu_backend();

}  // namespace meshtp
