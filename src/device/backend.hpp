// One entry point per op, whatever device runs it: the backend half of the runtime's seam
// (docs/seam.md). An interface with a CPU implementation (ops/cpu_backend.hpp: the reference
// ops of src/ops on host memory) and a GPU one (device/gpu_backend.hpp: gpu_ops.hpp on device
// memory). Code written against it runs on either, so its call order, shapes, transposes and
// "+=" bookkeeping are tested on the CPU, and only the op mapping of the GPU backend is left for
// a GPU to check (gpu_ops_test checks the ops).
//
// Two levels:
//   - views (core/view.hpp: offset, rows, cols, leading dimension, element type) and the ops
//     the distributed layers are written in: one strided GeMM with transposes, α, β and a
//     bias / bias+GeLU epilogue accumulating in fp32; a 2D copy (pack, unpack, convert); a 2D
//     add; the norms (whole rows, or in phases around a collective), the vocabulary shard's
//     embedding and cross-entropy, the activations, the attention cores, RoPE, rows by
//     index; events on the compute stream;
//   - whole arrays: what the training loop runs on every parameter (the gradient norm's
//     squares, clipping's scale, AdamW).
//
// Semantics are the CPU ops' (their headers give the math): a forward overwrites its output,
// a backward ADDS into its gradients ("+="), so a gradient array must be zeroed (or hold a
// sum) before the first backward adds to it.
//
//   shape letters: N rows (tokens), K input and M output features of a linear, C channels,
//   B batch, T sequence, NH heads, HD head dim (C = NH·HD)
//
// Arrays. An Array is `count` elements of one type owned by the backend that made it; its
// storage is freed when the last copy of the Array goes. A View into it (Array::view) owns
// nothing: the Array must outlive it. Both backends hold fp32, fp64 (a norm's sums) and
// bf16 arrays. bf16 is a storage format for GeMM operands (a layer's saved GeMM inputs under
// bf16 precision, model/block.hpp): gemm reads it, copy converts to and from it, zero clears
// it, the collectives move it (without reducing it); every other op computes on fp32 views.
//
// Streams and events. Every op is queued, in call order, on the backend's one compute stream
// (the GPU's; the CPU runs each op before the call returns). Communication runs beside it on
// the collectives' own stream (comm/communicator.hpp: NCCL's stream, or MPI's progress), and
// the two meet at events: record() marks what is queued so far, wait() holds later compute
// until an event is done. One compute stream, not several, because the caching allocator
// (device/gpu.hpp) hands a freed block to the next allocation on the same stream with no event:
// a second compute stream would need PyTorch's recordStream bookkeeping for every block.
//
// This header is plain C++ and header-only, so the CPU backend (in meshtp_ops) uses it
// without linking the CUDA backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/adamw_step.hpp"
#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "core/flash_attention_shape.hpp"
#include "core/view.hpp"
#include "device/gpu.hpp"  // plain C++, no CUDA header
#include "layout/vocabulary.hpp"  // layout::Norm
#include "tensor/gemm.hpp"  // Trans

namespace meshtp::device {

class Array {
 public:
  Array() = default;
  Array(std::shared_ptr<void> storage, Element type, std::int64_t count)
      : storage_(std::move(storage)), type_(type), count_(count) {}

  void* data() const { return storage_.get(); }
  Element type() const { return type_; }
  std::int64_t count() const { return count_; }
  bool empty() const { return count_ == 0; }

  // rows × cols elements from element `offset`, rows `ld` apart (the last row needs only
  // cols); throws, naming both, when the array is shorter. view(rows, cols): packed from 0.
  View view(std::int64_t offset, std::int64_t rows, std::int64_t cols, std::int64_t ld) const {
    MESHTP_CHECK(offset >= 0 && rows >= 0 && cols >= 0 && ld >= cols &&
                     (rows == 0 || offset + (rows - 1) * ld + cols <= count_),
                 "a view of {}x{} (ld {}) at element {} does not fit an array of {} {} elements",
                 rows, cols, ld, offset, count_, to_string(type_));
    auto* base = static_cast<char*>(storage_.get());
    return {base + static_cast<std::size_t>(offset) * element_size(type_), type_, rows, cols, ld};
  }
  View view(std::int64_t rows, std::int64_t cols) const { return view(0, rows, cols, cols); }
  // Elements [offset, offset + count) as an array of their own, sharing this one's storage
  // (which it keeps alive): a part of a packed buffer that an Array-taking op updates.
  Array slice(std::int64_t offset, std::int64_t count) const {
    MESHTP_CHECK(offset >= 0 && count >= 0 && offset + count <= count_,
                 "a slice of {} elements at {} does not fit an array of {}", count, offset, count_);
    auto* base = static_cast<char*>(storage_.get());
    return Array(std::shared_ptr<void>(
                     storage_, base + static_cast<std::size_t>(offset) * element_size(type_)),
                 type_, count);
  }

