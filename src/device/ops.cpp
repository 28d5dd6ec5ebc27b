// The ops of gpu_ops.hpp: arguments checked (messages name the values), then the kernel
// launched on the context's compute stream (kernel_launch.hpp), then its launch status checked.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.hpp"
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
      launch_layernorm_forward(stream_of(ctx), type, y, mean, rstd, x, w, b, rows, cols, 1e-5f),
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

}  // namespace meshtp::gpu
