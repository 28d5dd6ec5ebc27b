#include "device/gpu_backend.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "core/error.hpp"
#include "device/gpu_ops.hpp"

namespace meshtp::device {

namespace {

// `a` holds at least `count` elements of `type`.
void check(const Array& a, Element type, std::int64_t count, const char* what) {
  MESHTP_CHECK(a.type() == type, "gpu backend: {} is {}, the op needs {}", what,
               gpu::to_string(a.type()), gpu::to_string(type));
  MESHTP_CHECK(count >= 0 && a.count() >= count, "gpu backend: {} has {} elements, the op needs {}",
               what, a.count(), count);
}

float* f32_data(const Array& a) { return static_cast<float*>(a.data()); }

}  // namespace

std::string GpuBackend::name() const { return fmt::format("gpu ({})", ctx_.info().name); }

Array GpuBackend::alloc(std::int64_t count, Element type) {
  MESHTP_CHECK(count >= 0, "gpu backend: cannot allocate {} elements", count);
  const std::size_t bytes =
      static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * gpu::element_size(type);
  auto buffer = std::make_shared<gpu::Buffer>(ctx_, bytes);
  std::shared_ptr<void> storage(buffer, buffer->data());  // owns the buffer, points at its data
  return Array(std::move(storage), type, count);
}

void GpuBackend::zero(Array& a) {
  ctx_.fill_bytes(a.data(), 0, static_cast<std::size_t>(a.count()) * gpu::element_size(a.type()));
}

namespace {
// upload and download convert fp32 host values to and from fp32 or bf16 arrays, no other type
// (a norm's fp64 sums stay on the device).
void check_convertible(const Array& a, const char* what) {
  MESHTP_CHECK(a.type() == Element::kF32 || a.type() == Element::kBF16,
               "gpu backend: {} a {} array: only fp32 and bf16 ones", what,
               gpu::to_string(a.type()));
}
}  // namespace

void GpuBackend::upload(Array& a, std::span<const float> values) {
  check_convertible(a, "uploading fp32 values into");
  MESHTP_CHECK(static_cast<std::int64_t>(values.size()) == a.count(),
               "gpu backend: uploading {} values into an array of {}", values.size(), a.count());
  if (a.type() == Element::kF32) {
    ctx_.upload(a.data(), values.data(), values.size() * sizeof(float));
    return;
  }
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = to_bf16(values[i]);
  ctx_.upload(a.data(), bits.data(), bits.size() * sizeof(std::uint16_t));
}

std::vector<float> GpuBackend::download(const Array& a) {
  check_convertible(a, "downloading fp32 values from");
  std::vector<float> out(static_cast<std::size_t>(a.count()));
  if (a.type() == Element::kF32) {
    ctx_.download(out.data(), a.data(), out.size() * sizeof(float));
    return out;
  }
  std::vector<std::uint16_t> bits(out.size());
  ctx_.download(bits.data(), a.data(), bits.size() * sizeof(std::uint16_t));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = from_bf16(bits[i]);
  return out;
}

void GpuBackend::copy(Array& dst, const Array& src) {
  MESHTP_CHECK(dst.count() == src.count(), "gpu backend: copying {} elements into {}", src.count(),
               dst.count());
  gpu::convert(ctx_, dst.data(), dst.type(), src.data(), src.type(), src.count());
}

std::int64_t GpuBackend::peak_bytes_in_use() const {
  return ctx_.allocator_stats().peak_bytes_in_use;
}

void GpuBackend::synchronize() { ctx_.synchronize(); }

// ---- views ----------------------------------------------------------------------------------

namespace {

class GpuEvent final : public Event {
 public:
  explicit GpuEvent(gpu::Context& ctx) : event_(ctx) {}
  bool done() override { return event_.done(); }
  void synchronize() override { event_.synchronize(); }
  const gpu::StreamEvent& cuda() const { return event_; }