 private:
  std::shared_ptr<void> storage_;
  Element type_ = Element::kF32;
  std::int64_t count_ = 0;
};

// An fp32 array's elements as a span: the handle the layers that take spans pass on to their
// backend and transports. Only the host reads it, and only where the backend's memory is the
// host's (Backend::device_memory() == nullptr); edit_on_host below works on any backend.
inline std::span<float> floats(const Array& a) {
  MESHTP_CHECK(a.type() == Element::kF32, "an fp32 span of an {} array", to_string(a.type()));
  return {static_cast<float*>(a.data()), static_cast<std::size_t>(a.count())};
}

// One parameter tensor of an AdamW update: the fp32 master p, its fp32 gradient and moments,
// and the compute copy the forward reads (the same array as p in fp32; a bf16 array the update
// rewrites from p in mixed precision).
struct AdamWParam {
  Array p, g, m, v, p_compute;
};

// The per-row sums a normalisation's phase leaves for its group's all-reduce (fp64): LayerNorm
// two per row ([Σx | Σx²] forward, [Σg | Σg·x̂] backward), RMSNorm one (Σx², Σg·x̂).
inline std::int64_t norm_sum_count(layout::Norm norm, std::int64_t rows) {
  return norm == layout::Norm::kLayerNorm ? 2 * rows : rows;
}

// What a GeMM does to its result before storing it (cuBLASLt's epilogues):
enum class Epilogue {
  kNone,      // C = α·op(A)·op(B) + β·C
  kBias,      // … + bias (one value per column of C, broadcast over rows)
  kBiasGelu,  // gelu(… + bias), GeLU's tanh form (ops/gelu.hpp)
};

// The q, k and v column blocks of packed QKV rows (NH query and NKV key/value heads of
// q_width / NH columns each); throws, naming the widths, when qkv is not that wide.
struct QkvColumns {
  View q, k, v;
};
inline QkvColumns qkv_columns(const View& qkv, std::int64_t q_width, std::int64_t nh,
                              std::int64_t nkv) {
  MESHTP_CHECK(
      nh > 0 && nkv > 0 && q_width % nh == 0 && qkv.cols == q_width + 2 * (q_width / nh) * nkv,
      "packed qkv rows of {} columns for {} query and {} key/value heads of {} columns", qkv.cols,
      nh, nkv, nh > 0 ? q_width / nh : 0);
  const std::int64_t kw = q_width / nh * nkv;
  return {qkv.block(0, 0, qkv.rows, q_width), qkv.block(0, q_width, qkv.rows, kw),
          qkv.block(0, q_width + kw, qkv.rows, kw)};
}

// The checks of a row-index op (Backend::gather_rows, scatter_add_rows, row_dots): `listed`
// (the rows the index runs over) and `named` (the rows it names) views of one type and width,
// index of listed.rows entries each in [0, named.rows), scale empty or as long.
inline void check_row_index(const char* op, const View& listed, const View& named,
                            std::span<const std::int64_t> index, std::span<const float> scale) {
  MESHTP_CHECK(listed.type == named.type && listed.cols == named.cols &&
                   static_cast<std::int64_t>(index.size()) == listed.rows &&
                   (scale.empty() || scale.size() == index.size()),
               "{}: {} and {} with {} indices and {} scales (an index per row of the first, "
               "one type and width)",
               op, describe(listed), describe(named), index.size(), scale.size());
  for (std::size_t i = 0; i < index.size(); ++i) {
    MESHTP_CHECK(index[i] >= 0 && index[i] < named.rows,
                 "{}: index {} at position {} is outside [0, {})", op, index[i], i, named.rows);
  }
}

// A point in a backend's compute stream: done once every op queued before record() has run.
class Event {
 public:
  virtual ~Event() = default;
  virtual bool done() = 0;         // polls; never blocks
  virtual void synchronize() = 0;  // blocks the host until done
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "cpu", "gpu (NVIDIA H100 80GB HBM3)"

