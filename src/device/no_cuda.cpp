// gpu.hpp and gpu_ops.hpp in a meshtp built without the CUDA toolkit: probe() says why there
// is no GPU, and making a Context throws saying the same. Everything else needs a Context, so
// it is unreachable; it is defined (to throw) only so that callers link.
#include "core/error.hpp"
#include "device/gpu.hpp"
#include "device/gpu_ops.hpp"

namespace meshtp::gpu {

namespace {
constexpr const char* kNoCuda =
    "built without CUDA (the CUDA toolkit was not found when meshtp was configured; "
    "docs/gpu.md says how to build with it)";
[[noreturn]] void no_cuda() { fail("no GPU to run on: {}", kNoCuda); }
}  // namespace

bool compiled_with_cuda() { return false; }

std::optional<DeviceInfo> probe(std::string* why_not) {
  if (why_not != nullptr) *why_not = kNoCuda;
  return std::nullopt;
}

std::optional<DeviceInfo> probe(int, std::string* why_not) { return probe(why_not); }

std::shared_ptr<DeviceMemory> staging_memory(Context&) { no_cuda(); }

struct Context::Impl {};
Context::Context(int) { no_cuda(); }
Context::~Context() = default;
const DeviceInfo& Context::info() const { no_cuda(); }
void Context::synchronize() { no_cuda(); }
void Context::upload(void*, const void*, std::size_t) { no_cuda(); }
void Context::download(void*, const void*, std::size_t) { no_cuda(); }
void Context::fill_bytes(void*, int, std::size_t) { no_cuda(); }
Buffer Context::upload_values(std::span<const float>, Element) { no_cuda(); }
std::vector<float> Context::download_values(const Buffer&, Element, std::int64_t) { no_cuda(); }
AllocatorStats Context::allocator_stats() const { no_cuda(); }
void Context::release_cached() { no_cuda(); }
void* Context::stream() const { no_cuda(); }
void* Context::blaslt_handle() const { no_cuda(); }
void* Context::blas_handle() const { no_cuda(); }
void* Context::workspace() const { no_cuda(); }
std::size_t Context::workspace_bytes() const { no_cuda(); }
void* Context::allocate(std::size_t, std::size_t*) { no_cuda(); }
void Context::release(void*, std::size_t) noexcept {}

Buffer::Buffer(Context&, std::size_t) { no_cuda(); }
Buffer::~Buffer() = default;
Buffer::Buffer(Buffer&&) noexcept = default;
Buffer& Buffer::operator=(Buffer&&) noexcept = default;

StreamEvent::StreamEvent(Context&) { no_cuda(); }
StreamEvent::~StreamEvent() = default;
bool StreamEvent::done() const { no_cuda(); }
void StreamEvent::synchronize() const { no_cuda(); }
void StreamEvent::wait_for(Context&) const { no_cuda(); }

StreamTimer::StreamTimer(Context& ctx) : ctx_(ctx) { no_cuda(); }
StreamTimer::~StreamTimer() = default;
void StreamTimer::start() { no_cuda(); }
double StreamTimer::stop_ms() { no_cuda(); }

void gemm(Context&, const View&, Trans, const View&, Trans, const View&,
          float, float, Epilogue, const void*) {
  no_cuda();
}
void gelu_forward(Context&, Element, void*, const void*, std::int64_t) { no_cuda(); }
void gelu_backward(Context&, Element, void*, const void*, const void*, std::int64_t) { no_cuda(); }
void residual_forward(Context&, Element, void*, const void*, const void*, std::int64_t) {
  no_cuda();
}
void layernorm_forward(Context&, Element, void*, float*, float*, const void*, const float*,
                       const float*, std::int64_t, std::int64_t) {
  no_cuda();
}
void layernorm_backward(Context&, Element, void*, float*, float*, const void*, const void*,
                        const float*, const float*, const float*, std::int64_t, std::int64_t) {
  no_cuda();
}
void norm_forward(Context&, layout::Norm, const View&, const View&, const View&, const View&,
                  const View&, const View&) {
  no_cuda();
}
void norm_backward(Context&, layout::Norm, const View&, const View&, const View&, const View&,
                   const View&, const View&, const View&, const View&) {
  no_cuda();
}
void norm_shard_forward_sums(Context&, layout::Norm, const View&, const View&) { no_cuda(); }
void norm_shard_forward_apply(Context&, layout::Norm, const View&, const View&, const View&,
                              const View&, const View&, const View&, const View&, std::int64_t) {
  no_cuda();
}
void norm_shard_backward_sums(Context&, layout::Norm, const View&, const View&, const View&,
                              const View&, const View&, const View&, const View&, const View&) {
  no_cuda();
}
void norm_shard_backward_apply(Context&, layout::Norm, const View&, const View&, const View&,
                               const View&, const View&, const View&, const View&, std::int64_t) {
  no_cuda();
}
void embedding_shard_forward(Context&, const View&, std::span<const std::int32_t>, const View&,
                             std::int64_t) {
  no_cuda();
}
void embedding_shard_backward(Context&, const View&, const View&, std::span<const std::int32_t>,
                              std::int64_t) {
  no_cuda();
}
void cross_entropy_shard_max(Context&, const View&, const View&, std::int64_t, std::int64_t) {
  no_cuda();
}
void cross_entropy_shard_sums(Context&, const View&, const View&, const View&,
                              std::span<const std::int32_t>, std::int64_t, std::int64_t) {
  no_cuda();
}
double cross_entropy_shard_loss(Context&, const View&, const View&, const View&) { no_cuda(); }
void cross_entropy_shard_backward(Context&, const View&, const View&, std::span<const std::int32_t>,
                                  std::int64_t, float) {
  no_cuda();
}
double cross_entropy_forward(Context&, Element, float*, const void*, std::span<const std::int32_t>,
                             std::int64_t, std::int64_t, std::int64_t) {
  no_cuda();
}
void cross_entropy_backward(Context&, Element, void*, const void*, const float*,
                            std::span<const std::int32_t>, std::int64_t, std::int64_t, std::int64_t,
                            float) {
  no_cuda();
}
void embedding_forward(Context&, Element, void*, std::span<const std::int32_t>, std::int64_t,
                       std::int64_t, const void*, std::int64_t, const void*, std::int64_t) {
  no_cuda();
}
void embedding_backward(Context&, Element, float*, float*, const void*,
                        std::span<const std::int32_t>, std::int64_t, std::int64_t, std::int64_t,
                        std::int64_t) {
  no_cuda();
}
void attention_forward(Context&, Element, void*, void*, const void*, std::int64_t, std::int64_t,
                       std::int64_t, std::int64_t) {
  no_cuda();
}
void attention_backward(Context&, Element, void*, void*, const void*, const void*, const void*,
                        std::int64_t, std::int64_t, std::int64_t, std::int64_t) {
  no_cuda();
}
void flash_attention_forward(Context&, const View&, float*, const View&, const View&, const View&,
                             const FlashAttention&) {
  no_cuda();
}
void flash_attention_backward(Context&, const View&, const View&, const View&, float*, const View&,
                              const View&, const View&, const View&, const View&, const float*,
                              const FlashAttention&) {
  no_cuda();
}
void flash_attention_merge(Context&, const View&, float*, const View&, const float*,
                           const FlashAttention&) {
  no_cuda();
}
void gather_rows(Context&, const View&, const View&, std::span<const std::int64_t>,
                 std::span<const float>) {
  no_cuda();
}
void scatter_add_rows(Context&, const View&, const View&, std::span<const std::int64_t>,
                      std::span<const float>) {
  no_cuda();
}
std::vector<float> row_dots(Context&, const View&, std::span<const std::int64_t>, const View&) {
  no_cuda();
}
std::vector<double> sums_of_squares(Context&, std::span<const std::span<const float>>) {
  no_cuda();
}
void adamw_update(Context&, std::span<const AdamWTensor>, const AdamWStep&) { no_cuda(); }
void convert(Context&, void*, Element, const void*, Element, std::int64_t) { no_cuda(); }
void copy_2d(Context&, const View&, const View&) { no_cuda(); }
void add_2d(Context&, const View&, const View&) { no_cuda(); }
void swiglu_forward(Context&, const View&, const View&) { no_cuda(); }
void swiglu_backward(Context&, const View&, const View&, const View&) { no_cuda(); }
void rope(Context&, const View&, const View&, std::int64_t, std::int64_t, bool) { no_cuda(); }
void zero_2d(Context&, const View&) { no_cuda(); }
double sum_of_squares(Context&, const float*, std::int64_t) { no_cuda(); }
void scale(Context&, float*, float, std::int64_t) { no_cuda(); }

}  // namespace meshtp::gpu
