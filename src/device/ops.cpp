// The ops of gpu_ops.hpp: arguments checked (messages name the values), then the kernel
// launched on the context's compute stream (kernel_launch.hpp), then its launch status checked.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "core/norm_eps.hpp"
#include "device/cuda_check.hpp"
#include "device/gpu_ops.hpp"
#include "device/kernel_launch.hpp"

namespace meshtp::gpu {

namespace {

cudaStream_t stream_of(Context& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

void check_launch(cudaError_t status, const char* what) {
  MESHTP_CHECK(status == cudaSuccess, "CUDA launch of {} failed: {} ({})", what,
               cudaGetErrorName(status), cudaGetErrorString(status));
}

// Tokens or targets on the host → a device buffer, each checked against [0, limit) first.
Buffer upload_ids(Context& ctx, std::span<const std::int32_t> ids, std::int64_t limit,
                  const char* fn, const char* what) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    MESHTP_CHECK(ids[i] >= 0 && ids[i] < limit, "{}: {} {} at position {} is outside [0, {})", fn,
                 what, ids[i], i, limit);
  Buffer buffer(ctx, ids.size() * sizeof(std::int32_t));
  ctx.upload(buffer.data(), ids.data(), ids.size() * sizeof(std::int32_t));
  return buffer;
}

void check_count(std::int64_t n, const char* fn) {
  MESHTP_CHECK(n >= 0, "{}: negative element count {}", fn, n);
}

}  // namespace

void gelu_forward(Context& ctx, Element type, void* y, const void* x, std::int64_t n) {
  check_count(n, "gpu::gelu_forward");
  if (n == 0) return;
  check_launch(launch_gelu_forward(stream_of(ctx), type, y, x, n), "gelu_forward");
}

void gelu_backward(Context& ctx, Element type, void* dx, const void* x, const void* dy,
                   std::int64_t n) {
  check_count(n, "gpu::gelu_backward");
  if (n == 0) return;
  check_launch(launch_gelu_backward(stream_of(ctx), type, dx, x, dy, n), "gelu_backward");
}

void residual_forward(Context& ctx, Element type, void* y, const void* a, const void* b,
                      std::int64_t n) {
  check_count(n, "gpu::residual_forward");
  if (n == 0) return;
  check_launch(launch_add(stream_of(ctx), type, y, a, b, n), "residual_forward");
}

void convert(Context& ctx, void* y, Element y_type, const void* x, Element x_type, std::int64_t n) {
  check_count(n, "gpu::convert");
  if (n == 0) return;
  if (y_type == x_type) {
    MESHTP_CUDA(cudaMemcpyAsync(y, x, static_cast<std::size_t>(n) * element_size(x_type),
                                cudaMemcpyDeviceToDevice, stream_of(ctx)));
    return;
  }
  check_launch(launch_convert(stream_of(ctx), y, y_type, x, n), "convert");
}

namespace {

void check_same_shape(const View& dst, const View& src, const char* fn) {
  MESHTP_CHECK(dst.rows == src.rows && dst.cols == src.cols && dst.rows >= 0 && dst.cols >= 0,
               "{}: destination {} and source {} differ in shape", fn, describe(dst),
               describe(src));
  MESHTP_CHECK(dst.ld >= dst.cols && src.ld >= src.cols,
               "{}: a leading dimension is below its view's columns ({}, {})", fn, describe(dst),
               describe(src));
  for (const View* v : {&dst, &src})
    MESHTP_CHECK(v->type == Element::kF32 || v->type == Element::kBF16,
                 "{}: views are fp32 or bf16, not {}", fn, to_string(v->type));
}

}  // namespace

void copy_2d(Context& ctx, const View& dst, const View& src) {
  check_same_shape(dst, src, "gpu::copy_2d");
  if (dst.elements() == 0) return;
  if (dst.type == src.type) {
    const std::size_t width = static_cast<std::size_t>(dst.cols) * element_size(dst.type);
    MESHTP_CUDA(cudaMemcpy2DAsync(dst.data, static_cast<std::size_t>(dst.ld) * element_size(dst.type),
                                  src.data, static_cast<std::size_t>(src.ld) * element_size(src.type),
                                  width, static_cast<std::size_t>(dst.rows),
                                  cudaMemcpyDeviceToDevice, stream_of(ctx)));
    return;
  }
  check_launch(launch_copy_2d(stream_of(ctx), dst.data, dst.type, dst.ld, src.data, src.type,
                              src.ld, dst.rows, dst.cols),
               "copy_2d");
}

void add_2d(Context& ctx, const View& dst, const View& src) {
  check_same_shape(dst, src, "gpu::add_2d");
  MESHTP_CHECK(dst.type == src.type, "gpu::add_2d: {} += {}: one element type", describe(dst),
               describe(src));
  if (dst.elements() == 0) return;
  check_launch(
      launch_add_2d(stream_of(ctx), dst.type, dst.data, dst.ld, src.data, src.ld, dst.rows, dst.cols),
      "add_2d");
}

void zero_2d(Context& ctx, const View& dst) {
  check_same_shape(dst, dst, "gpu::zero_2d");
  if (dst.elements() == 0) return;
  const std::size_t bytes = element_size(dst.type);
  MESHTP_CUDA(cudaMemset2DAsync(dst.data, static_cast<std::size_t>(dst.ld) * bytes, 0,
                                static_cast<std::size_t>(dst.cols) * bytes,
                                static_cast<std::size_t>(dst.rows), stream_of(ctx)));
}

void layernorm_forward(Context& ctx, Element type, void* y, float* mean, float* rstd, const void* x,
                       const float* w, const float* b, std::int64_t rows, std::int64_t cols) {
  MESHTP_CHECK(cols > 0 && rows >= 0, "gpu::layernorm_forward: bad shape N={} C={}", rows, cols);
  if (rows == 0) return;
  check_launch(
      launch_layernorm_forward(stream_of(ctx), type, y, mean, rstd, x, w, b, rows, cols,
                               kLayerNormEps),
      "layernorm_forward");
}

void layernorm_backward(Context& ctx, Element type, void* dx, float* dw, float* db, const void* dy,
                        const void* x, const float* w, const float* mean, const float* rstd,
                        std::int64_t rows, std::int64_t cols) {
  MESHTP_CHECK(cols > 0 && rows >= 0, "gpu::layernorm_backward: bad shape N={} C={}", rows, cols);
  if (rows == 0) return;
  // Row slices for the dw/db sums: about 4 blocks per SM over the columns' blocks.
  const std::int64_t col_blocks = (cols + 255) / 256;
  const std::int64_t want = std::max<std::int64_t>(1, 4 * ctx.info().multiprocessors / col_blocks);
  check_launch(launch_layernorm_backward(stream_of(ctx), type, dx, dw, db, dy, x, w, mean, rstd,
                                         rows, cols, std::min(rows, want)),
               "layernorm_backward");
}

double cross_entropy_forward(Context& ctx, Element type, float* lse, const void* logits,
                             std::span<const std::int32_t> targets, std::int64_t rows,
                             std::int64_t classes, std::int64_t ld) {
  const char* fn = "gpu::cross_entropy_forward";
  MESHTP_CHECK(static_cast<std::int64_t>(targets.size()) == rows,
               "{}: {} targets for {} rows of logits", fn, targets.size(), rows);
  MESHTP_CHECK(classes > 0, "{}: logits have no classes (V=0)", fn);
  MESHTP_CHECK(ld >= classes, "{}: rows {} apart cannot hold {} classes", fn, ld, classes);
  if (rows == 0) return 0.0;
  const Buffer ids = upload_ids(ctx, targets, classes, fn, "target");
  Buffer losses(ctx, static_cast<std::size_t>(rows) * sizeof(float));
  check_launch(launch_cross_entropy_forward(stream_of(ctx), type, lse, losses.as<float>(), logits,
                                            ids.as<std::int32_t>(), rows, classes, ld),
               "cross_entropy_forward");
  std::vector<float> host(static_cast<std::size_t>(rows));
  ctx.download(host.data(), losses.data(), host.size() * sizeof(float));
  double total = 0.0;
  for (float l : host) total += l;
  return total / static_cast<double>(rows);
}

void cross_entropy_backward(Context& ctx, Element type, void* dlogits, const void* logits,
                            const float* lse, std::span<const std::int32_t> targets,
                            std::int64_t rows, std::int64_t classes, std::int64_t ld, float dloss) {
  const char* fn = "gpu::cross_entropy_backward";
  MESHTP_CHECK(static_cast<std::int64_t>(targets.size()) == rows,
               "{}: {} targets for {} rows of logits", fn, targets.size(), rows);
  MESHTP_CHECK(classes > 0, "{}: logits have no classes (V=0)", fn);
  MESHTP_CHECK(ld >= classes, "{}: rows {} apart cannot hold {} classes", fn, ld, classes);
  if (rows == 0) return;
  const Buffer ids = upload_ids(ctx, targets, classes, fn, "target");
  check_launch(launch_cross_entropy_backward(stream_of(ctx), type, dlogits, logits, lse,
                                             ids.as<std::int32_t>(), rows, classes, ld,
                                             dloss / static_cast<float>(rows)),
               "cross_entropy_backward");
}

void embedding_forward(Context& ctx, Element type, void* out, std::span<const std::int32_t> tokens,
                       std::int64_t batch, std::int64_t seq, const void* wte, std::int64_t vocab,
                       const void* wpe, std::int64_t channels) {
  const char* fn = "gpu::embedding_forward";
  MESHTP_CHECK(batch >= 0 && seq >= 0 && static_cast<std::int64_t>(tokens.size()) == batch * seq,
               "{}: {} tokens for B={} T={}", fn, tokens.size(), batch, seq);
  if (tokens.empty() || channels == 0) return;
  const Buffer ids = upload_ids(ctx, tokens, vocab, fn, "token");
  check_launch(launch_embedding_forward(stream_of(ctx), type, out, ids.as<std::int32_t>(), wte, wpe,
                                        batch * seq, seq, channels),
               "embedding_forward");
}

void embedding_backward(Context& ctx, Element type, float* dwte, float* dwpe, const void* dout,
                        std::span<const std::int32_t> tokens, std::int64_t batch, std::int64_t seq,
                        std::int64_t vocab, std::int64_t channels) {
  const char* fn = "gpu::embedding_backward";
  MESHTP_CHECK(batch >= 0 && seq >= 0 && static_cast<std::int64_t>(tokens.size()) == batch * seq,
               "{}: {} tokens for B={} T={}", fn, tokens.size(), batch, seq);
  if (tokens.empty() || channels == 0) return;
  const Buffer ids = upload_ids(ctx, tokens, vocab, fn, "token");
  check_launch(launch_embedding_backward(stream_of(ctx), type, dwte, dwpe, dout,
                                         ids.as<std::int32_t>(), batch * seq, seq, channels),
               "embedding_backward");
}

// ---- normalisations and vocabulary shards on strided views ----------------------------------

namespace {

bool is_activation(Element t) { return t == Element::kF32 || t == Element::kBF16; }

// v is rows × cols of `type` (any leading dimension ≥ cols); throws naming the view.
void check_matrix(const char* fn, const View& v, Element type, std::int64_t rows, std::int64_t cols,
                  const char* what) {
  MESHTP_CHECK(is_activation(type) && v.type == type && v.rows == rows && v.cols == cols &&
                   v.ld >= cols && (v.data != nullptr || rows * cols == 0),
               "{}: {} is {}, the op needs {} {}x{}", fn, what, describe(v), to_string(type), rows,
               cols);
}

// v is a 1 × count vector of `type`.
void check_vector(const char* fn, const View& v, Element type, std::int64_t count,
                  const char* what) {
  MESHTP_CHECK(
      v.type == type && v.rows == 1 && v.cols == count && (v.data != nullptr || count == 0),
      "{}: {} is {}, the op needs {} 1x{}", fn, what, describe(v), to_string(type), count);
}

void check_activation(const char* fn, const View& x, const char* what) {
  MESHTP_CHECK(is_activation(x.type) && x.rows >= 0 && x.cols >= 0 && x.ld >= x.cols,
               "{}: {} is {}: activations are fp32 or bf16 views", fn, what, describe(x));
}

bool rms(layout::Norm norm) { return norm == layout::Norm::kRmsNorm; }

// The fp32 pointer of a checked vector view.
float* fp32(const View& v) { return static_cast<float*>(v.data); }

// The norm's fp64 sums for `rows` rows of x.
double* norm_sums(const char* fn, layout::Norm norm, const View& sums, std::int64_t rows) {
  check_vector(fn, sums, Element::kF64, device::norm_sum_count(norm, rows), "the sums");
  return static_cast<double*>(sums.data);
}

void check_c_global(const char* fn, std::int64_t c_global, std::int64_t cols) {
  MESHTP_CHECK(c_global > 0 && c_global >= cols,
               "{}: c_global={} is not positive or is less than the local features {}", fn,
               c_global, cols);
}

// Row slices for the dw/db sums: about 4 blocks per SM over the columns' blocks.
std::int64_t weight_slices(Context& ctx, std::int64_t rows, std::int64_t cols) {
  const std::int64_t col_blocks = std::max<std::int64_t>(1, (cols + 255) / 256);
  const std::int64_t want = std::max<std::int64_t>(1, 4 * ctx.info().multiprocessors / col_blocks);
  return std::max<std::int64_t>(1, std::min(rows, want));
}

// Ids on the host → a device buffer, unchecked (the vocabulary shard's ops skip ids the shard
// does not hold; the caller checks them against the vocabulary).
Buffer upload_shard_ids(Context& ctx, std::span<const std::int32_t> ids) {
  Buffer buffer(ctx, std::max<std::size_t>(ids.size(), 1) * sizeof(std::int32_t));
  if (!ids.empty()) ctx.upload(buffer.data(), ids.data(), ids.size() * sizeof(std::int32_t));
  return buffer;
}

// The shard's real columns: those below vocab_real (ops/cross_entropy.cpp's real_columns).
std::int64_t real_columns(std::int64_t begin, std::int64_t cols, std::int64_t vocab_real) {
  return std::clamp<std::int64_t>(vocab_real - begin, 0, cols);
}

}  // namespace

void norm_forward(Context& ctx, layout::Norm norm, const View& y, const View& mean,
                  const View& rstd, const View& x, const View& w, const View& b) {
  const char* fn = "gpu::norm_forward";
  check_activation(fn, x, "x");
  const std::int64_t n = x.rows, c = x.cols;
  MESHTP_CHECK(c > 0, "{}: x is {}: an empty last dim (C=0)", fn, describe(x));
  check_matrix(fn, y, x.type, n, c, "y");
  check_vector(fn, rstd, Element::kF32, n, "rstd");
  check_vector(fn, w, Element::kF32, c, "w");
  if (!rms(norm)) {
    check_vector(fn, mean, Element::kF32, n, "mean");
    check_vector(fn, b, Element::kF32, c, "b");
  }
  if (n == 0) return;
  if (!rms(norm) && x.contiguous() && y.contiguous()) {
    layernorm_forward(ctx, x.type, y.data, fp32(mean), fp32(rstd), x.data, fp32(w), fp32(b), n, c);
    return;
  }
  check_launch(launch_norm_forward_apply(stream_of(ctx), x.type, rms(norm), y.data, y.ld,
                                         rms(norm) ? nullptr : fp32(mean), fp32(rstd), x.data, x.ld,
                                         fp32(w), rms(norm) ? nullptr : fp32(b), nullptr, n, c, c,
                                         rms(norm) ? kRmsNormEps : kLayerNormEps),
               "norm_forward");
}

void norm_backward(Context& ctx, layout::Norm norm, const View& dx, const View& dw, const View& db,
                   const View& dy, const View& x, const View& w, const View& mean,
                   const View& rstd) {
  const char* fn = "gpu::norm_backward";
  check_activation(fn, x, "x");
  const std::int64_t n = x.rows, c = x.cols;
  MESHTP_CHECK(c > 0, "{}: x is {}: an empty last dim (C=0)", fn, describe(x));
  check_matrix(fn, dx, x.type, n, c, "dx");
  check_matrix(fn, dy, x.type, n, c, "dy");
  check_vector(fn, dw, Element::kF32, c, "dw");
  check_vector(fn, w, Element::kF32, c, "w");
  check_vector(fn, rstd, Element::kF32, n, "rstd");
  if (!rms(norm)) {
    check_vector(fn, db, Element::kF32, c, "db");
    check_vector(fn, mean, Element::kF32, n, "mean");
  }
  if (n == 0) return;
  if (!rms(norm) && x.contiguous() && dx.contiguous() && dy.contiguous()) {
    layernorm_backward(ctx, x.type, dx.data, fp32(dw), fp32(db), dy.data, x.data, fp32(w),
                       fp32(mean), fp32(rstd), n, c);
    return;
  }
  const float* mu = rms(norm) ? nullptr : fp32(mean);
  check_launch(
      launch_norm_backward_apply(stream_of(ctx), x.type, rms(norm), dx.data, dx.ld, dy.data, dy.ld,
                                 x.data, x.ld, fp32(w), mu, fp32(rstd), nullptr, n, c, c),
      "norm_backward");
  check_launch(launch_norm_backward_weights(stream_of(ctx), x.type, rms(norm), fp32(dw),
                                            rms(norm) ? nullptr : fp32(db), dy.data, dy.ld, x.data,
                                            x.ld, mu, fp32(rstd), n, c, weight_slices(ctx, n, c)),
               "norm_backward");
}

void norm_shard_forward_sums(Context& ctx, layout::Norm norm, const View& sums, const View& x) {
  const char* fn = "gpu::norm_shard_forward_sums";
  check_activation(fn, x, "x");
  double* s = norm_sums(fn, norm, sums, x.rows);
  if (x.rows == 0) return;
  check_launch(
      launch_norm_forward_sums(stream_of(ctx), x.type, rms(norm), s, x.data, x.ld, x.rows, x.cols),
      "norm_shard_forward_sums");
}

void norm_shard_forward_apply(Context& ctx, layout::Norm norm, const View& y, const View& mean,
                              const View& rstd, const View& x, const View& w, const View& b,
                              const View& sums, std::int64_t c_global) {
  const char* fn = "gpu::norm_shard_forward_apply";
  check_activation(fn, x, "x");
  const std::int64_t n = x.rows, c = x.cols;
  check_matrix(fn, y, x.type, n, c, "y");
  check_vector(fn, rstd, Element::kF32, n, "rstd");
  check_vector(fn, w, Element::kF32, c, "w");
  if (!rms(norm)) {
    check_vector(fn, mean, Element::kF32, n, "mean");
    check_vector(fn, b, Element::kF32, c, "b");
  }
  const double* s = norm_sums(fn, norm, sums, n);
  check_c_global(fn, c_global, c);
  if (n == 0) return;
  check_launch(launch_norm_forward_apply(stream_of(ctx), x.type, rms(norm), y.data, y.ld,
                                         rms(norm) ? nullptr : fp32(mean), fp32(rstd), x.data, x.ld,
                                         fp32(w), rms(norm) ? nullptr : fp32(b), s, n, c, c_global,
                                         rms(norm) ? kRmsNormEps : kLayerNormEps),
               "norm_shard_forward_apply");
}

void norm_shard_backward_sums(Context& ctx, layout::Norm norm, const View& sums, const View& dw,
                              const View& db, const View& dy, const View& x, const View& w,
                              const View& mean, const View& rstd) {
  const char* fn = "gpu::norm_shard_backward_sums";
  check_activation(fn, x, "x");
  const std::int64_t n = x.rows, c = x.cols;
  check_matrix(fn, dy, x.type, n, c, "dy");
  check_vector(fn, dw, Element::kF32, c, "dw");
  check_vector(fn, w, Element::kF32, c, "w");
  check_vector(fn, rstd, Element::kF32, n, "rstd");
  if (!rms(norm)) {
    check_vector(fn, db, Element::kF32, c, "db");
    check_vector(fn, mean, Element::kF32, n, "mean");
  }
  double* s = norm_sums(fn, norm, sums, n);
  if (n == 0) return;
  const float* mu = rms(norm) ? nullptr : fp32(mean);
  check_launch(launch_norm_backward_sums(stream_of(ctx), x.type, rms(norm), s, dy.data, dy.ld,
                                         x.data, x.ld, fp32(w), mu, fp32(rstd), n, c),
               "norm_shard_backward_sums");
  if (c == 0) return;
  check_launch(launch_norm_backward_weights(stream_of(ctx), x.type, rms(norm), fp32(dw),
                                            rms(norm) ? nullptr : fp32(db), dy.data, dy.ld, x.data,
                                            x.ld, mu, fp32(rstd), n, c, weight_slices(ctx, n, c)),
               "norm_shard_backward_sums");
}

void norm_shard_backward_apply(Context& ctx, layout::Norm norm, const View& dx, const View& dy,
                               const View& x, const View& w, const View& mean, const View& rstd,
                               const View& sums, std::int64_t c_global) {
  const char* fn = "gpu::norm_shard_backward_apply";
  check_activation(fn, x, "x");
  const std::int64_t n = x.rows, c = x.cols;
  check_matrix(fn, dx, x.type, n, c, "dx");
  check_matrix(fn, dy, x.type, n, c, "dy");
  check_vector(fn, w, Element::kF32, c, "w");
  check_vector(fn, rstd, Element::kF32, n, "rstd");
  if (!rms(norm)) check_vector(fn, mean, Element::kF32, n, "mean");
  const double* s = norm_sums(fn, norm, sums, n);
  check_c_global(fn, c_global, c);
  if (n == 0) return;
  check_launch(launch_norm_backward_apply(
                   stream_of(ctx), x.type, rms(norm), dx.data, dx.ld, dy.data, dy.ld, x.data, x.ld,
                   fp32(w), rms(norm) ? nullptr : fp32(mean), fp32(rstd), s, n, c, c_global),
               "norm_shard_backward_apply");
}

void embedding_shard_forward(Context& ctx, const View& out, std::span<const std::int32_t> tokens,
                             const View& wte, std::int64_t begin) {
  const char* fn = "gpu::embedding_shard_forward";
  check_activation(fn, wte, "wte");
  check_matrix(fn, out, wte.type, static_cast<std::int64_t>(tokens.size()), wte.cols, "out");
  if (out.elements() == 0) return;
  const Buffer ids = upload_shard_ids(ctx, tokens);
  check_launch(launch_embedding_shard_forward(stream_of(ctx), wte.type, out.data, out.ld,
                                              ids.as<std::int32_t>(), wte.data, wte.ld, wte.rows,
                                              begin, out.rows, out.cols),
               "embedding_shard_forward");
}

void embedding_shard_backward(Context& ctx, const View& dwte, const View& dout,
                              std::span<const std::int32_t> tokens, std::int64_t begin) {
  const char* fn = "gpu::embedding_shard_backward";
  check_activation(fn, dout, "dout");
  MESHTP_CHECK(static_cast<std::int64_t>(tokens.size()) == dout.rows, "{}: {} tokens for dout {}",
               fn, tokens.size(), describe(dout));
  MESHTP_CHECK(dwte.type == Element::kF32 && dwte.cols == dout.cols && dwte.rows >= 0 &&
                   dwte.ld >= dwte.cols,
               "{}: dwte is {}, the op needs fp32 with {} columns (dout {})", fn, describe(dwte),
               dout.cols, describe(dout));
  if (dout.elements() == 0 || dwte.rows == 0) return;
  const Buffer ids = upload_shard_ids(ctx, tokens);
  check_launch(launch_embedding_shard_backward(stream_of(ctx), dout.type, fp32(dwte), dwte.ld,
                                               dwte.rows, dout.data, dout.ld,
                                               ids.as<std::int32_t>(), begin, dout.rows, dout.cols),
               "embedding_shard_backward");
}

void cross_entropy_shard_max(Context& ctx, const View& logits, const View& row_max,
                             std::int64_t begin, std::int64_t vocab_real) {
  const char* fn = "gpu::cross_entropy_shard_max";
  check_activation(fn, logits, "the logits");
  check_vector(fn, row_max, Element::kF32, logits.rows, "row_max");
  if (logits.rows == 0) return;
  check_launch(launch_cross_entropy_shard_max(stream_of(ctx), logits.type, logits.data, logits.ld,
                                              fp32(row_max), logits.rows, logits.cols,
                                              real_columns(begin, logits.cols, vocab_real)),
               "cross_entropy_shard_max");
}

void cross_entropy_shard_sums(Context& ctx, const View& sums, const View& logits,
                              const View& row_max, std::span<const std::int32_t> targets,
                              std::int64_t begin, std::int64_t vocab_real) {
  const char* fn = "gpu::cross_entropy_shard_sums";
  check_activation(fn, logits, "the logits");
  const std::int64_t n = logits.rows;
  check_vector(fn, sums, Element::kF32, 2 * n, "the sums");
  check_vector(fn, row_max, Element::kF32, n, "row_max");
  MESHTP_CHECK(static_cast<std::int64_t>(targets.size()) == n, "{}: {} targets for {} rows", fn,
               targets.size(), n);
  if (n == 0) return;
  const Buffer ids = upload_shard_ids(ctx, targets);
  check_launch(
      launch_cross_entropy_shard_sums(stream_of(ctx), logits.type, fp32(sums), logits.data,
                                      logits.ld, fp32(row_max), ids.as<std::int32_t>(), begin, n,
                                      logits.cols, real_columns(begin, logits.cols, vocab_real)),
      "cross_entropy_shard_sums");
}

double cross_entropy_shard_loss(Context& ctx, const View& lse, const View& row_max,
                                const View& sums) {
  const char* fn = "gpu::cross_entropy_shard_loss";
  MESHTP_CHECK(lse.type == Element::kF32 && lse.rows == 1, "{}: lse is {}, the op needs fp32 1xN",
               fn, describe(lse));
  const std::int64_t n = lse.cols;
  check_vector(fn, row_max, Element::kF32, n, "row_max");
  check_vector(fn, sums, Element::kF32, 2 * n, "the sums");
  if (n == 0) return 0.0;
  check_launch(
      launch_cross_entropy_shard_lse(stream_of(ctx), fp32(lse), fp32(row_max), fp32(sums), n),
      "cross_entropy_shard_loss");
  // The mean on the host, in double and in the CPU op's order.
  std::vector<float> host_lse(static_cast<std::size_t>(n)), host_sums(2 * host_lse.size());
  ctx.download(host_lse.data(), lse.data, host_lse.size() * sizeof(float));
  ctx.download(host_sums.data(), sums.data, host_sums.size() * sizeof(float));
  double loss = 0.0;
  for (std::size_t r = 0; r < host_lse.size(); ++r)
    loss += static_cast<double>(host_lse[r]) - host_sums[2 * r + 1];
  return loss / static_cast<double>(n);
}

void cross_entropy_shard_backward(Context& ctx, const View& logits, const View& lse,
                                  std::span<const std::int32_t> targets, std::int64_t begin,
                                  float scale) {
  const char* fn = "gpu::cross_entropy_shard_backward";
  check_activation(fn, logits, "the logits");
  check_vector(fn, lse, Element::kF32, logits.rows, "lse");
  MESHTP_CHECK(static_cast<std::int64_t>(targets.size()) == logits.rows,
               "{}: {} targets for {} rows", fn, targets.size(), logits.rows);
  if (logits.elements() == 0) return;
  const Buffer ids = upload_shard_ids(ctx, targets);
  check_launch(launch_cross_entropy_shard_backward(stream_of(ctx), logits.type, logits.data,
                                                   logits.ld, fp32(lse), ids.as<std::int32_t>(),
                                                   begin, logits.rows, logits.cols, scale),
               "cross_entropy_shard_backward");
}

void adamw_update(Context& ctx, std::span<const AdamWTensor> tensors, const AdamWStep& step) {
  std::vector<AdamWChunk> chunks;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::int64_t n = tensors[i].n;
    MESHTP_CHECK(n >= 0, "gpu::adamw_update: a tensor of {} elements", n);
    const std::int64_t count = (n + kAdamWChunk - 1) / kAdamWChunk;
    MESHTP_CHECK(count <= std::numeric_limits<std::int32_t>::max(),
                 "gpu::adamw_update: a tensor of {} elements is over the kernel's limit", n);
    for (std::int64_t c = 0; c < count; ++c)
      chunks.push_back({static_cast<std::int32_t>(i), static_cast<std::int32_t>(c)});
  }
  if (chunks.empty()) return;
  MESHTP_CHECK(chunks.size() <= std::numeric_limits<std::int32_t>::max(),
               "gpu::adamw_update: {} chunks in one launch", chunks.size());
  // One upload: the tensors, then the chunks (8-byte entries after 8-byte-aligned ones).
  const std::size_t chunk_bytes = chunks.size() * sizeof(AdamWChunk);
  std::vector<std::byte> host(tensors.size_bytes() + chunk_bytes);
  std::memcpy(host.data(), tensors.data(), tensors.size_bytes());
  std::memcpy(host.data() + tensors.size_bytes(), chunks.data(), chunk_bytes);
  Buffer table(ctx, host.size());
  ctx.upload(table.data(), host.data(), host.size());
  check_launch(launch_adamw(stream_of(ctx), table.as<AdamWTensor>(),
                            reinterpret_cast<const AdamWChunk*>(
                                static_cast<const std::byte*>(table.data()) + tensors.size_bytes()),
                            static_cast<std::int64_t>(chunks.size()), step),
               "adamw_update");
}