  // Storage: uninitialised, zeroed, filled from fp32 host values (rounded to nearest even
  // when the array is bf16), read back as fp32.
  virtual Array alloc(std::int64_t count, Element type) = 0;
  virtual void zero(Array& a) = 0;
  virtual void upload(Array& a, std::span<const float> values) = 0;
  virtual std::vector<float> download(const Array& a) = 0;
  // dst = src (same count; converts between element types).
  virtual void copy(Array& dst, const Array& src) = 0;
  // Waits for every queued op (the GPU's stream; nothing on the CPU).
  virtual void synchronize() = 0;
  // The most bytes of this backend's memory its arrays held at once, where the backend counts
  // them (a GPU's caching allocator); -1 where they are counted with the host's tensors (the
  // CPU: tensor/memory.hpp).
  virtual std::int64_t peak_bytes_in_use() const { return -1; }

  // ---- views: the primitives of the distributed layers --------------------------------
  // Where the arrays live, as a transport sees it: nullptr when they are host memory (a host
  // collective may read them), else the device memory a host-staged transport copies through
  // (comm::Communicator::host_staged).
  virtual std::shared_ptr<DeviceMemory> device_memory() = 0;
  // C = epilogue(α·op(A)·op(B) + β·C); op(A) m×k, op(B) k×n, C m×n, all strided views.
  // A and B each fp32 or bf16; a product with a bf16 operand, or under the run's bf16
  // precision (tensor/gemm.hpp), multiplies bf16 values (its fp32 operands rounded to nearest
  // even), so a bf16-stored operand gives the product of the fp32 one it was rounded from. C
  // fp32, or bf16 on a device that stores it; fp32 accumulation. The bias (kBias, kBiasGelu)
  // is a 1×n view of C's type. Throws, naming the shapes, when they do not chain.
  virtual void gemm(const View& c, const View& a, Trans trans_a, const View& b, Trans trans_b,
                    float alpha = 1.0f, float beta = 0.0f, Epilogue epilogue = Epilogue::kNone,
                    const View& bias = {}) = 0;
  // dst = src elementwise (same rows × cols; converts between element types): packing and
  // unpacking blocks, and casting.
  virtual void copy(const View& dst, const View& src) = 0;
  // dst += src (same rows × cols, one type).
  virtual void add(const View& dst, const View& src) = 0;
  // dst = 0 (any element type).
  virtual void zero(const View& dst) = 0;
  // sum = a + b (same rows × cols, one type; sum may be a or b): the residual stream's add;
  // and its backward into one input, d = dy (the gradient passes through).
  virtual void residual(const View& sum, const View& a, const View& b) = 0;
  virtual void residual_grad(const View& d, const View& dy) = 0;
  // y[i, :] += bias (a 1 × y.cols view), and db += Σ_i dy[i, :] (db 1 × dy.cols, fp32): a
  // linear's bias on its own, for layers whose product runs elsewhere (ops/linear.hpp).
  virtual void add_bias(const View& y, const View& bias) = 0;
  virtual void bias_grad(const View& db, const View& dy) = 0;
  // Normalisation over the rows of x (N × C): LayerNorm (y = x̂ ⊙ w + b) or RMSNorm
  // (y = x̂ ⊙ w, no b, no mean, its r kept in rstd), ops/layernorm.hpp and ops/rmsnorm.hpp
  // giving the math. w, b, dw, db are fp32 1 × C views, mean and rstd fp32 1 × N; a view the
  // norm has no use for is empty ({}). Whole rows:
  //   norm_forward           y = norm(x), saving mean and rstd
  //   residual_norm_forward  sum = a + b_in, then y = norm(sum): fused row by row on the CPU
  //   norm_backward          dx += ∂/∂x,  dw += Σ_n dy ⊙ x̂,  db += Σ_n dy
  // Rows whose C features are split over a group (parallel/layernorm_sharded.hpp) run each pass
  // in two phases around the group's all-reduce of `sums` (fp64 1 × norm_sum_count(norm, N)):
  //   norm_forward_sums(sums, x);              all-reduce;  norm_forward_apply(…, sums, C)
  //   norm_backward_sums(sums, dw, db, dy, …); all-reduce;  norm_backward_apply(…, sums, C)
  // (C: C_global, the features over the whole group); the backward's first phase also adds
  // this shard's complete dw, db (every row is here).
  virtual void norm_forward(layout::Norm norm, const View& y, const View& mean, const View& rstd,
                            const View& x, const View& w, const View& b) = 0;
  virtual void residual_norm_forward(layout::Norm norm, const View& sum, const View& y,
                                     const View& mean, const View& rstd, const View& a,
                                     const View& b_in, const View& w, const View& b) = 0;
  virtual void norm_backward(layout::Norm norm, const View& dx, const View& dw, const View& db,
                             const View& dy, const View& x, const View& w, const View& mean,
                             const View& rstd) = 0;
  virtual void norm_forward_sums(layout::Norm norm, const View& sums, const View& x) = 0;
  virtual void norm_forward_apply(layout::Norm norm, const View& y, const View& mean,
                                  const View& rstd, const View& x, const View& w, const View& b,
                                  const View& sums, std::int64_t c_global) = 0;
  virtual void norm_backward_sums(layout::Norm norm, const View& sums, const View& dw,
                                  const View& db, const View& dy, const View& x, const View& w,
                                  const View& mean, const View& rstd) = 0;
  virtual void norm_backward_apply(layout::Norm norm, const View& dx, const View& dy, const View& x,
                                   const View& w, const View& mean, const View& rstd,
                                   const View& sums, std::int64_t c_global) = 0;
  // A vocabulary shard (parallel/vocab_parallel.hpp): the token table's rows [begin, begin +
  // wte.rows) and the logits' columns [begin, begin + logits.cols) of a vocabulary whose real
  // tokens end at vocab_real (ops/embedding.hpp and ops/cross_entropy.hpp give the math).
  // Tokens and targets are host int32 ids, checked by the caller.
  //   embedding_shard_forward   out[n,:] = wte[t_n − begin,:] if the shard holds t_n, else 0
  //   embedding_shard_backward  dwte[t_n − begin,:] += dout[n,:]
  // The cross-entropy in phases around the group's reductions: row_max (fp32 1 × N) → max over
  // the shards; sums (fp32 1 × 2N) → sum; then lse (1 × N) and the mean loss, which the host
  // reads (so it waits for the device); the backward turns the logits into
  // scale·(softmax − onehot) in place.
  virtual void embedding_shard_forward(const View& out, std::span<const std::int32_t> tokens,
                                       const View& wte, std::int64_t begin) = 0;
  virtual void embedding_shard_backward(const View& dwte, const View& dout,
                                        std::span<const std::int32_t> tokens,
                                        std::int64_t begin) = 0;
  virtual void cross_entropy_shard_max(const View& logits, const View& row_max, std::int64_t begin,
                                       std::int64_t vocab_real) = 0;
  virtual void cross_entropy_shard_sums(const View& sums, const View& logits, const View& row_max,
                                        std::span<const std::int32_t> targets, std::int64_t begin,
                                        std::int64_t vocab_real) = 0;
  virtual double cross_entropy_shard_loss(const View& lse, const View& row_max,
                                          const View& sums) = 0;
  virtual void cross_entropy_shard_backward(const View& logits, const View& lse,
                                            std::span<const std::int32_t> targets,
                                            std::int64_t begin, float scale) = 0;
  // A block's activations (ops/gelu.hpp, ops/swiglu.hpp), on views of one shape:
  //   gelu_forward      y = gelu(x)
  //   bias_gelu         pre += bias (1 × D, every row), then y = gelu(pre) (y may be pre)
  //   gelu_backward     dx += dy ⊙ gelu'(x)
  //   swiglu_forward    y (N × F) = silu(a) ⊙ b of x = [a | b] (N × 2F)
  //   swiglu_backward   dx += [dy ⊙ b ⊙ silu'(a) | dy ⊙ silu(a)]
  // The backwards' x may be bf16 beside an fp32 dx and dy: a block's FC1 output stored in
  // bf16 (model/block.hpp), read as stored.
  // The causal attention core over packed q | k | v rows (B·T of them; HD = out.cols / NH):
  //   attention_core_*  unfused (ops/attention.hpp): qkv (B·T × 3·NH·HD) → out (B·T × NH·HD),
  //                     the probabilities att (1 × B·NH·T·T) saved; the backward adds into
  //                     dqkv with attention_scratch(B, T, NH) elements of scratch
  //   flash_attention_* fused (ops/flash_attention.hpp, nothing T × T): q (B·Tq × NH·HD), k, v
  //                     (B·Tk × NKV·HD, grouped-query: query head h reads KV head h/(NH/NKV)),
  //                     strided views of one type — the column blocks of a packed q | k | v
  //                     projection (flash_attention_qkv_* below), or a ring step's chunks —
  //                     at the absolute positions a.q_pos, a.k_pos (a row sees a key at or
  //                     before its own position); out (B·Tq × NH·HD) and lse (fp32 1 × B·NH·Tq,
  //                     [(b·NH + h)·Tq + t]) written, a row that sees no key getting 0 and −∞;
  //                     the backward adds into dq, dk, dv given the FINAL out and lse (after
  //                     every key range was merged); scratch is fp32 1 ×
  //                     flash_attention_scratch(a, Tq, Tk, HD), whose size is the backend's
  //   flash_attention_merge  (out, lse) ← the attention over both key sets of (out, lse) and a
  //                     partial result (part, part_lse) over a disjoint one (lse's layout)
  virtual void gelu_forward(const View& y, const View& x) = 0;
  virtual void bias_gelu(const View& y, const View& pre, const View& bias) = 0;
  virtual void gelu_backward(const View& dx, const View& x, const View& dy) = 0;
  virtual void swiglu_forward(const View& y, const View& x) = 0;
  virtual void swiglu_backward(const View& dx, const View& x, const View& dy) = 0;
  virtual void attention_core_forward(const View& out, const View& att, const View& qkv,
                                      std::int64_t b, std::int64_t t, std::int64_t nh) = 0;
  virtual void attention_core_backward(const View& dqkv, const View& scratch, const View& dout,
                                       const View& qkv, const View& att, std::int64_t b,
                                       std::int64_t t, std::int64_t nh) = 0;
  virtual std::int64_t flash_attention_scratch(const FlashAttention& a, std::int64_t tq,
                                               std::int64_t tk, std::int64_t hd) const = 0;
  virtual void flash_attention_forward(const View& out, const View& lse, const View& scratch,
                                       const View& q, const View& k, const View& v,
                                       const FlashAttention& a) = 0;
  virtual void flash_attention_backward(const View& dq, const View& dk, const View& dv,
                                        const View& scratch, const View& dout, const View& q,
                                        const View& k, const View& v, const View& out,
                                        const View& lse, const FlashAttention& a) = 0;
  virtual void flash_attention_merge(const View& out, const View& lse, const View& part,
                                     const View& part_lse, const FlashAttention& a) = 0;
  // Causal self-attention over the packed rows of a QKV projection, qkv (B·T × (NH + 2·NKV)·HD)
  // = [q | k | v]: the views above on its column blocks, positions 0 … T−1.
  std::int64_t flash_attention_qkv_scratch(std::int64_t b, std::int64_t t, std::int64_t nh,
                                           std::int64_t nkv, std::int64_t hd) const {
    return flash_attention_scratch({.batch = b, .heads = nh, .kv_heads = nkv}, t, t, hd);
  }
  void flash_attention_qkv_forward(const View& out, const View& lse, const View& scratch,
                                   const View& qkv, std::int64_t b, std::int64_t t, std::int64_t nh,
                                   std::int64_t nkv) {
    MESHTP_CHECK(qkv.rows == b * t, "fused attention: qkv has {} rows, B·T = {}·{}", qkv.rows, b,
                 t);
    const QkvColumns c = qkv_columns(qkv, out.cols, nh, nkv);
    flash_attention_forward(out, lse, scratch, c.q, c.k, c.v,
                            {.batch = b, .heads = nh, .kv_heads = nkv});
  }
  void flash_attention_qkv_backward(const View& dqkv, const View& scratch, const View& dout,
                                    const View& qkv, const View& out, const View& lse,
                                    std::int64_t b, std::int64_t t, std::int64_t nh,
                                    std::int64_t nkv) {
    MESHTP_CHECK(qkv.rows == b * t, "fused attention: qkv has {} rows, B·T = {}·{}", qkv.rows, b,
                 t);
    const QkvColumns c = qkv_columns(qkv, out.cols, nh, nkv);
    const QkvColumns d = qkv_columns(dqkv, out.cols, nh, nkv);
    flash_attention_backward(d.q, d.k, d.v, scratch, dout, c.q, c.k, c.v, out, lse,
                             {.batch = b, .heads = nh, .kv_heads = nkv});
  }
  // RoPE in place (ops/rope.hpp): x (B·T × heads·HD) rotated by the table cos_sin (fp32,
  // ≥ T positions × HD, in this backend's memory), or rotated back (backward: the gradient).
  virtual void rope(const View& x, const View& cos_sin, std::int64_t batch, std::int64_t heads,
                    bool backward) = 0;
  // Rows by index, the mixture of experts' permutations, combine and their backwards
  // (ops/moe.hpp): index and scale are host lists (scale empty: every factor 1), checked by
  // check_row_index (below) before anything runs:
  //   gather_rows       dst[i, :] = scale[i] · src[index[i], :]      (i < dst.rows)
  //   scatter_add_rows  dst[index[i], :] += scale[i] · src[i, :]     (i < src.rows, in order of
  //                     i: a row several sources name sums them in that order)
  //   row_dots          Σ_c a[index[i], c] · b[i, c] for every row i of b (summed in double),
  //                     to the host (so it waits for the device)
  virtual void gather_rows(const View& dst, const View& src, std::span<const std::int64_t> index,
                           std::span<const float> scale) = 0;
  virtual void scatter_add_rows(const View& dst, const View& src,
                                std::span<const std::int64_t> index,
                                std::span<const float> scale) = 0;
  virtual std::vector<float> row_dots(const View& a, std::span<const std::int64_t> index,
                                      const View& b) = 0;
  // dst[i] = src[i] for every pair, as one operation: packing a slice's blocks into one
  // message and back (the simulated build charges or skips them together). Each pair is of
  // one element type (fp32, or a 2D GeMM's bf16 operand blocks).
  virtual void copy_blocks(std::span<const View> dst, std::span<const View> src) = 0;
  // C = op(A)·op(B) + β·C while communication progresses: a backend that computes on the
  // host (the CPU, whose MPI progresses only inside MPI calls) cuts it into `bands` bands of
  // C's rows and calls between() after every band but the last; a backend that queues (the
  // GPU) queues one GeMM and calls between() once, while the device computes.
  virtual void gemm_in_bands(const View& c, const View& a, Trans trans_a, const View& b,
                             Trans trans_b, float beta, int bands,
                             const std::function<void()>& between) = 0;
  // An event after everything queued so far, and: later ops wait for `event` (which may come
  // from a collective's stream through its own event). The CPU's are done when made.
  virtual std::shared_ptr<Event> record() = 0;
  virtual void wait(Event& event) = 0;
  // The compute stream (a cudaStream_t), what comm::Communicator::nccl orders its stream
  // after; nullptr on the CPU.
  virtual void* native_stream() = 0;

