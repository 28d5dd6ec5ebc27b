// device::Backend on the GPU: gpu_ops.hpp's ops on device memory from the context's caching
// allocator, queued in order on its compute stream. Arrays are fp32 or bf16; an op's
// activations share one type (checked), its norm vectors and parameter gradients are fp32.
//
//   adamw            every tensor in one multi-tensor launch, writing the bf16 compute copies
//   views            gemm: cuBLASLt on the strided views (under the runtime's bf16 precision,
//                    tensor/gemm.hpp, fp32 operands rounded to bf16 scratch first: the
//                    tensor cores with fp32 accumulation); copy: cudaMemcpy2DAsync, or a
//                    strided convert kernel between types; add: a strided kernel; zero:
//                    cudaMemset2DAsync; events: CUDA events on the compute stream
//
// Built with or without CUDA: without it, making one throws as gpu::Context does.
#pragma once

#include <map>

#include "device/backend.hpp"
#include "device/gpu.hpp"

namespace meshtp::device {

class GpuBackend final : public Backend {
 public:
  explicit GpuBackend(gpu::Context& ctx) : ctx_(ctx) {}

  std::string name() const override;

  Array alloc(std::int64_t count, Element type) override;
  void zero(Array& a) override;
  void upload(Array& a, std::span<const float> values) override;
  std::vector<float> download(const Array& a) override;
  void copy(Array& dst, const Array& src) override;
  void synchronize() override;
  std::int64_t peak_bytes_in_use() const override;

  std::shared_ptr<DeviceMemory> device_memory() override;
  void gemm(const View& c, const View& a, Trans trans_a, const View& b, Trans trans_b, float alpha,
            float beta, Epilogue epilogue, const View& bias) override;
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
  std::shared_ptr<Event> record() override;
  void wait(Event& event) override;
  void* native_stream() override;

  double sum_of_squares(const Array& a) override;
  std::vector<double> sums_of_squares(std::span<const Array> arrays) override;
  void scale(Array& a, float alpha) override;
  void adamw_update(std::span<const AdamWParam> params, const AdamWStep& step) override;
  std::int64_t attention_scratch(std::int64_t b, std::int64_t t, std::int64_t nh) const override;

 private:
  // A row of n ones of `type` (the bias gradient's left operand), made once per (n, type).
  const Array& ones(std::int64_t n, Element type);
  // A GeMM operand as the runtime's precision multiplies it: v itself, or under bf16 (or
  // beside a bf16 `other`) an fp32 v rounded into `scratch` (gpu_backend.cpp, gemm).
  View compute_operand(const View& v, const View& other, Array& scratch);
  // An activation backward's input x in dx's element (widened into scratch where it is bf16).
  View activation_input(const View& x, const View& dx, Array& scratch);

  gpu::Context& ctx_;
  std::shared_ptr<DeviceMemory> memory_;  // made on first use
  std::map<std::pair<std::int64_t, int>, Array> ones_;
};

}  // namespace meshtp::device