void swiglu_forward(Context& ctx, const View& y, const View& x) {
  const char* fn = "gpu::swiglu_forward";
  check_activation(fn, x, "x");
  MESHTP_CHECK(x.cols % 2 == 0, "{}: x is {}: [gate | up] needs an even width", fn, describe(x));
  const std::int64_t n = x.rows, f = x.cols / 2;
  check_matrix(fn, y, x.type, n, f, "y");
  if (n * f == 0) return;
  check_launch(launch_swiglu_forward(stream_of(ctx), x.type, y.data, y.ld, x.data, x.ld, n, f),
               "swiglu_forward");
}

void swiglu_backward(Context& ctx, const View& dx, const View& x, const View& dy) {
  const char* fn = "gpu::swiglu_backward";
  check_activation(fn, x, "x");
  MESHTP_CHECK(x.cols % 2 == 0, "{}: x is {}: [gate | up] needs an even width", fn, describe(x));
  const std::int64_t n = x.rows, f = x.cols / 2;
  check_matrix(fn, dx, x.type, n, 2 * f, "dx");
  check_matrix(fn, dy, x.type, n, f, "dy");
  if (n * f == 0) return;
  check_launch(launch_swiglu_backward(stream_of(ctx), x.type, dx.data, dx.ld, x.data, x.ld,
                                      dy.data, dy.ld, n, f),
               "swiglu_backward");
}