  // ---- whole arrays: what the training loop runs on every parameter -------------------
  // Σ a² of an fp32 array (summed in double; waits for the device), and a ← α·a: gradient
  // clipping's two halves.
  virtual double sum_of_squares(const Array& a) = 0;
  // The same for many arrays, one value each, with one wait for the device (the gradient
  // norm's, over every parameter): the arrays one by one unless a backend batches them.
  virtual std::vector<double> sums_of_squares(std::span<const Array> arrays) {
    std::vector<double> out;
    out.reserve(arrays.size());
    for (const Array& a : arrays) out.push_back(sum_of_squares(a));
    return out;
  }
  virtual void scale(Array& a, float alpha) = 0;
  // AdamW (core/adamw_step.hpp) on every tensor, with one step's constants for all of them
  // (so one launch on the GPU: its multi-tensor kernel), then each p_compute ← p.
  virtual void adamw_update(std::span<const AdamWParam> params, const AdamWStep& step) = 0;
  // Elements of scratch the unfused attention core's backward needs (attention_core_backward).
  virtual std::int64_t attention_scratch(std::int64_t b, std::int64_t t, std::int64_t nh) const = 0;
};

// f(std::span<float>) over an fp32 array's elements on the host, and the result kept: the
// array's own memory where `backend`'s is the host's, else a copy downloaded before f and
// uploaded after it. read_on_host: the same, read only (nothing uploaded). For what the host
// computes once (initialisation, loading and gathering parameters, scattering inputs), not
// for a step's work, which runs through the backend.
template <class F>
void edit_on_host(Backend& backend, Array& a, F&& f) {
  if (backend.device_memory() == nullptr) {
    f(floats(a));
    return;
  }
  std::vector<float> host = backend.download(a);
  f(std::span<float>(host));
  backend.upload(a, host);
}
template <class F>
decltype(auto) read_on_host(Backend& backend, const Array& a, F&& f) {
  if (backend.device_memory() == nullptr) return f(std::span<const float>(floats(a)));
  const std::vector<float> host = backend.download(a);
  return f(std::span<const float>(host));
}

}  // namespace meshtp::device