 private:
  gpu::StreamEvent event_;
};

}  // namespace

std::shared_ptr<DeviceMemory> GpuBackend::device_memory() {
  if (!memory_) memory_ = gpu::staging_memory(ctx_);
  return memory_;
}

// The runtime's mixed precision (tensor/gemm.hpp gemm_precision(), set for a run by
// ScopedGemmPrecision): under bf16, or when the other operand is stored in bf16 (a layer's
// saved GeMM input, model/block.hpp), an fp32 operand is rounded to bf16 (nearest even, as
// the host rounds) into a scratch array of its own, and the product runs on the tensor cores
// with fp32 accumulation into C — the CPU backend's bf16 GeMM, C = α·op(bf16(A))·op(bf16(B))
// + β·C, on the GPU. The scratch goes back to the caching allocator when the call returns, for
// the next allocation on this stream, which runs after this GeMM.
View GpuBackend::compute_operand(const View& v, const View& other, Array& scratch) {
  const bool bf16 = gemm_precision() == Precision::kBf16 || other.type == Element::kBF16;
  if (v.type != Element::kF32 || !bf16 || v.rows == 0) return v;
  scratch = alloc(v.rows * v.cols, Element::kBF16);
  const View rounded = scratch.view(v.rows, v.cols);
  gpu::copy_2d(ctx_, rounded, v);
  return rounded;
}

void GpuBackend::gemm(const View& c, const View& a, Trans trans_a, const View& b, Trans trans_b,
                      float alpha, float beta, Epilogue epilogue, const View& bias) {
  if (epilogue != Epilogue::kNone) {
    MESHTP_CHECK(bias.rows == 1 && bias.cols == c.cols && bias.type == c.type,
                 "gpu backend: the GeMM's bias is {}, C is {}: it needs {} 1x{}", describe(bias),
                 describe(c), to_string(c.type), c.cols);
  }
  Array a_scratch, b_scratch;
  gpu::gemm(ctx_, compute_operand(a, b, a_scratch), trans_a, compute_operand(b, a, b_scratch),
            trans_b, c, alpha, beta, epilogue, epilogue == Epilogue::kNone ? nullptr : bias.data);
}

void GpuBackend::copy(const View& dst, const View& src) { gpu::copy_2d(ctx_, dst, src); }
void GpuBackend::add(const View& dst, const View& src) { gpu::add_2d(ctx_, dst, src); }
void GpuBackend::zero(const View& dst) { gpu::zero_2d(ctx_, dst); }

void GpuBackend::residual_grad(const View& d, const View& dy) { gpu::copy_2d(ctx_, d, dy); }

// sum may be a or b: add the other into it; else a copied, b added (no kernel of its own).
void GpuBackend::residual(const View& sum, const View& a, const View& b) {
  if (sum.data == b.data) {
    gpu::add_2d(ctx_, sum, a);
  } else {
    if (sum.data != a.data) gpu::copy_2d(ctx_, sum, a);
    gpu::add_2d(ctx_, sum, b);
  }
}

// Both as GeMMs with a vector of ones (no kernel of their own): y += 1ᵀ(rows)·bias is the
// rank-1 product ones(rows × 1)·bias(1 × cols); db += ones(1 × rows)·dy.
void GpuBackend::add_bias(const View& y, const View& bias) {
  MESHTP_CHECK(bias.rows == 1 && bias.cols == y.cols && bias.type == y.type,
               "gpu backend: the bias is {}, y is {}: it needs {} 1x{}", describe(bias),
               describe(y), to_string(y.type), y.cols);
  if (y.rows == 0) return;
  const View column = ones(y.rows, bias.type).view(y.rows, 1);
  gpu::gemm(ctx_, column, Trans::kNo, bias, Trans::kNo, y, 1.0f, 1.0f);
}

void GpuBackend::bias_grad(const View& db, const View& dy) {
  MESHTP_CHECK(db.rows == 1 && db.cols == dy.cols && db.type == Element::kF32,
               "gpu backend: db is {}, dy is {}: it needs fp32 1x{}", describe(db), describe(dy),
               dy.cols);
  if (dy.rows == 0) return;
  gpu::gemm(ctx_, ones(dy.rows, dy.type).view(1, dy.rows), Trans::kNo, dy, Trans::kNo, db, 1.0f,
            1.0f);
}

namespace {

// A view the packed kernels take: packed rows of `type` (they index row·cols + col).
void* packed(const View& v, Element type, std::int64_t rows, std::int64_t cols, const char* what) {
  MESHTP_CHECK(v.type == type && v.rows == rows && v.cols == cols && v.contiguous(),
               "gpu backend: {} is {}, the kernel needs {} {}x{} packed", what, describe(v),
               to_string(type), rows, cols);
  return v.data;
}

float* fp32_vector(const View& v, std::int64_t count, const char* what) {
  return static_cast<float*>(packed(v, Element::kF32, 1, count, what));
}

}  // namespace

// The norms, whole rows and phases, and the vocabulary shard's ops: gpu_ops.hpp's view ops
// (strided views; LayerNorm over packed whole rows on layernorm_forward/backward's kernels).
void GpuBackend::norm_forward(layout::Norm norm, const View& y, const View& mean, const View& rstd,
                              const View& x, const View& w, const View& b) {
  gpu::norm_forward(ctx_, norm, y, mean, rstd, x, w, b);
}

// The residual add, then the norm (two launches; the CPU fuses them row by row).
void GpuBackend::residual_norm_forward(layout::Norm norm, const View& sum, const View& y,
                                       const View& mean, const View& rstd, const View& a,
                                       const View& b_in, const View& w, const View& b) {
  residual(sum, a, b_in);
  norm_forward(norm, y, mean, rstd, sum, w, b);
}

void GpuBackend::norm_backward(layout::Norm norm, const View& dx, const View& dw, const View& db,
                               const View& dy, const View& x, const View& w, const View& mean,
                               const View& rstd) {
  gpu::norm_backward(ctx_, norm, dx, dw, db, dy, x, w, mean, rstd);
}

void GpuBackend::norm_forward_sums(layout::Norm norm, const View& sums, const View& x) {
  gpu::norm_shard_forward_sums(ctx_, norm, sums, x);
}

void GpuBackend::norm_forward_apply(layout::Norm norm, const View& y, const View& mean,
                                    const View& rstd, const View& x, const View& w, const View& b,
                                    const View& sums, std::int64_t c_global) {
  gpu::norm_shard_forward_apply(ctx_, norm, y, mean, rstd, x, w, b, sums, c_global);
}

void GpuBackend::norm_backward_sums(layout::Norm norm, const View& sums, const View& dw,
                                    const View& db, const View& dy, const View& x, const View& w,
                                    const View& mean, const View& rstd) {
  gpu::norm_shard_backward_sums(ctx_, norm, sums, dw, db, dy, x, w, mean, rstd);
}

void GpuBackend::norm_backward_apply(layout::Norm norm, const View& dx, const View& dy,
                                     const View& x, const View& w, const View& mean,
                                     const View& rstd, const View& sums, std::int64_t c_global) {
  gpu::norm_shard_backward_apply(ctx_, norm, dx, dy, x, w, mean, rstd, sums, c_global);
}

void GpuBackend::embedding_shard_forward(const View& out, std::span<const std::int32_t> tokens,
                                         const View& wte, std::int64_t begin) {
  gpu::embedding_shard_forward(ctx_, out, tokens, wte, begin);
}

void GpuBackend::embedding_shard_backward(const View& dwte, const View& dout,
                                          std::span<const std::int32_t> tokens,
                                          std::int64_t begin) {
  gpu::embedding_shard_backward(ctx_, dwte, dout, tokens, begin);
}

void GpuBackend::cross_entropy_shard_max(const View& logits, const View& row_max,
                                         std::int64_t begin, std::int64_t vocab_real) {
  gpu::cross_entropy_shard_max(ctx_, logits, row_max, begin, vocab_real);
}

void GpuBackend::cross_entropy_shard_sums(const View& sums, const View& logits, const View& row_max,
                                          std::span<const std::int32_t> targets, std::int64_t begin,
                                          std::int64_t vocab_real) {
  gpu::cross_entropy_shard_sums(ctx_, sums, logits, row_max, targets, begin, vocab_real);
}

double GpuBackend::cross_entropy_shard_loss(const View& lse, const View& row_max,
                                            const View& sums) {
  return gpu::cross_entropy_shard_loss(ctx_, lse, row_max, sums);
}

void GpuBackend::cross_entropy_shard_backward(const View& logits, const View& lse,
                                              std::span<const std::int32_t> targets,
                                              std::int64_t begin, float scale) {
  gpu::cross_entropy_shard_backward(ctx_, logits, lse, targets, begin, scale);
}

void GpuBackend::copy_blocks(std::span<const View> dst, std::span<const View> src) {
  MESHTP_CHECK(dst.size() == src.size(), "gpu backend: {} destination blocks for {} sources",
               dst.size(), src.size());
  for (std::size_t i = 0; i < src.size(); ++i) gpu::copy_2d(ctx_, dst[i], src[i]);
}

void GpuBackend::gemm_in_bands(const View& c, const View& a, Trans trans_a, const View& b,
                               Trans trans_b, float beta, int /*bands*/,
                               const std::function<void()>& between) {
  Array a_scratch, b_scratch;
  gpu::gemm(ctx_, compute_operand(a, b, a_scratch), trans_a, compute_operand(b, a, b_scratch),
            trans_b, c, 1.0f, beta);
  between();  // the GeMM is queued: the host pokes while the device computes
}

std::shared_ptr<Event> GpuBackend::record() { return std::make_shared<GpuEvent>(ctx_); }

void GpuBackend::wait(Event& event) {
  auto* cuda = dynamic_cast<GpuEvent*>(&event);
  MESHTP_CHECK(cuda != nullptr, "gpu backend: waiting for an event of another backend");
  cuda->cuda().wait_for(ctx_);
}

void* GpuBackend::native_stream() { return ctx_.stream(); }

const Array& GpuBackend::ones(std::int64_t n, Element type) {
  const auto key = std::make_pair(n, static_cast<int>(type));
  auto it = ones_.find(key);
  if (it == ones_.end()) {
    Array a = alloc(n, type);
    upload(a, std::vector<float>(static_cast<std::size_t>(n), 1.0f));
    it = ones_.emplace(key, std::move(a)).first;
  }
  return it->second;
}

std::vector<double> GpuBackend::sums_of_squares(std::span<const Array> arrays) {
  std::vector<std::span<const float>> vectors;
  for (const Array& a : arrays) {
    check(a, Element::kF32, a.count(), "a");
    vectors.emplace_back(f32_data(a), static_cast<std::size_t>(a.count()));
  }
  return gpu::sums_of_squares(ctx_, vectors);
}

double GpuBackend::sum_of_squares(const Array& a) {
  check(a, Element::kF32, a.count(), "a");
  return gpu::sum_of_squares(ctx_, f32_data(a), a.count());
}

void GpuBackend::scale(Array& a, float alpha) {
  check(a, Element::kF32, a.count(), "a");
  gpu::scale(ctx_, f32_data(a), alpha, a.count());
}

void GpuBackend::adamw_update(std::span<const AdamWParam> params, const AdamWStep& step) {
  std::vector<gpu::AdamWTensor> tensors;
  for (const AdamWParam& t : params) {
    const std::int64_t n = t.p.count();
    check(t.p, Element::kF32, n, "p");
    check(t.g, Element::kF32, n, "g");
    check(t.m, Element::kF32, n, "m");
    check(t.v, Element::kF32, n, "v");
    const bool separate = !t.p_compute.empty() && t.p_compute.data() != t.p.data();
    if (separate) check(t.p_compute, Element::kBF16, n, "p_compute");
    tensors.push_back({.p = f32_data(t.p),
                       .g = f32_data(t.g),
                       .m = f32_data(t.m),
                       .v = f32_data(t.v),
                       .n = n,
                       .p_compute = separate ? t.p_compute.data() : nullptr});
  }
  if (!tensors.empty()) gpu::adamw_update(ctx_, tensors, step);
}

std::int64_t GpuBackend::attention_scratch(std::int64_t b, std::int64_t t, std::int64_t nh) const {
  return gpu::attention_scratch_elements(b, t, nh);
}

// ---- a block's activations and attention core on views --------------------------------
// The existing kernels, which index packed rows: every view must be packed (the `packed`
// helper above refuses another, naming it). SwiGLU and RoPE take strided views.

void GpuBackend::gelu_forward(const View& y, const View& x) {
  const std::int64_t n = x.rows, d = x.cols;
  gpu::gelu_forward(ctx_, x.type, packed(y, x.type, n, d, "y"), packed(x, x.type, n, d, "x"),
                    n * d);
}

void GpuBackend::bias_gelu(const View& y, const View& pre, const View& bias) {
  const std::int64_t n = pre.rows, d = pre.cols;
  add_bias(pre, bias);
  gpu::gelu_forward(ctx_, pre.type, packed(y, pre.type, n, d, "y"),
                    packed(pre, pre.type, n, d, "pre"), n * d);
}

// A bf16 input beside fp32 gradients (a block's stored FC1 output): widened into a
// transient fp32 array for the kernels, which take one element type (a mixed-type kernel
// would save the copy and the transient).
View GpuBackend::activation_input(const View& x, const View& dx, Array& scratch) {
  if (x.type == dx.type) return x;
  scratch = alloc(x.rows * x.cols, dx.type);
  const View wide = scratch.view(x.rows, x.cols);
  gpu::copy_2d(ctx_, wide, x);
  return wide;
}

void GpuBackend::gelu_backward(const View& dx, const View& x_in, const View& dy) {
  Array scratch;
  const View x = activation_input(x_in, dx, scratch);
  const std::int64_t n = x.rows, d = x.cols;
  gpu::gelu_backward(ctx_, x.type, packed(dx, x.type, n, d, "dx"), packed(x, x.type, n, d, "x"),
                     packed(dy, x.type, n, d, "dy"), n * d);
}

void GpuBackend::swiglu_forward(const View& y, const View& x) { gpu::swiglu_forward(ctx_, y, x); }

void GpuBackend::swiglu_backward(const View& dx, const View& x, const View& dy) {
  Array scratch;
  gpu::swiglu_backward(ctx_, dx, activation_input(x, dx, scratch), dy);
}

void GpuBackend::attention_core_forward(const View& out, const View& att, const View& qkv,
                                        std::int64_t b, std::int64_t t, std::int64_t nh) {
  const std::int64_t hd = nh > 0 ? out.cols / nh : 0;
  gpu::attention_forward(ctx_, qkv.type, packed(out, qkv.type, b * t, nh * hd, "out"),
                         packed(att, qkv.type, 1, gpu::attention_scratch_elements(b, t, nh), "att"),
                         packed(qkv, qkv.type, b * t, 3 * nh * hd, "qkv"), b, t, nh, hd);
}

void GpuBackend::attention_core_backward(const View& dqkv, const View& scratch, const View& dout,
                                         const View& qkv, const View& att, std::int64_t b,
                                         std::int64_t t, std::int64_t nh) {
  const std::int64_t hd = nh > 0 ? dout.cols / nh : 0;
  const Element type = qkv.type;
  gpu::attention_backward(
      ctx_, type, packed(dqkv, type, b * t, 3 * nh * hd, "dqkv"),
      packed(scratch, type, 1, gpu::attention_scratch_elements(b, t, nh), "the scratch"),
      packed(dout, type, b * t, nh * hd, "dout"), packed(qkv, type, b * t, 3 * nh * hd, "qkv"),
      packed(att, type, 1, gpu::attention_scratch_elements(b, t, nh), "att"), b, t, nh, hd);
}

std::int64_t GpuBackend::flash_attention_scratch(const FlashAttention& a, std::int64_t tq,
                                                 std::int64_t, std::int64_t) const {
  return gpu::flash_attention_scratch_floats(a, tq);
}

namespace {

std::int64_t query_rows(const View& q, const FlashAttention& a) {
  return a.batch > 0 ? q.rows / a.batch : 0;
}

}  // namespace

void GpuBackend::flash_attention_forward(const View& out, const View& lse, const View&,
                                         const View& q, const View& k, const View& v,
                                         const FlashAttention& a) {
  gpu::flash_attention_forward(
      ctx_, out, fp32_vector(lse, a.batch * a.heads * query_rows(q, a), "lse"), q, k, v, a);
}

void GpuBackend::flash_attention_backward(const View& dq, const View& dk, const View& dv,
                                          const View& scratch, const View& dout, const View& q,
                                          const View& k, const View& v, const View& out,
                                          const View& lse, const FlashAttention& a) {
  const std::int64_t tq = query_rows(q, a);
  gpu::flash_attention_backward(
      ctx_, dq, dk, dv,
      fp32_vector(scratch, gpu::flash_attention_scratch_floats(a, tq), "the scratch"), dout, q, k,
      v, out, fp32_vector(lse, a.batch * a.heads * tq, "lse"), a);
}

void GpuBackend::flash_attention_merge(const View& out, const View& lse, const View& part,
                                       const View& part_lse, const FlashAttention& a) {
  const std::int64_t n = a.batch > 0 ? out.rows * a.heads : 0;
  gpu::flash_attention_merge(ctx_, out, fp32_vector(lse, n, "lse"), part,
                             fp32_vector(part_lse, n, "the partial lse"), a);
}

void GpuBackend::gather_rows(const View& dst, const View& src, std::span<const std::int64_t> index,
                             std::span<const float> scale) {
  gpu::gather_rows(ctx_, dst, src, index, scale);
}

void GpuBackend::scatter_add_rows(const View& dst, const View& src,
                                  std::span<const std::int64_t> index,
                                  std::span<const float> scale) {
  gpu::scatter_add_rows(ctx_, dst, src, index, scale);
}

std::vector<float> GpuBackend::row_dots(const View& a, std::span<const std::int64_t> index,
                                        const View& b) {
  return gpu::row_dots(ctx_, a, index, b);
}

void GpuBackend::rope(const View& x, const View& cos_sin, std::int64_t batch, std::int64_t heads,
                      bool backward) {
  gpu::rope(ctx_, x, cos_sin, batch, heads, backward);
}

}  // namespace meshtp::device