void rope(Context& ctx, const View& x, const View& cos_sin, std::int64_t batch,
          std::int64_t heads, bool backward) {
  const char* fn = backward ? "gpu::rope_backward" : "gpu::rope_forward";
  check_activation(fn, x, "x");
  const std::int64_t hd = cos_sin.cols;
  MESHTP_CHECK(batch >= 1 && heads >= 1 && hd >= 2 && hd % 2 == 0 && x.cols == heads * hd &&
                   x.rows % batch == 0,
               "{}: x is {} for batch={} and heads={} of the table's head dim {}: it needs "
               "batch·T rows and heads·HD columns, HD even",
               fn, describe(x), batch, heads, hd);
  MESHTP_CHECK(cos_sin.type == Element::kF32 && cos_sin.ld >= hd && cos_sin.rows >= x.rows / batch,
               "{}: the table is {}, the op needs fp32 ≥ {} positions × {}", fn,
               describe(cos_sin), x.rows / batch, hd);
  if (x.rows == 0) return;
  check_launch(launch_rope(stream_of(ctx), x.type, x.data, x.ld, x.rows, heads, hd, batch,
                           fp32(cos_sin), cos_sin.ld, backward ? -1.0f : 1.0f),
               backward ? "rope_backward" : "rope_forward");
}

// ---- rows by index ----------------------------------------------------------------------

namespace {

template <typename T>
Buffer upload_list(Context& ctx, std::span<const T> values) {
  Buffer buffer(ctx, std::max<std::size_t>(values.size(), 1) * sizeof(T));
  if (!values.empty()) ctx.upload(buffer.data(), values.data(), values.size() * sizeof(T));
  return buffer;
}

}  // namespace

void gather_rows(Context& ctx, const View& dst, const View& src,
                 std::span<const std::int64_t> index, std::span<const float> scale) {
  device::check_row_index("gather_rows", dst, src, index, scale);
  if (dst.rows == 0 || dst.cols == 0) return;
  const Buffer i = upload_list(ctx, index), f = upload_list(ctx, scale);
  check_launch(launch_gather_rows(stream_of(ctx), dst.type, dst.data, dst.ld, src.data, src.ld,
                                  dst.rows, dst.cols, static_cast<const std::int64_t*>(i.data()),
                                  scale.empty() ? nullptr : static_cast<const float*>(f.data())),
               "gather_rows");
}

void scatter_add_rows(Context& ctx, const View& dst, const View& src,
                      std::span<const std::int64_t> index, std::span<const float> scale) {
  device::check_row_index("scatter_add_rows", src, dst, index, scale);
  if (src.rows == 0 || src.cols == 0) return;
  // Each destination row's sources, in index order (a counting sort: CSR lists).
  std::vector<std::int64_t> first(static_cast<std::size_t>(dst.rows + 1), 0), order(index.size());
  for (const std::int64_t r : index) ++first[static_cast<std::size_t>(r + 1)];
  for (std::size_t r = 1; r < first.size(); ++r) first[r] += first[r - 1];
  std::vector<std::int64_t> next(first.begin(), first.end() - 1);
  for (std::size_t i = 0; i < index.size(); ++i) {
    order[static_cast<std::size_t>(next[static_cast<std::size_t>(index[i])]++)] =
        static_cast<std::int64_t>(i);
  }
  const Buffer fb = upload_list(ctx, std::span<const std::int64_t>(first));
  const Buffer ob = upload_list(ctx, std::span<const std::int64_t>(order));
  const Buffer sb = upload_list(ctx, scale);
  check_launch(
      launch_scatter_add_rows(stream_of(ctx), dst.type, dst.data, dst.ld, src.data, src.ld,
                              dst.rows, dst.cols, static_cast<const std::int64_t*>(fb.data()),
                              static_cast<const std::int64_t*>(ob.data()),
                              scale.empty() ? nullptr : static_cast<const float*>(sb.data())),
      "scatter_add_rows");
}

std::vector<float> row_dots(Context& ctx, const View& a, std::span<const std::int64_t> index,
                            const View& b) {
  device::check_row_index("row_dots", b, a, index, {});
  std::vector<float> out(static_cast<std::size_t>(b.rows), 0.0f);
  if (b.rows == 0) return out;
  const Buffer i = upload_list(ctx, index);
  Buffer o(ctx, out.size() * sizeof(float));
  check_launch(
      launch_row_dots(stream_of(ctx), b.type, static_cast<float*>(o.data()), a.data, a.ld,
                      static_cast<const std::int64_t*>(i.data()), b.data, b.ld, b.rows, b.cols),
      "row_dots");
  ctx.download(out.data(), o.data(), out.size() * sizeof(float));
  ctx.synchronize();
  return out;
}

}  // namespace meshtp::gpu
